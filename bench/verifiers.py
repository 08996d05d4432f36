"""Verifications per second: our `math` verifier vs plain math-verify, same 2,000 pairs, one run.

    .venv/bin/python bench/verifiers.py [--n 2000] [--workers 2] [--data ../shared/data/math_equiv.jsonl]

The batch mixes the labelled answer-equivalence rows of ../shared/data (read in place) with
procedurally generated arithmetic outputs (full model-style outputs, each with a known label),
so both throughput and accuracy are measured on the same pairs. Ours runs through the real
runtime (worker processes, wall-clock kill, a cold verdict cache). Steady-state throughput:
the pool is started before the clock starts, as math-verify is imported before its clock
starts; the pool's start-up (~0.3 s, once per run) is printed beside it. Plain math-verify runs
`parse` + `verify` in this process with its default settings. Prints the throughput ratio
(these machines are noisy: compare ratios, not seconds).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# this file is named like the package it measures: keep `import verifiers` from finding it
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]


def procedural(n: int, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    rows, seen = [], set()
    templates = [
        ("The sum is {a} + {b} = {v}. The answer is {v}.", True),
        ("Let me compute: {a}*{b}. So \\boxed{{{v}}}", True),
        ("<think>{a} and {b}</think><answer>{v}</answer>", True),
        ("We get $\\frac{{{v2}}}{{2}}$ as the final answer.", True),
        ("The answer is {w}.", False),
        ("So \\boxed{{{w}}}", False),
        ("Final answer: {v} or {w}", False),
        ("Answer: {vc}", True),
    ]
    while len(rows) < n:
        a, b = rng.randint(2, 999), rng.randint(2, 999)
        v = a + b if rng.random() < 0.5 else a * b
        w = v + rng.choice([-10, -1, 1, 2, 10])
        t, label = templates[rng.randrange(len(templates))]
        pred = t.format(a=a, b=b, v=v, w=w, v2=2 * v, vc=f"{v:,}")
        if pred in seen:
            continue
        seen.add(pred)
        rows.append({"gold": str(v), "prediction": pred, "equivalent": label, "source": "procedural"})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--data", default=os.path.join(HERE, "..", "..", "shared", "data", "math_equiv.jsonl"))
    a = ap.parse_args()

    labelled = []
    if os.path.exists(a.data):
        with open(a.data) as f:
            labelled = [json.loads(x) for x in f if x.strip()]
    labelled = labelled[: a.n]
    rows = labelled + procedural(a.n - len(labelled))
    random.Random(1).shuffle(rows)
    print(f"{len(rows)} pairs: {len(labelled)} labelled rows from {a.data}, {len(rows) - len(labelled)} procedural")

    import verifiers
    from reasoning_rl.types import Status

    t0 = time.perf_counter()
    with verifiers.VerifierPool(num_workers=a.workers, cache_size=0) as pool:
        pool.verify_batch("math", ["0"] * a.workers, ["1"] * a.workers)  # start the workers, as importing is for
        startup = time.perf_counter() - t0                                # math-verify: outside the timed part
        t0 = time.perf_counter()
        ours = pool.verify_batch("math", [r["prediction"] for r in rows], [r["gold"] for r in rows])
        ours_s = time.perf_counter() - t0
    ours_ok = [v.status is Status.CORRECT for v in ours]

    import math_verify

    t0 = time.perf_counter()
    theirs_ok = []
    for r in rows:
        try:
            theirs_ok.append(bool(math_verify.verify(math_verify.parse(r["gold"]), math_verify.parse(r["prediction"]))))
        except Exception:  # noqa: BLE001 - math-verify's own failure counts as "not equivalent", as in score_math
            theirs_ok.append(False)
    theirs_s = time.perf_counter() - t0

    def acc(pred):
        ys = [r["equivalent"] for r in rows]
        right = sum(p == y for p, y in zip(pred, ys))
        fp = sum(p and not y for p, y in zip(pred, ys))
        neg = sum(not y for y in ys)
        return right / len(ys), fp / max(1, neg)

    (oa, ofp), (ta, tfp) = acc(ours_ok), acc(theirs_ok)
    print(f"ours ({a.workers} workers, cold cache): {len(rows) / ours_s:8.1f} verifications/s   "
          f"accuracy {100 * oa:.1f}%  false positives {100 * ofp:.1f}%   timeouts "
          f"{sum(v.status is Status.TIMEOUT for v in ours)}   (pool start-up, not timed: {startup:.2f}s)")
    print(f"math-verify (parse+verify, 1 process): {len(rows) / theirs_s:8.1f} verifications/s   "
          f"accuracy {100 * ta:.1f}%  false positives {100 * tfp:.1f}%")
    print(f"throughput ratio ours / math-verify: {theirs_s / ours_s:.1f}x")


if __name__ == "__main__":
    main()
