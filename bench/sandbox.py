"""Sandboxed runs per second vs plain `subprocess.run([python, file])`, side by side, one run.

    .venv/bin/python bench/sandbox.py [--n 400] [--workers 2]

At every isolation level this machine offers: "full" (this process is root and cgroups are
writable) and "rootless" (as root, the zygotes are also started as an unprivileged uid under
the system interpreter, which is how a non-root user runs them; as a non-root user, that is
the only level).

The program is trivial (`print(sum(range(100)))`) so the number measures the sandbox's own
cost per run. Ours: `SandboxPool(workers)`, full isolation (fresh user/pid/mount/net/ipc/uts
namespaces, cgroups created and removed, uid 65534, private tmpfs) for every run, each run
forked from a warm zygote that never saw another run's data. Plain: the same number of
threads each calling `subprocess.run([python, file], capture_output=True)` (no isolation at
all). Zygotes are started before the clock (once per pool; the start-up is printed). Prints
the throughput ratio (these machines are noisy: compare ratios, not seconds).

Then a stdio program with 10 test cases, checked as the `code` verifier used to (one fresh run
per case) and as it does now (`Sandbox.run_cases`: the 10 cases in one session, a fresh process
per case): cases per second for each, same programs, same pool.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from sandboxes import SandboxPool, base_python  # noqa: E402

PROGRAM = "print(sum(range(100)))\n"
STDIO = "a, b = map(int, input().split())\nprint(a + b)\n"  # a stdio program with 10 test cases
CASES = [f"{i} {i * i}\n" for i in range(10)]
SYSTEM_PYTHON, RUN_AS = "/usr/bin/python3", 4242


def plain(n: int, workers: int) -> float:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "prog.py")
        with open(path, "w") as f:
            f.write(PROGRAM)
        py = base_python()

        def one(_):
            out = subprocess.run([py, path], capture_output=True, text=True)
            assert out.stdout == "4950\n", out
        with ThreadPoolExecutor(workers) as ex:
            t0 = time.perf_counter()
            list(ex.map(one, range(n)))
            return n / (time.perf_counter() - t0)


def ours(n: int, workers: int, **who) -> tuple[float, float, str]:
    t0 = time.perf_counter()
    pool = SandboxPool(workers=workers, limits={"wall_s": 10.0}, **who)
    level = pool.start()["level"]
    startup = time.perf_counter() - t0
    try:
        t0 = time.perf_counter()
        results = pool.run_many([(PROGRAM, "")] * n)
        rate = n / (time.perf_counter() - t0)
    finally:
        pool.close()
    assert all(r.stdout == "4950\n" and r.leftover_processes == 0 for r in results)
    return rate, startup, level


def stdio_cases(programs: int, workers: int, **who) -> tuple[float, float]:
    """Cases per second for a 10-case stdio program: one run per case (before) vs one session (after)."""
    pool = SandboxPool(workers=workers, limits={"wall_s": 10.0}, **who)
    pool.start()
    want = [f"{i + i * i}\n" for i in range(10)]
    try:
        t0 = time.perf_counter()
        per_case = pool.map(lambda sb, _: [sb.run(STDIO, c).stdout for c in CASES], range(programs))
        before = programs * len(CASES) / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        session = pool.map(lambda sb, _: [r.stdout for r in sb.run_cases(STDIO, CASES)], range(programs))
        after = programs * len(CASES) / (time.perf_counter() - t0)
    finally:
        pool.close()
    assert per_case == session == [want] * programs
    return before, after


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=400)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    from bench.machine import describe

    print(describe(), flush=True)  # where this ran: figures from two machines side by side
    plain(20, args.workers)  # warm the page cache for the interpreter
    setups = [("as this process", {})]
    if os.geteuid() == 0 and os.path.exists(SYSTEM_PYTHON):
        setups.append((f"as uid {RUN_AS}", {"python": SYSTEM_PYTHON, "user": RUN_AS}))
    measured = [(who, *ours(args.n, args.workers, **kw)) for who, kw in setups]
    stdio = [(who, *stdio_cases(max(4, args.n // 10), args.workers, **kw)) for who, kw in setups]
    rate_plain = plain(args.n, args.workers)
    print(f"trivial program x {args.n}, {args.workers} workers, {os.cpu_count()} cores")
    print(f"  plain subprocess.run (no isolation):            {rate_plain:8.1f} runs/s")
    for who, rate, startup, level in measured:
        print(f"  sandbox, level {level:<8} ({who:>15}): {rate:8.1f} runs/s   ratio to plain {rate / rate_plain:.2f}x"
              f"   (zygote start-up {startup:.2f} s, once)")
    print(f"a stdio program with {len(CASES)} cases, {max(4, args.n // 10)} programs, cases per second:")
    for (who, before, after), (_, _, _, level) in zip(stdio, measured):
        print(f"  level {level:<8} ({who:>15}): one run per case {before:7.1f}/s, one session per program "
              f"{after:7.1f}/s   ratio {after / before:.2f}x")


if __name__ == "__main__":
    main()
