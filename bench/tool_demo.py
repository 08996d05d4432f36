"""Tool use on the embedded default: the tiny model multiplies two-digit numbers with a calculator, against GRPO
without it from the same warm start, the control given the same wall time.

    .venv/bin/python bench/tool_demo.py [--steps 30] [--sft-steps 600] [--tool-fraction 0.15] [--seeds 0 1 2] \
        [--out runs/tool_demo]

Task: `mul2` rows ("37*48="), held out by hash. Warm start (both arms): SFT whose targets are calculator traces with
probability `--tool-fraction` (`sft.tool_fraction`: "<<37*48>>=1776" newline "1776") and direct answers otherwise.
Tool arm: GRPO with `grpo.environment=calculator` (the model writes the call, the environment answers "=1776", the
model writes the answer), held-out accuracy from greedy episodes. Control: GRPO on single completions (a call gets
no answer), for as many steps as fit in the tool arm's GRPO wall time. Prints both held-out accuracies (start and
end, with standard errors), tool calls per held-out episode, and the wall times; writes summary.json. With
`--tool-fraction 1` the control's warm start is the same traces with no calculator to answer them. With several
`--seeds` (the config's `seed`: the tiny model's initialisation, its warm start and its sampling; the same task rows)
each seed runs both arms in turn, and each arm's held-out end is also given as mean, standard deviation and range.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

COMMON = ["tasks.families=[mul2]", "tasks.max_digits=2", "generation.max_tokens=12", "eval.size=200",
          "grpo.checkpoint_every=0", "grpo.prompts_per_step=16", "grpo.group_size=8"]
TOOL = ["grpo.environment=calculator", "grpo.max_turns=2", "grpo.max_tool_calls=1", "grpo.max_episode_tokens=40"]


def arm(name: str, extra: list[str], steps: int, sft_steps: int, out: str) -> dict:
    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.models.sft import build_sft_checkpoint
    from reasoning_rl.trainers.grpo import train_grpo

    cfg = config.load(Config, overrides=COMMON + extra + [f"sft.steps={sft_steps}", f"grpo.steps={steps}",
                                                          f"grpo.eval_every={steps}", f"output_dir={out}/{name}"])
    t0 = time.time()
    build_sft_checkpoint(cfg, log=lambda *_: None)
    sft_s = time.time() - t0
    t1 = time.time()
    history, _, _ = train_grpo(cfg, log=lambda s: print(f"[{name}] {s}", flush=True))
    with open(os.path.join(out, name, "metrics.jsonl")) as f:  # step 0's evaluation is there, not in the history
        evals = [m for m in map(json.loads, f) if "eval/accuracy" in m]
    start, end = evals[0], evals[-1]
    n = cfg.eval.size
    se = lambda p: math.sqrt(p * (1 - p) / n)  # noqa: E731
    return {"steps": steps, "sft_s": round(sft_s, 1), "grpo_s": round(time.time() - t1, 1),
            "heldout_start": start["eval/accuracy"], "heldout_start_se": round(se(start["eval/accuracy"]), 3),
            "heldout_end": end["eval/accuracy"], "heldout_end_se": round(se(end["eval/accuracy"]), 3),
            "tool_calls_start": start.get("eval/tool_calls"), "tool_calls_end": end.get("eval/tool_calls"),
            "reward_first": history[0].get("reward/mean"), "reward_last": history[-1].get("reward/mean")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--sft-steps", type=int, default=600)
    ap.add_argument("--tool-fraction", type=float, default=0.15, help="share of warm-start targets that use the tool")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0], help="the config's seed, one run of both arms each")
    ap.add_argument("--out", default="runs/tool_demo")
    a = ap.parse_args()
    from bench.machine import describe

    print(describe(), flush=True)  # where this ran: figures from two machines side by side
    import torch

    torch.set_num_threads(1)
    res = {}
    for seed in a.seeds:
        start = [f"sft.tool_fraction={a.tool_fraction}", f"seed={seed}"]
        out = a.out if len(a.seeds) == 1 else os.path.join(a.out, f"seed{seed}")
        sfx = "" if len(a.seeds) == 1 else f"-{seed}"
        res["tool" + sfx] = arm("tool", start + TOOL, a.steps, a.sft_steps, out)
        probe = arm("control-probe", start, 3, a.sft_steps, out)  # the control's seconds per GRPO step, measured
        per_step = probe["grpo_s"] / 3
        res["control" + sfx] = arm("control", start, max(1, round(res["tool" + sfx]["grpo_s"] / per_step)),
                                   a.sft_steps, out)
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "summary.json"), "w") as f:
            json.dump(res, f, indent=1)
    print(json.dumps(res, indent=1))
    for name in ("tool", "control"):
        ends = [r["heldout_end"] for k, r in res.items() if k.split("-")[0] == name]
        if len(ends) > 1:
            mean = sum(ends) / len(ends)
            sd = math.sqrt(sum((x - mean) ** 2 for x in ends) / (len(ends) - 1))
            print(f"{name:>8}: held-out end over {len(ends)} seeds {mean:.3f} (sd {sd:.3f}; min {min(ends):.3f}, "
                  f"max {max(ends):.3f})")
    for k, r in res.items():
        print(f"{k:>8}: held-out {r['heldout_start']:.3f} +- {r['heldout_start_se']:.3f} -> {r['heldout_end']:.3f} "
              f"+- {r['heldout_end_se']:.3f} after {r['steps']} GRPO steps in {r['grpo_s']} s"
              + (f"; tool calls per held-out episode {r['tool_calls_start']:.2f} -> {r['tool_calls_end']:.2f}"
                 if r["tool_calls_end"] is not None else "") + f"; training reward {r['reward_first']:.3f} -> "
              f"{r['reward_last']:.3f}")


if __name__ == "__main__":
    main()
