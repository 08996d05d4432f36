"""`math` against math-verify on the same realistic outputs: accuracy, agreement and verifications/s.

    .venv/bin/python bench/verifiers.py [--workers 2] [--per-template 200] [--data FILE.jsonl]

Runs from a clone of this repository alone: the outputs come from the corpus generator the tests
use (tests/helpers/math_corpus.py: word-problem prose with money, `####`/`A:` endings, LaTeX,
`\\boxed{}`, fractions, units; labels known by construction). `--data` adds a labelled JSONL of
your own (`gold`, `prediction`, `equivalent`).

Like with like: both verifiers run through the same runtime (the `math` and `math_verify`
verifiers in one `VerifierPool`, the same number of worker processes, a cold cache, workers
started before the clock), so the ratio compares the verifiers, not process counts. These
machines are noisy: compare the ratio, not the seconds.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
# this file is named like the package it measures: keep `import verifiers` from finding it
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
sys.path.insert(0, os.path.dirname(HERE))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=2, help="worker processes, the same for both verifiers")
    ap.add_argument("--per-template", type=int, default=200, help="outputs per corpus template (12 templates)")
    ap.add_argument("--data", help="an extra labelled JSONL (gold, prediction, equivalent)")
    a = ap.parse_args()
    from bench.machine import describe

    print(describe(), flush=True)  # where this ran: figures from two machines side by side

    from tests.helpers.math_corpus import corpus

    rows = [{"gold": g, "prediction": o, "equivalent": lab, "source": t} for t, o, g, lab in corpus(0, a.per_template)]
    if a.data:
        with open(a.data) as f:
            rows += [dict(json.loads(x), source="--data") for x in f if x.strip()]
    print(f"{len(rows)} labelled outputs ({sum(r['source'] == '--data' for r in rows)} from --data)")

    import verifiers
    from reasoning_rl.types import Status

    verdicts, seconds = {}, {}
    with verifiers.VerifierPool(num_workers=a.workers, cache_size=0) as pool:
        for name in ("math", "math_verify"):
            pool.verify_batch(name, ["0"] * a.workers, ["1"] * a.workers)  # start and warm the workers first
            t0 = time.perf_counter()
            verdicts[name] = pool.verify_batch(name, [r["prediction"] for r in rows], [r["gold"] for r in rows])
            seconds[name] = time.perf_counter() - t0

    ys = [bool(r["equivalent"]) for r in rows]
    ok = {n: [v.status is Status.CORRECT for v in vs] for n, vs in verdicts.items()}
    for name in ("math", "math_verify"):
        right = sum(p == y for p, y in zip(ok[name], ys))
        fp = sum(p and not y for p, y in zip(ok[name], ys))
        masked = sum(v.masked for v in verdicts[name])
        print(f"{name:12} {len(rows) / seconds[name]:8.1f} verifications/s ({a.workers} workers)   accuracy "
              f"{100 * right / len(ys):.2f}%   false positives {fp}   masked {masked}")
    agree = sum(x == y for x, y in zip(ok["math"], ok["math_verify"]))
    print(f"agreement math vs math_verify: {100 * agree / len(rows):.2f}% ({len(rows) - agree} disagreements)")
    print(f"throughput ratio math / math_verify: {seconds['math_verify'] / seconds['math']:.2f}x")


if __name__ == "__main__":
    main()
