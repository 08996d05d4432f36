"""The first turn of a group's episodes on the `hf` engine: its prompt run once and copied, against once per episode.

    .venv/bin/python bench/episode_prefill.py [--prompts 4] [--group 4] [--tokens 64] [--repeats 3]

SmolLM2-135M-Instruct, word problems through its chat template with the Python tool named in the instruction,
`run_episodes` with the `python` environment (text format, up to 2 calls), temperature 1. The two arms differ only
in `SamplingConfig.share_prefill`; they alternate, the fastest of `--repeats` counts, and the ratio is printed (these
machines are noisy: read the ratio). Not here: later turns (each episode's ids differ after its first segment).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=4)
    ap.add_argument("--group", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    from bench.machine import describe

    print(describe(), flush=True)  # where this ran: figures from two machines side by side
    import torch

    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.models.device import resolve_threads
    from reasoning_rl.rollout.environments import PythonTool
    from reasoning_rl.rollout.episodes import EpisodeLimits, run_episodes
    from reasoning_rl.models.load import load_policy
    from reasoning_rl.rollout import SamplingConfig
    from reasoning_rl.task.embedded.arithmetic import make_rows

    cfg = config.load(Config, overrides=["model.name_or_path=smollm2-135m-instruct", "tasks.max_digits=1",
                                         "tasks.families=[word_add, word_sub, word_mul, word_two]"])
    torch.set_num_threads(resolve_threads(cfg.num_threads, cfg.model.name_or_path))
    model, tok = load_policy(cfg, log=lambda *_: None)
    text = "\nYou can run Python in a ```python block. Put the final answer in \\boxed{}."
    rows = [{"prompt_id": str(i), "prompt": tok.apply_chat_template([{"role": "user", "content": r["prompt"] + text}],
                                                                    tokenize=False, add_generation_prompt=True)}
            for i, r in enumerate(make_rows(cfg.tasks)[0][:a.prompts]) for _ in range(a.group)]
    env = PythonTool()
    limits = EpisodeLimits(max_turns=3, max_tool_calls=2, max_episode_tokens=3 * a.tokens)
    best = {True: float("inf"), False: float("inf")}
    try:
        for rep in range(a.repeats):
            for shared in (True, False):
                t = time.perf_counter()
                run_episodes(model, tok, env, rows, SamplingConfig(temperature=1.0, max_tokens=a.tokens, seed=rep,
                                                                   share_prefill=shared), limits)
                best[shared] = min(best[shared], time.perf_counter() - t)
    finally:
        env.shutdown()
    print(f"{a.prompts} prompts x {a.group} episodes, <= {a.tokens} tokens a turn: prefix shared {best[True]:.2f} s, "
          f"per episode {best[False]:.2f} s (fastest of {a.repeats}): {best[False] / best[True]:.2f}x")


if __name__ == "__main__":
    main()
