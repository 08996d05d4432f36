"""Later turns of multi-turn episodes on the `hf` engine: each episode's KV cache kept from one turn to the next,
against re-encoding the whole episode every turn.

    .venv/bin/python bench/turn_cache.py [--prompts 4] [--group 4] [--tokens 32] [--turns 4] [--obs 40] [--repeats 3]

SmolLM2-135M-Instruct, word problems through its chat template, temperature 1. The environment makes every turn a
call answered by a fixed observation of about `--obs` tokens (the model's own tool use is too rare to time), so
every episode runs `--turns` turns of at most `--tokens` tokens. The two arms differ only in
`SamplingConfig.reuse_turn_cache`; they alternate, the fastest of `--repeats` counts, and the ratio is printed
with the tokens each arm ran through the model (these machines are noisy: read the ratio).
Not here: the first turn (bench/episode_prefill.py), vLLM (its prefix cache does this on its engines).
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
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--obs", type=int, default=40)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    from bench.machine import describe

    print(describe(), flush=True)  # where this ran: figures from two machines side by side
    import dataclasses

    import torch

    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.models.device import resolve_threads
    from reasoning_rl.rollout.environments import Environment, Step
    from reasoning_rl.rollout.episodes import EpisodeLimits, run_episodes
    from reasoning_rl.models.load import load_policy
    from reasoning_rl.rollout import SamplingConfig, decode
    from reasoning_rl.task.embedded.arithmetic import make_rows

    class Answered(Environment):
        """Every segment a call; the observation a fixed block of output."""
        name = "answered"
        observation = "\n```output\n" + " ".join(str(i) for i in range(a.obs // 2)) + "\n```\n"

        def call_end(self, text):
            return len(text) if text else None

        def respond(self, states, segments):
            return [Step(observation=self.observation, tool_call=True, call=s) for s in segments]

    cfg = config.load(Config, overrides=["model.name_or_path=smollm2-135m-instruct", "tasks.max_digits=1",
                                         "tasks.families=[word_add, word_sub, word_mul, word_two]"])
    torch.set_num_threads(resolve_threads(cfg.num_threads, cfg.model.name_or_path))
    model, tok = load_policy(cfg, log=lambda *_: None)
    rows = [{"prompt_id": str(i), "prompt": tok.apply_chat_template([{"role": "user", "content": r["prompt"]}],
                                                                    tokenize=False, add_generation_prompt=True)}
            for i, r in enumerate(make_rows(cfg.tasks)[0][:a.prompts]) for _ in range(a.group)]
    limits = EpisodeLimits(max_turns=a.turns, max_tool_calls=a.turns, max_episode_tokens=a.turns * (a.tokens + a.obs * 2))
    fed = {True: 0, False: 0}
    real = decode.sample_kept

    def counting(reuse):
        def run(m, input_ids, attention_mask, *x, **k):
            fed[reuse] += int(attention_mask.sum())  # real tokens through the model before decoding
            return real(m, input_ids, attention_mask, *x, **k)
        return run

    best = {True: float("inf"), False: float("inf")}
    obs_tokens = len(tok(Answered.observation, add_special_tokens=False)["input_ids"])
    turns = 0
    for rep in range(a.repeats):
        for reuse in (True, False):
            decode.sample_kept, fed[reuse] = counting(reuse), 0
            s = dataclasses.replace(SamplingConfig(temperature=1.0, max_tokens=a.tokens, seed=rep),
                                    reuse_turn_cache=reuse)
            t = time.perf_counter()
            eps = run_episodes(model, tok, Answered(), rows, s, limits)
            best[reuse] = min(best[reuse], time.perf_counter() - t)
            turns = sum(len(e.turns) for e in eps) / len(eps)
    decode.sample_kept = real
    print(f"{a.prompts} prompts x {a.group} episodes, {turns:.1f} turns each of <= {a.tokens} tokens, observations of "
          f"{obs_tokens} tokens: cache kept {best[True]:.2f} s ({fed[True]} prompt tokens run), re-encoded "
          f"{best[False]:.2f} s ({fed[False]}) (fastest of {a.repeats}): {best[False] / best[True]:.2f}x")


if __name__ == "__main__":
    main()
