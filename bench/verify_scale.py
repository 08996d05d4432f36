"""Verifications per second with 1 and 2 workers, for the process pool and for Ray, in one run.

    .venv/bin/python bench/verify_scale.py [--n 600]

The same batch of `math` calls (procedural model-style outputs, half right) through
`VerifierPool(backend=...)` with the cache off; each pool is started (and, for Ray, its actors
ready) before its clock starts, and its start-up is printed apart. Prints each rate and the
2-worker/1-worker ratio per backend, then Ray's rate over the process pool's at the same number
of workers (noisy machines: compare ratios, not seconds). Both backends' workers get up to
`verifiers.worker_call.BATCH_MAX` calls per message (`--batch-max 1`: one call per message, as
before batching).
"""
from __future__ import annotations

import argparse
import os
import random
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]  # `import verifiers` = the package
sys.path.insert(0, os.path.dirname(HERE))


def batch(n: int, seed: int = 0):
    import verifiers

    rng = random.Random(seed)
    out = []
    for i in range(n):
        a, b = rng.randint(1, 999), rng.randint(1, 999)
        got = a + b if i % 2 else a + b + rng.randint(1, 9)
        out.append(verifiers.Call("math", f"We add {a} and {b}. The answer is \\boxed{{{got}}}.", str(a + b), {}))
    return out


def measure(backend: str, workers: int, calls) -> tuple[float, float]:
    import verifiers

    t0 = time.perf_counter()
    pool = verifiers.VerifierPool(num_workers=workers, cache_size=0, backend=backend)
    pool.run(calls[:workers])  # start the workers (and warm them)
    startup = time.perf_counter() - t0
    try:
        t0 = time.perf_counter()
        out = pool.run(calls)
        rate = len(calls) / (time.perf_counter() - t0)
    finally:
        pool.close()
    assert sum(v.status.value == "correct" for v in out) == len(calls) // 2
    return rate, startup


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=600)
    ap.add_argument("--batch-max", type=int, default=None, help="calls per message to a worker (both backends)")
    a = ap.parse_args()
    from bench.machine import describe

    print(describe(), flush=True)  # where this ran: figures from two machines side by side
    if a.batch_max:
        import verifiers.worker_call as wc

        wc.BATCH_MAX = a.batch_max
    calls = batch(a.n)
    import importlib.util

    backends = ["process"] + (["ray"] if importlib.util.find_spec("ray") else [])
    print(f"{a.n} math verifications, cache off, {os.cpu_count()} cores")
    rates = {}
    for backend in backends:
        for w in (1, 2):
            rates[backend, w], startup = measure(backend, w, calls)
            print(f"  {backend:7s} {w} worker(s): {rates[backend, w]:8.1f} verifications/s   (start-up {startup:.1f}s)")
        print(f"  {backend:7s} 2 / 1 workers: {rates[backend, 2] / rates[backend, 1]:.2f}x")
    if "ray" in backends:
        for w in (1, 2):
            print(f"  ray / process, {w} worker(s): {rates['ray', w] / rates['process', w]:.2f}x")
    if "ray" not in backends:
        print("  ray: not installed (pip install 'reasoning-rl[ray]')")


if __name__ == "__main__":
    main()
