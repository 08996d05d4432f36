"""Useful (mixed) groups per generated group: uniform sampling vs the mixed-band sampler, one run.

    .venv/bin/python bench/curriculum.py [--prompts 500] [--steps 100] [--batch 64] [--G 8] [--seed 0]

Synthetic prompts with known success rates p (45% nearly always solved, 35% nearly never, 20%
in between; p drifts upward a little each step, as a policy that learns). Each
step draws a batch of prompts, "generates" G Bernoulli(p) outcomes per prompt, updates the
SQLite ledger and counts mixed groups. Both samplers see the same prompts and seeds.
Prints the mixed fraction for each and the ratio.
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile

sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]

from curricula import Ledger, make_sampler  # noqa: E402
from reasoning_rl.types import Group, Sample, Verdict  # noqa: E402


def difficulties(n: int, rng: random.Random) -> dict[str, float]:
    out = {}
    for i in range(n):
        r = rng.random()
        # most prompts of a real set are solved every time or never; a fifth are in between
        p = rng.uniform(0.97, 1.0) if r < 0.45 else rng.uniform(0.0, 0.01) if r < 0.8 else rng.uniform(0.05, 0.9)
        out[f"p{i}"] = p
    return out


def run(sampler_name: str, ps: dict[str, float], steps: int, batch: int, G: int, seed: int) -> tuple[int, int]:
    rng = random.Random(seed)
    ps = dict(ps)
    with tempfile.TemporaryDirectory() as d, Ledger(os.path.join(d, "ledger.sqlite")) as ledger:
        # the baseline is plain uniform sampling (no ledger, no retirement), as a trainer without a curriculum does
        sampler = make_sampler(sampler_name, list(ps), G=G, seed=seed,
                               ledger=ledger if sampler_name != "uniform" else None)
        mixed = generated = 0
        for step in range(steps):
            groups = []
            for pid in sampler.sample(batch):
                outs = [rng.random() < ps[pid] for _ in range(G)]
                groups.append(Group(pid, "", {}, [Sample("", verdicts={"o": Verdict.correct() if o
                                                                          else Verdict.incorrect()}) for o in outs]))
            ledger.update(groups, "o", step, retire_after=3)
            ledger.revive(step, after_steps=20)
            generated += len(groups)
            mixed += sum(g.is_mixed("o") for g in groups)
            for pid in ps:  # the policy improves a little
                ps[pid] = min(1.0, ps[pid] + 0.002 * (1 - ps[pid]))
    return mixed, generated


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prompts", type=int, default=500)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--G", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository
    from bench.machine import describe

    print(describe(), flush=True)  # where this ran: figures from two machines side by side
    ps = difficulties(a.prompts, random.Random(a.seed))
    res = {}
    for name in ("uniform", "mixed_band"):
        m, g = run(name, ps, a.steps, a.batch, a.G, a.seed)
        res[name] = m / g
        print(f"{name:<11} mixed groups {m:6d} / generated {g:6d} = {m / g:.3f}")
    print(f"useful groups per generation, mixed_band / uniform: {res['mixed_band'] / res['uniform']:.2f}x")


if __name__ == "__main__":
    main()
