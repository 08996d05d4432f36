"""Code tests as today's code-RL sets write them, and third-party packages in the sandbox.

A LeetCode-style problem (`class Solution` with a method; the arguments in the text forms LeetCodeDataset and
LiveCodeBench store) and programs importing numpy and sympy, each judged by the `code` verifier at every isolation
level this machine offers; the tolerant comparison competitive-programming judges use, as a table; the packages
read-only, alone (nothing else of the environment), and never installed."""
from __future__ import annotations

import json
import os

import pytest

from reasoning_rl.types import Status
from sandboxes import SandboxError
from verifiers.code import same_stdout, same_value
from verifiers.code_tests import TestSpecError, parse_tests

from .conftest import _remove_net, _start_in_net

pytestmark = pytest.mark.timeout(180)
LIM = {"wall_s": 5.0, "cpu_s": 5.0, "memory_mb": 512}

TWO_SUM_STARTER = "class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n        "
TWO_SUM = ("class Solution:\n    def twoSum(self, nums: List[int], target: int) -> List[int]:\n"
           "        seen = {}\n        for i, x in enumerate(nums):\n"
           "            if target - x in seen:\n                return [seen[target - x], i]\n"
           "            seen[x] = i\n")
CASES = [{"input": "nums = [2,7,11,15], target = 9", "output": "[0,1]"},  # LeetCodeDataset: keyword arguments
         {"input": "[3,2,4]\n6", "output": "[1, 2]"},  # LiveCodeBench: one JSON value per line
         {"args": [[3, 3], 6], "expected": [0, 1]}]  # plain data, as for `call`
# (the spec as a public set stores it, the program, expected status)
LEETCODE = [
    ({"kind": "method", "starter": TWO_SUM_STARTER, "cases": CASES}, TWO_SUM, Status.CORRECT),
    ({"kind": "method", "class": "Solution", "method": "twoSum", "cases": CASES}, TWO_SUM, Status.CORRECT),
    # the answer in the other order: wrong
    ({"kind": "method", "starter": TWO_SUM_STARTER, "cases": CASES},
     TWO_SUM.replace("[seen[target - x], i]", "[i, seen[target - x]]"), Status.INCORRECT),
    # a LeetCodeDataset row as it comes (entry point "Solution().twoSum", its imports in `prompt`)
    ({"entry_point": "Solution().twoSum", "input_output": CASES[:2], "prompt": "from typing import *\n",
      "test": "def check(candidate): ..."}, TWO_SUM, Status.CORRECT),
    # a LiveCodeBench row as it comes (cases as a JSON string, the method name in metadata)
    ({"starter_code": TWO_SUM_STARTER, "metadata": json.dumps({"func_name": "twoSum"}),
      "public_test_cases": json.dumps([{"input": "[2,7,11,15]\n9", "output": "[0, 1]", "testtype": "functional"}])},
     TWO_SUM, Status.CORRECT),
    # a fresh instance per case: state kept on `self` from an earlier case does not leak into the next
    ({"kind": "method", "class": "Solution", "method": "count", "cases": [{"args": [], "expected": 1}] * 3},
     "class Solution:\n    n = 0\n    def __init__(self):\n        self.k = 0\n"
     "    def count(self):\n        self.k += 1\n        return self.k\n", Status.CORRECT),
    # a function where a method is asked for, and a class without the method: not passed
    ({"kind": "method", "starter": TWO_SUM_STARTER, "cases": CASES}, "def twoSum(nums, target):\n    return [0, 1]\n",
     Status.INCORRECT),
    ({"kind": "method", "starter": TWO_SUM_STARTER, "cases": CASES}, "class Solution:\n    pass\n", Status.INCORRECT),
]


@pytest.fixture
def level_verifier(level_sb, monkeypatch):
    import verifiers.code as code

    monkeypatch.setitem(code._SANDBOXES, os.getpid(), level_sb)
    return code.CodeVerifier()


