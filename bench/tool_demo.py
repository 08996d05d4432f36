"""Tool use on the embedded default: the tiny model multiplies two-digit numbers with a calculator, against GRPO
without it, each from its own warm start, the control given the same wall time.

    .venv/bin/python bench/tool_demo.py [--steps 20] [--sft-steps 600] [--out runs/tool_demo]

Task: `mul2` rows ("37*48="), held out by hash. Tool arm: an SFT warm start whose targets are calculator traces
(`sft.tool_fraction=1`: "<<37*48>>=1776" newline "1776"), then GRPO with `grpo.environment=calculator`: the model
writes the call, the environment answers "=1776", the model writes the answer; held-out accuracy from greedy episodes.
Control: the same SFT steps on direct answers, then GRPO on single completions, run for as many steps as fit in the
tool arm's GRPO wall time. Prints both held-out accuracies (start and end, with standard errors), tool calls per
held-out episode, and the wall times. Writes summary.json. A demonstration of the plumbing as much as of the tool:
the tool arm's warm start already copies the calculator.
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
TOOL = ["sft.tool_fraction=1.0", "grpo.environment=calculator", "grpo.max_turns=2", "grpo.max_tool_calls=1",
        "grpo.max_episode_tokens=40"]


def arm(name: str, extra: list[str], steps: int, sft_steps: int, out: str) -> dict:
    from reasoning_rl import config
    from reasoning_rl.configs import Config
    from reasoning_rl.sft import build_sft_checkpoint
    from reasoning_rl.trainers.grpo import train_grpo

    cfg = config.load(Config, overrides=COMMON + extra + [f"sft.steps={sft_steps}", f"grpo.steps={steps}",
                                                          f"grpo.eval_every={steps}", f"output_dir={out}/{name}"])
    t0 = time.time()
    build_sft_checkpoint(cfg, log=lambda *_: None)
    sft_s = time.time() - t0
    t1 = time.time()
    history, _, _ = train_grpo(cfg, log=lambda s: print(f"[{name}] {s}", flush=True))
    evals = [h for h in history if "eval/accuracy" in h]
    start, end = evals[0], evals[-1]
    n = cfg.eval.size
    se = lambda p: math.sqrt(p * (1 - p) / n)  # noqa: E731
    return {"steps": steps, "sft_s": round(sft_s, 1), "grpo_s": round(time.time() - t1, 1),
            "heldout_start": start["eval/accuracy"], "heldout_start_se": round(se(start["eval/accuracy"]), 3),
            "heldout_end": end["eval/accuracy"], "heldout_end_se": round(se(end["eval/accuracy"]), 3),
            "tool_calls_end": end.get("eval/tool_calls"), "reward_last": history[-1].get("reward/mean")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--sft-steps", type=int, default=600)
    ap.add_argument("--out", default="runs/tool_demo")
    a = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    res = {"tool": arm("tool", TOOL, a.steps, a.sft_steps, a.out)}
    probe = arm("control-probe", [], 3, a.sft_steps, a.out)  # the control's seconds per GRPO step, measured
    per_step = probe["grpo_s"] / 3
    res["control"] = arm("control", [], max(1, round(res["tool"]["grpo_s"] / per_step)), a.sft_steps, a.out)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(res, f, indent=1)
    print(json.dumps(res, indent=1))
    for k, r in res.items():
        print(f"{k:>8}: held-out {r['heldout_start']:.3f} +- {r['heldout_start_se']:.3f} -> {r['heldout_end']:.3f} "
              f"+- {r['heldout_end_se']:.3f} after {r['steps']} GRPO steps in {r['grpo_s']} s"
              + (f"; {r['tool_calls_end']:.2f} tool calls per held-out episode" if r["tool_calls_end"] is not None
                 else ""))


if __name__ == "__main__":
    main()
