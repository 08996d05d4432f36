"""The calls-per-episode curves of bench/tool_cold_start.py runs: for each arm (thin line a seed, thick the mean over
seeds), tool calls per training episode round by round, on every family and on the `easy` one (one-digit sums a
model can do in its head: a model that learned when calling pays calls less there), the `easy` family's pass rate,
and the training reward.

    .venv/bin/python bench/tool_curves.py RUN_DIR [RUN_DIR ...] -o docs/img/tool_curves.png

RUN_DIR: a folder `<out>/seed<N>/arm_<x>` that bench/tool_cold_start.py wrote (its archive.jsonl and metrics.jsonl;
the families come from `<out>/seed<N>/train.jsonl`). Reads what the runs logged; trains nothing. Not here: held-out
figures (the bench's table).
"""
from __future__ import annotations

import argparse
import json
import os
import re
from collections import defaultdict

NAMES = {"a": "(a) GRPO, no tool", "b": "(b) GRPO + tool from base", "d": "(d) cold start + GRPO + tool",
         "e": "(e) cold start + shuffled rewards"}


def curves(run_dir: str) -> dict[str, dict[int, float]]:
    """{curve: {round: value}} of one run: calls per episode (all, easy) from its archive, reward from its metrics."""
    seed_dir = os.path.dirname(run_dir)
    family = {}
    with open(os.path.join(seed_dir, "train.jsonl")) as f:
        for line in f:
            row = json.loads(line)
            family[row["prompt"]] = row["family"]
    calls, easy, easy_pass = defaultdict(list), defaultdict(list), defaultdict(list)
    with open(os.path.join(run_dir, "archive.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            n = sum(1 for t in r.get("turns", []) if t.get("call"))
            calls[r["step"]].append(n)
            if family.get(r["task"]["raw"]) == "easy":
                easy[r["step"]].append(n)
                easy_pass[r["step"]].append(r["verdicts"]["math"]["status"] == "correct")
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        reward = {m["step"]: m["reward/mean"] for m in map(json.loads, f) if "reward/mean" in m}
    mean = lambda d: {k: sum(v) / len(v) for k, v in sorted(d.items()) if v}  # noqa: E731
    return {"calls": mean(calls), "easy": mean(easy), "easy_pass": mean(easy_pass), "reward": reward}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("runs", nargs="+")
    ap.add_argument("-o", "--out", default="tool_curves.png")
    a = ap.parse_args()
    import sys

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from bench.machine import describe

    print(describe(), flush=True)  # where this ran (the runs it reads may have run elsewhere: their own logs say)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_arm: dict[str, list[dict]] = defaultdict(list)
    for run in a.runs:
        m = re.search(r"arm_([a-e])$", os.path.normpath(run))
        if not m:
            raise SystemExit(f"{run!r}: not an arm_<x> folder of bench/tool_cold_start.py")
        by_arm[m.group(1)].append(curves(run))
    titles = {"calls": "tool calls per training episode", "easy": "calls per episode, easy family",
              "easy_pass": "pass rate, easy family", "reward": "training reward (mean)"}
    fig, axes = plt.subplots(1, 4, figsize=(19, 4))
    for ax, key in zip(axes, titles):
        for i, (arm, runs) in enumerate(sorted(by_arm.items())):
            color = f"C{i}"
            for r in runs:
                ax.plot(list(r[key]), list(r[key].values()), color=color, lw=0.6, alpha=0.5)
            steps = sorted(set.intersection(*(set(r[key]) for r in runs))) if runs else []
            ax.plot(steps, [sum(r[key][s] for r in runs) / len(runs) for s in steps], color=color, lw=2,
                    label=f"{NAMES.get(arm, arm)} ({len(runs)} seeds)")
        ax.set_title(titles[key])
        ax.set_xlabel("round")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(a.out, dpi=90)
    print(f"wrote {a.out}: {', '.join(f'{k} x{len(v)}' for k, v in sorted(by_arm.items()))}")


if __name__ == "__main__":
    main()