@pytest.mark.parametrize("spec,program,status", LEETCODE, ids=range(len(LEETCODE)))
def test_a_leetcode_style_problem_is_judged_at_every_level(level_verifier, spec, program, status):
    v = level_verifier.verify(program, spec, limits=LIM)
    assert v.status is status, v


NUMPY_SYMPY = [
    # (program, tests): each correct, each importing a package the sandbox offers
    ("import numpy as np\ndef solve(a):\n    return int(np.linalg.matrix_rank(np.array(a)))\n",
     {"kind": "call", "entry_point": "solve", "cases": [{"args": [[[1, 2], [2, 4]]], "expected": 1},
                                                         {"args": [[[1, 0], [0, 1]]], "expected": 2}]}),
    ("from sympy import *\ndef roots(c):\n    x = symbols('x')\n    return sorted(int(r) for r in solve(c[0]*x**2 + "
     "c[1]*x + c[2], x))\n",
     {"kind": "call", "entry_point": "roots", "cases": [{"args": [[1, -3, 2]], "expected": [1, 2]}]}),
    ("import numpy as np, sympy\nn = int(input())\nprint(int(np.sum(np.arange(n + 1))), sympy.factorint(n))\n",
     {"kind": "stdio", "cases": [{"stdin": "12\n", "expected_stdout": "78 {2: 2, 3: 1}\n"}]}),
]


@pytest.mark.parametrize("program,tests", NUMPY_SYMPY, ids=["numpy", "sympy", "both-stdio"])
def test_a_program_importing_numpy_and_sympy_passes_at_every_level(level_verifier, program, tests):
    v = level_verifier.verify(program, tests, limits=LIM)
    assert v.status is Status.CORRECT, v


def test_the_packages_are_read_only_and_alone_at_every_level(level_sb):
    probe = ("import os, numpy, importlib.util\n"
             "path = os.path.join(os.path.dirname(numpy.__file__), '__init__.py')\n"
             "try:\n    open(path, 'a').write('x = 1')\n    print('WROTE')\nexcept OSError as e:\n    print('refused')\n"
             "try:\n    os.remove(path)\n    print('REMOVED')\nexcept OSError:\n    print('refused')\n"
             "print(sorted(os.listdir('/pkgs')))\n"
             "print([m for m in ('torch', 'transformers', 'reasoning_rl', 'verifiers', 'pip')"
             " if importlib.util.find_spec(m)])\n")
    r = level_sb.run(probe, limits=LIM)
    lines = r.stdout.splitlines()
    assert r.ok and lines[:2] == ["refused", "refused"], r
    assert {"numpy", "sympy", "mpmath"} <= set(json.loads(lines[2].replace("'", '"')))
    assert lines[3] == "[]"  # nothing of the environment but the declared packages: no torch, no project, no pip
    assert level_sb.report["packages"]["imports"]["numpy"]["import_s"] > 0  # measured once, at start


def test_a_missing_package_is_one_line_and_nothing_is_installed(tmp_path):
    from sandboxes import Sandbox

    before = sorted(os.listdir(tmp_path))
    with pytest.raises(ValueError, match=r"Sandbox.packages: 'no-such-package-xyz' is not installed in"):
        Sandbox(packages=("numpy", "no-such-package-xyz"))
    with pytest.raises(ValueError, match=r"Sandbox.site: no such folder"):
        Sandbox(packages=("numpy",), site=str(tmp_path / "nowhere"))
    assert sorted(os.listdir(tmp_path)) == before


def test_a_package_that_cannot_be_imported_in_the_sandbox_is_refused_at_start(tmp_path):
    """An environment whose package fails to import inside the sandbox (built for another Python, a missing
    system library): the sandbox refuses to start, naming the package, instead of failing every program."""
    site = tmp_path / "site"
    (site / "brokenpkg").mkdir(parents=True)
    (site / "brokenpkg" / "__init__.py").write_text("raise ImportError('built for another Python')\n")
    info = site / "brokenpkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: brokenpkg\nVersion: 1.0\n")
    (info / "RECORD").write_text("brokenpkg/__init__.py,,\nbrokenpkg-1.0.dist-info/METADATA,,\n")
    for p in (tmp_path, site, site / "brokenpkg", info):
        os.chmod(p, 0o755)
    with pytest.raises(SandboxError, match=r"`import brokenpkg` fails inside the sandbox .*built for another Python"):
        sb, nets = _start_in_net("broken-package", packages=("brokenpkg",), site=str(site))
        _remove_net(sb, nets)


