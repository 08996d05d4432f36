"""All stdio cases of one program in one sandbox session (`Sandbox.run_cases`) give what one
fresh run per case gives (`Sandbox.run`): the same exit status, output and limit, case by case,
at every isolation level; a case cannot leave anything to the next one; and the `code`
verifier's verdicts on stdio tests are the per-case ones. (One difference a program can see:
in a session it is not pid 1 of its namespace; the session's own pid 1 is.)"""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.timeout(120)
LIM = {"wall_s": 1.5, "cpu_s": 1.0, "memory_mb": 128, "processes": 16, "output_bytes": 1 << 16}

# (what the program does, program, stdins): each compared case by case against fresh runs
PROGRAMS = [
    ("echo, reversed", "print(input()[::-1])", ["abc", "", "x y z"]),
    ("exit status per input", "import sys\nx = input()\nprint(x)\nsys.exit(int(x))", ["0", "3", "0"]),
    ("uncaught exception on one input", "x = int(input())\nprint(10 // x)", ["2", "0", "5"]),
    ("state left on disk is gone", "import os\nprint(sorted(os.listdir('/work')), os.path.exists('/tmp/m'))\n"
     "open('/tmp/m', 'w').write('1'); open('/work/left', 'w').write('1')", ["", "", ""]),
    ("program file rewritten", "print(open('solution.py').read().count('x'))\nopen('solution.py', 'w').write('')",
     ["", ""]),
    ("daemon left running", "import ctypes, glob, os, time\n"
     "print([open(p).read() for p in glob.glob('/proc/[0-9]*/comm') if 'rrl-left' in open(p).read()])\n"
     "if os.fork() == 0:\n    ctypes.CDLL(None).prctl(15, b'rrl-left', 0, 0, 0)\n    time.sleep(30)", ["", "", ""]),
    ("memory on one input", "x = input()\nif x == 'big': y = bytearray(1 << 30)\nprint(x)", ["a", "big", "c"]),
    ("output flood on one input", "import sys\nx = input()\nif x == 'big': sys.stdout.write('x' * (1 << 20))\n"
     "print(x)", ["a", "big", "c"]),
    ("spins on one input", "x = input()\nwhile x == 'spin': pass\nprint(x)", ["a", "spin", "c"]),
    ("sleeps on one input", "import time\nx = input()\nif x == 'nap': time.sleep(60)\nprint(x)", ["a", "nap", "c"]),
]


def _key(r):
    return (r.exit_code, r.signal if r.limit is None else None, r.stdout, r.limit, r.stdout_truncated)


def _per_case(sb, code, stdins):
    """Today's rule: one fresh run per case, none after a wall or CPU limit."""
    out = []
    for s in stdins:
        out.append(sb.run(code, s, LIM))
        if out[-1].limit in ("wall", "cpu"):
            break
    return out


@pytest.mark.parametrize("what,code,stdins", PROGRAMS, ids=[p[0] for p in PROGRAMS])
def test_a_session_gives_what_fresh_runs_give(level_sb, what, code, stdins):
    session = level_sb.run_cases(code, stdins, LIM)
    fresh = _per_case(level_sb, code, stdins)
    if what == "output flood on one input":  # the session ends at the flood; the caller resumes from the next case
        assert [_key(r) for r in session] == [_key(r) for r in fresh[:2]]
        session += level_sb.run_cases(code, stdins[2:], LIM)
    assert [_key(r) for r in session] == [_key(r) for r in fresh], what
    assert all(r.leftover_processes == 0 for r in session)


def test_a_session_is_faster_than_fresh_runs_and_reports_its_level(level_sb):
    res = level_sb.run_cases("print(int(input()) * 2)", [str(i) for i in range(10)], LIM)
    assert [r.stdout for r in res] == [f"{2 * i}\n" for i in range(10)]
    assert {(r.isolation, r.seccomp) for r in res} == {(level_sb.report["level"], True)}


def test_code_verifier_verdicts_on_stdio_tests_are_the_per_case_ones(code_verifier):
    from reasoning_rl.types import Status

    tests = {"kind": "stdio", "cases": [{"stdin": a, "expected_stdout": b}
                                        for a, b in (("1 2\n", "3\n"), ("5 5\n", "10\n"), ("0 0\n", "0\n"))]}
    rows = [("print(sum(map(int, input().split())))", Status.CORRECT, 1.0),
            ("a, b = map(int, input().split())\nprint(a + b if a != 5 else 0)", Status.INCORRECT, 2 / 3),
            ("import time\na, b = map(int, input().split())\nif a == 5: time.sleep(60)\nprint(a + b)",
             Status.INCORRECT, 1 / 3)]  # the third case is not run after the wall limit
    for program, status, score in rows:
        v = code_verifier.verify(program, tests, limits={"wall_s": 1.0})
        assert (v.status, v.score) == (status, pytest.approx(score)), v.detail
    v = code_verifier.verify(rows[2][0], tests, limits={"wall_s": 1.0})
    assert "case 2: not run after an earlier wall limit" in v.detail and v.metrics["sandbox_runs"] == 2
