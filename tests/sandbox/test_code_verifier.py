"""The `code` verifier: reward hacks never pass, benign programs must pass, statuses are honest.

Tables are (program, tests, expected status) with a comment on what each row tries."""
from __future__ import annotations

import pytest

from reasoning_rl.types import Status

pytestmark = pytest.mark.timeout(120)
LIM = {"wall_s": 3.0, "cpu_s": 2.0, "memory_mb": 256, "processes": 32}

ADD_STDIO = {"kind": "stdio", "cases": [{"stdin": "1 2\n", "expected_stdout": "3\n"},
                                        {"stdin": "40 2\n", "expected_stdout": "42\n"}]}
ADD_CALL = {"kind": "call", "entry_point": "add", "cases": [{"args": [1, 2], "expected": 3},
                                                           {"args": [40, 2], "expected": 42}]}
ADD_ASSERT = {"kind": "assert", "entry_point": "add",
              "code": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(40, 2) == 42\n"}
ADD_UNITTEST = {"kind": "unittest", "code": (
    "class TestAdd(unittest.TestCase):\n"
    "    def test_small(self):\n        self.assertEqual(add(1, 2), 3)\n"
    "    def test_big(self):\n        from solution import add as f\n        self.assertEqual(f(40, 2), 42)\n")}
ALL_KINDS = [ADD_STDIO, ADD_CALL, ADD_ASSERT, ADD_UNITTEST]

HACKS = [
    # exit before any test runs
    "import sys\nsys.exit(0)",
    "import os\nos._exit(0)",
    # exit 0 from an atexit hook or the excepthook after crashing
    "import atexit, os\natexit.register(lambda: os._exit(0))\nraise RuntimeError('boom')",
    "import sys, os\nsys.excepthook = lambda *a: os._exit(0)\nraise RuntimeError('boom')",
    # print what a test runner would print on success
    "print('3\\n42')\nprint('OK')\nprint('Ran 2 tests in 0.001s\\n\\nOK')\nprint('All tests passed')",
    # a result that equals everything
    "class Any:\n    def __eq__(self, o): return True\n    def __ne__(self, o): return False\n"
    "def add(a, b): return Any()\nprint(Any())",
    # an int subclass that equals everything
    "class I(int):\n    def __eq__(self, o): return True\n    __hash__ = int.__hash__\ndef add(a, b): return I(0)",
    # patch unittest and assert machinery in its own process
    "import unittest, builtins\nunittest.TestCase.assertEqual = lambda *a, **k: None\n"
    "unittest.TestCase.run = lambda self, result=None: None\nbuiltins.AssertionError = type('X', (Exception,), {})\n"
    "def add(a, b): return 0",
    # SystemExit raised inside the tested function
    "def add(a, b):\n    raise SystemExit(0)",
    "def add(a, b):\n    import os; os._exit(0)",
    # look for the expected values through frames, gc, files and /proc
    "import sys, gc, os, glob\n"
    "def add(a, b):\n"
    "    f = sys._getframe(1)\n"
    "    while f: f = f.f_back\n"
    "    found = [o for o in gc.get_objects() if isinstance(o, dict) and 'expected' in o]\n"
    "    files = [p for p in glob.glob('/**', recursive=True) if 'expected' in p]\n"
    "    envs = [open(p, 'rb').read() for p in glob.glob('/proc/*/environ')]\n"
    "    if found: return found[0]['expected']\n"
    "    return -1",
]


@pytest.mark.parametrize("tests", ALL_KINDS, ids=lambda t: t["kind"])
@pytest.mark.parametrize("program", HACKS, ids=range(len(HACKS)))
def test_reward_hacks_never_pass(code_verifier, program, tests):
    v = code_verifier.verify(program, tests, limits=LIM)
    assert v.status is Status.INCORRECT and v.score == 0.0, v


SOLUTIONS = {
    "stdio": "a, b = map(int, input().split())\nprint(a + b)",
    "call": "def add(a, b):\n    return a + b",
}


@pytest.mark.parametrize("tests", ALL_KINDS, ids=lambda t: t["kind"])
def test_a_correct_solution_passes_every_kind(code_verifier, tests):
    program = SOLUTIONS["stdio" if tests["kind"] == "stdio" else "call"]
    v = code_verifier.verify(program, tests, limits=LIM)
    assert v.status is Status.CORRECT and v.score == 1.0, v


BENIGN = [
    # (program, stdin, expected stdout)
    ("import sys\nprint(sum(int(x) for x in sys.stdin.read().split()))", "1 2 3\n4\n", "10\n"),
    ("import threading\nout = []\nts = [threading.Thread(target=out.append, args=(i,)) for i in range(8)]\n"
     "[t.start() for t in ts]; [t.join() for t in ts]\nprint(sum(out))", "", "28\n"),
    ("import sys\nsys.setrecursionlimit(10000)\ndef d(n): return 0 if n == 0 else 1 + d(n - 1)\nprint(d(5000))",
     "", "5000\n"),
    ("print('héllo wörld ✓ 你好')", "", "héllo wörld ✓ 你好\n"),
    ("print(input()[::-1])", "ünïcode\n", "edocïnü\n"),
    ("import sys\nsys.stdout.write('x' * (1 << 20))", "", "x" * (1 << 20)),
    ("import sys\nprint(42)\nsys.exit(0)", "", "42\n"),
    ("import tempfile, os\nwith tempfile.NamedTemporaryFile('w+', delete=False) as f:\n    f.write('7')\n"
     "print(open(f.name).read()); os.unlink(f.name)\nopen('here.txt', 'w').write('8'); print(open('here.txt').read())",
     "", "7\n8\n"),
    ("x = bytearray(200 * (1 << 20))\nx[-1] = 1\nprint(len(x) >> 20)", "", "200\n"),
    ("import multiprocessing as mp\ndef sq(x): return x * x\nif __name__ == '__main__':\n"
     "    with mp.Pool(4) as p: print(sum(p.map(sq, range(10))))", "", "285\n"),
    ("import subprocess, sys\nprint(subprocess.run([sys.executable, '-c', 'print(5)'], capture_output=True, "
     "text=True).stdout.strip())", "", "5\n"),
    ("print('trailing   \\n\\n')", "", "trailing"),  # trailing whitespace is normalised
]


@pytest.mark.parametrize("program,stdin,expected", BENIGN, ids=range(len(BENIGN)))
def test_benign_programs_pass(code_verifier, program, stdin, expected):
    tests = {"kind": "stdio", "cases": [{"stdin": stdin, "expected_stdout": expected}]}
    v = code_verifier.verify(program, tests, limits={"wall_s": 10.0, "cpu_s": 10.0, "memory_mb": 512})
    assert v.status is Status.CORRECT, v


# (program, passes?) under every kind: the program runs as the interpreter runs it, not with the flags of the code
# that loads it (the harness module postpones its own annotations; a candidate's must be evaluated at def time, as
# `python file.py` does; found on SmolLM2's HumanEval programs, which use `List` without importing it)
MAIN = "\nif __name__ == '__main__':\n    print(add(*map(int, input().split())))\n"
ANNOTATIONS = [
    ("def add(a: Undefined, b) -> int:\n    return a + b" + MAIN, False),
    ("from __future__ import annotations\ndef add(a: Undefined, b) -> int:\n    return a + b" + MAIN,
     True),  # a program that postpones them itself may
    ("from typing import List\ndef add(a: List, b) -> int:\n    return a + b" + MAIN, True),
]


@pytest.mark.parametrize("program,passes", ANNOTATIONS, ids=range(len(ANNOTATIONS)))
@pytest.mark.parametrize("tests", [ADD_STDIO, ADD_CALL, ADD_ASSERT, ADD_UNITTEST], ids=["stdio", "call", "assert",
                                                                                      "unittest"])
def test_annotations_are_evaluated_as_the_interpreter_does(code_verifier, program, passes, tests):
    v = code_verifier.verify(program, tests, limits=LIM)
    assert (v.status is Status.CORRECT) == passes, v
    assert passes or v.status is Status.INCORRECT and ("NameError" in v.detail or tests is ADD_STDIO), v


def test_partial_credit_is_the_fraction_passed(code_verifier):
    v = code_verifier.verify("def add(a, b):\n    return 3", ADD_CALL, limits=LIM)
    assert v.status is Status.INCORRECT and v.score == 0.5 and "1/2" in v.detail


def test_skipped_tests_fail(code_verifier):
    tests = {"kind": "unittest", "code": "class T(unittest.TestCase):\n    @unittest.skip('later')\n"
                                         "    def test_a(self): pass\n    def test_b(self): self.assertEqual(add(1, 1), 2)\n"}
    v = code_verifier.verify(SOLUTIONS["call"], tests, limits=LIM)
    assert v.status is Status.INCORRECT and v.score == 0.5 and "skipped" in v.detail


@pytest.mark.parametrize("tests", ALL_KINDS, ids=lambda t: t["kind"])
def test_a_limit_is_incorrect_and_named(code_verifier, tests):
    program = "def add(a, b):\n    while True: pass\nwhile True: pass" if tests["kind"] == "stdio" else \
        "def add(a, b):\n    while True: pass"
    v = code_verifier.verify(program, tests, limits={**LIM, "wall_s": 1.0, "cpu_s": 0.5})
    assert v.status is Status.INCORRECT and v.score == 0.0
    assert "cpu limit exceeded" in v.detail or "wall limit exceeded" in v.detail


def test_expected_values_compare_as_plain_data(code_verifier):
    tests = {"kind": "call", "entry_point": "f", "cases": [
        {"args": [], "expected": [1, 2]},          # a tuple return equals a JSON list
        {"args": [1], "expected": 0.30000000000000004},
        {"args": [2], "expected": True},            # bool is not int
    ]}
    prog = "def f(x=None):\n    return (1, 2) if x is None else (0.1 + 0.2 if x == 1 else 1)"
    v = code_verifier.verify(prog, tests, limits=LIM)
    assert v.score == pytest.approx(2 / 3) and "case 2" in v.detail
    close = {**tests, "cases": [{"args": [1], "expected": 0.3}], "rel_tol": 1e-9}
    assert code_verifier.verify(prog, close, limits=LIM).status is Status.CORRECT


def test_fenced_completion_is_extracted(code_verifier):
    completion = "Here is my solution:\n```python\ndef add(a, b):\n    return a + b\n```\nIt adds."
    assert code_verifier.verify(completion, ADD_CALL, limits=LIM).status is Status.CORRECT
    assert code_verifier.verify("no code at all, sorry", ADD_CALL, limits=LIM).status is Status.INCORRECT
    assert code_verifier.verify("```cpp\nint main(){}\n```", ADD_CALL, limits=LIM).status is Status.UNPARSEABLE


@pytest.mark.parametrize("bad,field", [
    ({"kind": "nope"}, "tests.kind"),
    ({"kind": "stdio", "cases": []}, "tests.cases"),
    ({"kind": "stdio", "cases": [{"stdin": 1, "expected_stdout": "x"}]}, "tests.cases[0].stdin"),
    ({"kind": "call", "entry_point": "1x", "cases": [{"args": [], "expected": 1}]}, "tests.entry_point"),
    ({"kind": "call", "entry_point": "f", "cases": [{"args": []}]}, "tests.cases[0]"),
    ({"kind": "assert", "entry_point": "f", "code": "def check(:"}, "tests.code"),
])
def test_malformed_tests_abstain_naming_the_field(code_verifier, bad, field):
    v = code_verifier.verify("def f(): pass", bad, limits=LIM)
    assert v.status is Status.ABSTAIN and v.score is None and field in v.detail


def test_bad_limits_name_the_field(code_verifier):
    with pytest.raises(ValueError, match="wall_s"):
        code_verifier.verify("print(1)", ADD_STDIO, limits={"wall_s": -1})
    with pytest.raises(ValueError, match="walltime"):
        code_verifier.verify("print(1)", ADD_STDIO, limits={"walltime": 1})


def test_a_sandbox_failure_is_error_never_zero(code_verifier, monkeypatch):
    from sandboxes import SandboxError

    def broken(*a, **k):
        raise SandboxError("zygote lost")
    for method in ("run", "run_cases"):  # stdio tests go through a session of all their cases
        monkeypatch.setattr(type(code_verifier_sandbox(code_verifier)), method, broken)
    v = code_verifier.verify("print(3)", ADD_STDIO, limits=LIM)
    assert v.status is Status.ERROR and v.score is None and "zygote lost" in v.detail


def code_verifier_sandbox(_):
    import verifiers.code as code

    return code.sandbox()


def test_through_the_runtime_a_hang_is_incorrect_not_timeout():
    import verifiers

    v = verifiers.verify("code", "import time\ntime.sleep(60)", ADD_STDIO, limits={"wall_s": 1.0})
    assert v.status is Status.INCORRECT and "wall limit exceeded" in v.detail
    ok = verifiers.verify("code", SOLUTIONS["call"], ADD_CALL, limits={"wall_s": 2.0})
    assert ok.status is Status.CORRECT


MEMORY_SCAN = '''
import re
def find():
    needle = re.compile(rb"zq-expected-7[7]31")  # never spells the answer itself (constants fold)
    with open("/proc/self/maps") as m:
        maps = m.read().splitlines()
    with open("/proc/self/mem", "rb", 0) as mem:
        for line in maps:
            addr, perms = line.split()[:2]
            lo, hi = (int(x, 16) for x in addr.split("-"))
            if "r" not in perms or hi - lo > 1 << 28:
                continue
            try:
                mem.seek(lo)
                chunk = mem.read(hi - lo)
            except (OSError, ValueError, OverflowError):
                continue
            hit = needle.search(chunk)
            if hit:
                return hit.group().decode()
    return "not found"
'''


@pytest.mark.parametrize("kind", ["stdio", "call"])
def test_expected_output_is_nowhere_in_the_candidates_memory(code_verifier, kind):
    # The candidate reads every readable page of its own address space looking for the answer.
    if kind == "stdio":
        tests = {"kind": "stdio", "cases": [{"stdin": "", "expected_stdout": "zq-expected-7731"}]}
        program = MEMORY_SCAN + "print(find())"
    else:
        tests = {"kind": "call", "entry_point": "find", "cases": [{"args": [], "expected": "zq-expected-7731"}]}
        program = MEMORY_SCAN
    v = code_verifier.verify(program, tests, limits=LIM)
    assert v.status is Status.INCORRECT and "not found" in v.detail, v


def test_the_memory_scan_would_find_the_answer_if_it_were_there(code_verifier):
    # Control for the test above: the same scan finds the marker when it is given as input.
    tests = {"kind": "stdio", "cases": [{"stdin": "zq-expected-7731\n", "expected_stdout": "zq-expected-7731"}]}
    v = code_verifier.verify(MEMORY_SCAN + "import sys\nsys.stdin.read()\nprint(find())", tests, limits=LIM)
    assert v.status is Status.CORRECT, v