# (got, want, tolerant, equal): the stdout comparison; exact ignores trailing whitespace only
STDOUT = [
    ("3\n", "3", False, True),
    ("3  \n\n", "3\n", False, True),
    (" 3\n", "3\n", False, False),  # leading space: exact says no
    (" 3\n", "3\n", True, True),  # tolerant strips lines
    ("1.50\n", "1.5\n", False, False),
    ("1.50\n", "1.5\n", True, True),  # numbers as decimals
    ("2\n", "2.0\n", True, True),
    ("1 2\n\n3\n", "1 2\n3\n", True, True),  # blank lines dropped
    ("1  2\n", "1 2\n", True, True),  # tokens, not characters
    ("0.333\n", "0.3333\n", True, False),  # decimals are not a tolerance
    ("YES\n", "yes\n", True, False),  # text stays case-sensitive
    ("nan\n", "nan\n", True, True),  # equal as text
    ("inf\n", "1e309\n", True, False),
]


@pytest.mark.parametrize("got,want,tolerant,equal", STDOUT)
def test_stdout_comparison(got, want, tolerant, equal):
    assert same_stdout(got, want, tolerant) is equal


def test_tolerant_stdout_with_a_tolerance():
    assert same_stdout("0.333\n", "0.3333\n", True, abs_tol=1e-3)
    assert not same_stdout("0.33\n", "0.3333\n", True, abs_tol=1e-3)


# (got, want, tolerant, equal): returned values
VALUES = [
    ([0, 1], (0, 1), False, True),
    (2, 2.0, False, True),
    (True, 1, True, False),  # a bool is never a number
    (" ab ", "ab", False, False),
    (" ab ", "ab", True, True),
    ([" ab", 2.0], ["ab", 2], True, True),
]


@pytest.mark.parametrize("got,want,tolerant,equal", VALUES)
def test_value_comparison(got, want, tolerant, equal):
    assert same_value(got, want, tolerant=tolerant) is equal


def test_tolerant_comparison_through_the_verifier(level_verifier):
    tests = {"kind": "stdio", "compare": "tolerant", "cases": [{"stdin": "", "expected_stdout": "0.5\n"}]}
    assert level_verifier.verify("print(' 0.50 ')", tests, limits=LIM).status is Status.CORRECT
    assert level_verifier.verify("print(' 0.50 ')", {**tests, "compare": "exact"}, limits=LIM).status \
        is Status.INCORRECT


# (spec, the field the error names): a malformed method spec abstains, naming it
BAD = [
    ({"kind": "method", "cases": CASES}, "tests.method"),  # no method and no starter to read it from
    ({"kind": "method", "method": "f", "cases": [{"input": "x = [1, ", "output": "1"}]}, "tests.cases[0].input"),
    ({"kind": "method", "method": "f", "cases": [{"input": "x = 1", "output": "[1, "}]}, "tests.cases[0].output"),
    ({"kind": "method", "method": "f", "cases": CASES, "prelude": 3}, "tests.prelude"),
    ({"kind": "stdio", "compare": "lenient", "cases": [{"stdin": "", "expected_stdout": ""}]}, "tests.compare"),
    ({"starter_code": "", "public_test_cases": "[]"}, "tests.public_test_cases"),
]


@pytest.mark.parametrize("spec,field", BAD, ids=range(len(BAD)))
def test_a_malformed_spec_names_its_field(spec, field):
    with pytest.raises(TestSpecError, match=field.replace("[", r"\[").replace("]", r"\]")):
        parse_tests(spec)
