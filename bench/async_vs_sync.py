"""Async rounds against the synchronous loop: rounds per second and held-out accuracy after the same rounds.

One config (the embedded default's GRPO from its cached SFT checkpoint, or --config), run as
  sync      engine=worker, max_staleness=0: each round is generated (in the generation process) while the
            trainer waits, then the update runs;
  async     engine=worker, max_staleness=1: round t+1 is generated while update t runs;
  hf-2t     (baseline) engine=hf in the trainer's process with num_threads=2, the synchronous loop using
            both cores for each phase: what a user gets today without a second process.
Rounds per second = steps / the sum of the steps' wall time (`time/step`: generation wait, verification,
update; held-out evaluation and start-up excluded). Held-out accuracy is greedy on eval.size prompts
after the last round. The modes alternate per seed (sync, async, hf-2t, then the next seed), so a noisy
machine slows them alike; ratios are against sync of the same seed.

    .venv/bin/python bench/async_vs_sync.py [--steps 40] [--seeds 0 1] [--set grpo.prompts_per_step=16]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

MODES = {
    "sync": ["grpo.engine=worker", "grpo.max_staleness=0"],
    "async": ["grpo.engine=worker", "grpo.max_staleness=1"],
    "hf-2t": ["grpo.engine=hf", "num_threads=2"],
}


def run(mode: str, seed: int, steps: int, base: list[str], config_file: str | None) -> tuple[float, float]:
    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.trainers.grpo import train_grpo

    with tempfile.TemporaryDirectory() as out:
        overrides = [f"output_dir={out}", f"seed={seed}", f"grpo.steps={steps}", f"grpo.eval_every={steps}",
                     "grpo.checkpoint_every=0", *base, *MODES[mode]]
        cfg = config.load(Config, path=config_file, overrides=overrides)
        history, _, _ = train_grpo(cfg, log=lambda *_: None)
    wall = sum(h["time/step"] for h in history)
    return steps / wall, history[-1]["eval/accuracy"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=40, help="GRPO rounds per run")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--config", help="a config file; default: the embedded default")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="config overrides for every mode")
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    a = ap.parse_args()
    from bench.machine import describe

    print(describe(), flush=True)  # where this ran: figures from two machines side by side
    results: dict[str, list[tuple[float, float]]] = {m: [] for m in a.modes}
    for seed in a.seeds:
        for mode in a.modes:
            rps, acc = run(mode, seed, a.steps, a.set, a.config)
            results[mode].append((rps, acc))
            print(f"seed {seed}  {mode:6s} {rps:6.3f} rounds/s  held-out {acc:.3f}", flush=True)
    print(f"\n{a.steps} rounds, seeds {a.seeds}; ratio and accuracy difference against sync of the same seed")
    print("| mode | rounds/s (mean) | ratio vs sync | held-out (mean) | held-out - sync (points) |")
    print("|---|---|---|---|---|")
    for mode in a.modes:
        rs = results[mode]
        rps = sum(r for r, _ in rs) / len(rs)
        acc = sum(x for _, x in rs) / len(rs)
        line = f"| {mode} | {rps:.3f} | "
        if "sync" in results:
            ratios = [r / s for (r, _), (s, _) in zip(rs, results["sync"])]
            diffs = [100 * (x - y) for (_, x), (_, y) in zip(rs, results["sync"])]
            line += f"{sum(ratios) / len(ratios):.2f}x | {acc:.3f} | {sum(diffs) / len(diffs):+.1f} |"
        else:
            line += f"- | {acc:.3f} | - |"
        print(line)


if __name__ == "__main__":
    main()
