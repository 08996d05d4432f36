"""The five kinds of code tests the `code` verifier accepts, parsed from plain dicts.

    {"kind": "stdio",    "cases": [{"stdin": "1 2\\n", "expected_stdout": "3\\n"}, ...]}
    {"kind": "call",     "entry_point": "add", "cases": [{"args": [1, 2], "expected": 3}, ...]}
                         (a case may also give "kwargs": {...})
    {"kind": "method",   "class": "Solution", "method": "twoSum", "cases": [...]}
                         a method of a fresh instance per case (LeetCode's `class Solution`); class and method may
                         instead be read from "starter" (the starter code shown to the model); a case is
                         {"args", "kwargs", "expected"} as for call, or the text forms public sets store:
                         {"input": "nums = [2,7,11,15], target = 9", "output": "[0,1]"} (keyword arguments) or
                         {"input": "[2,7,11,15]\\n9", "output": "[0, 1]"} (one JSON or Python literal per line);
                         "prelude" is code run before the program, in the sandbox (default: the imports LeetCode's
                         judge makes, `from typing import *` and the like; a dataset's own imports go here)
    {"kind": "assert",   "entry_point": "add", "code": "def check(candidate):\\n    assert candidate(1, 2) == 3"}
    {"kind": "unittest", "code": "class T(unittest.TestCase):\\n    def test_add(self): self.assertEqual(add(1, 2), 3)"}

Optional on any kind: "rel_tol"/"abs_tol" (float comparison for `call`/`method`, default exact);
"compare": "exact" (default) or "tolerant", the comparison competitive-programming judges use: stdout lines
stripped at both ends, blank lines dropped, tokens equal as text or as decimals ("1.50" = "1.5", "2" = "2.0",
within rel_tol/abs_tol when given); returned numbers equal by value whatever their type (2 = 2.0, never True = 1)
and strings equal stripped;
"helpers": trusted code given with the problem (helper functions the tests call, such as
HumanEval's `poly`), run on the verifier's side before the tests, never taken from the candidate;
"names": further names of the candidate the tests may read (besides the entry point and the names
the test code reads that neither it nor the helpers define).

Public formats as they come:
    HumanEval  {"prompt": ..., "test": "def check(candidate): ...", "entry_point": "f"}
               -> assert, with the prompt as trusted helpers
    MBPP       {"test_list": ["assert f(1) == 2", ...], "test_setup_code": "", "test_imports": [...]}
               -> unittest, one test per assert (the function is found by the names the asserts read)
    APPS       {"input_output": {"inputs": [...], "outputs": [...]}}  (or that as a JSON string)
               -> stdio; with "fn_name": call, each input a list of arguments and each output the
               expected value (APPS wraps most of them in a one-item list: that list is unwrapped)
    CodeContests {"public_tests": {"input": [...], "output": [...]}, "private_tests": ..., "generated_tests": ...}
               -> stdio over every case given
    LeetCode   {"entry_point": "Solution().twoSum", "input_output": [{"input": "nums = [...], target = 9",
               "output": "[0,1]"}, ...], "prompt": "<the imports>"}  (LeetCodeDataset's columns)
               -> method, with the prompt's imports as the prelude
    LiveCodeBench {"starter_code": "class Solution: ...", "public_test_cases": [{"input": "[2,7]\\n9", "output":
               "[0, 1]", "testtype": "functional"}, ...] (or that as a JSON string), "metadata": {"func_name": ...}}
               -> method (functional cases; the class and method from the starter code) or stdio (stdin cases)
A JSON string holding one of these dicts is accepted too. `parse_tests` raises `TestSpecError`
naming the field and the value when a spec is malformed.
"""
from __future__ import annotations

import ast
import functools
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

KINDS = ("stdio", "call", "method", "assert", "unittest")
COMPARES = ("exact", "tolerant")
# what LeetCode's judge has imported before a solution runs (its solutions use List, Counter, heappush, inf unimported)
LEETCODE_PRELUDE = ("from typing import *\nfrom collections import *\nfrom functools import *\n"
                    "from itertools import *\nfrom heapq import *\nfrom bisect import *\nimport math\n"
                    "inf = float('inf')\n")


class TestSpecError(ValueError):
    """A malformed test specification (the dataset's fault, not the model's)."""

    __test__ = False  # not a pytest class


@dataclass(frozen=True)
class Tests:
    __test__ = False

    kind: str
    cases: tuple = ()            # stdio: (stdin, expected_stdout); call, method: (args, kwargs, expected)
    entry_point: str | None = None  # call: the function; method: "Class.method"
    code: str | None = None
    rel_tol: float = 0.0
    abs_tol: float = 0.0
    extra: dict = field(default_factory=dict)
    helpers: str | None = None   # trusted code run in the tests' namespace first (never the candidate's)
    names: tuple = ()            # further candidate names the tests may read
    compare: str = "exact"       # or "tolerant" (see the module docstring)
    prelude: str = ""            # method: code run before the program, in the sandbox

    @property
    def runs(self) -> int:
        """Sandbox runs this spec needs (stdio: one per case; the others: one session)."""
        return len(self.cases) if self.kind == "stdio" else 1


def _need_str(d: dict, key: str, where: str) -> str:
    v = d.get(key)
    if not isinstance(v, str):
        raise TestSpecError(f"{where}.{key} must be a string, got {v!r:.80}")
    return v


def _identifier(d: dict, key: str) -> str:
    v = _need_str(d, key, "tests")
    if not v.isidentifier():
        raise TestSpecError(f"tests.{key} must be a Python identifier, got {v!r:.80}")
    return v


def _tol(d: dict, key: str) -> float:
    v = d.get(key, 0.0)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise TestSpecError(f"tests.{key} must be a non-negative number, got {v!r}")
    return float(v)


def _public_format(spec: dict) -> dict:
    """A HumanEval, MBPP, APPS, CodeContests, LeetCode or LiveCodeBench row as one of our kinds (module docstring)."""
    leetcode = _LEETCODE_ENTRY.match(str(spec.get("entry_point", "")))
    if leetcode and isinstance(spec.get("input_output"), list):  # LeetCodeDataset
        return {"kind": "method", "class": leetcode.group(1), "method": leetcode.group(2),
                "cases": spec["input_output"], "prelude": spec.get("prompt") or LEETCODE_PRELUDE}
    if "public_test_cases" in spec:  # LiveCodeBench
        return _livecodebench(spec)
    if "test" in spec and "entry_point" in spec:  # HumanEval
        return {"kind": "assert", "code": spec["test"], "entry_point": spec["entry_point"],
                **({"helpers": spec["prompt"]} if spec.get("prompt") else {})}
    if "test_list" in spec:  # MBPP
        asserts = spec["test_list"]
        if not isinstance(asserts, list) or not asserts or not all(isinstance(a, str) for a in asserts):
            raise TestSpecError(f"tests.test_list must be a non-empty list of strings, got {asserts!r:.80}")
        imports = spec.get("test_imports") or []
        if not isinstance(imports, list) or not all(isinstance(a, str) for a in imports):
            raise TestSpecError(f"tests.test_imports must be a list of strings, got {imports!r:.80}")
        setup = spec.get("test_setup_code") or ""
        if not isinstance(setup, str):
            raise TestSpecError(f"tests.test_setup_code must be a string, got {setup!r:.80}")
        body = "".join(f"    def test_{i}(self):\n" + "".join(f"        {line}\n" for line in a.splitlines())
                       for i, a in enumerate(asserts))
        return {"kind": "unittest", "code": "\n".join(imports) + "\n" + setup + "\n\nclass MBPP(unittest.TestCase):\n"
                + body}
    if "input_output" in spec:  # APPS
        io = spec["input_output"]
        if isinstance(io, str):
            try:
                io = json.loads(io)
            except ValueError:
                raise TestSpecError(f"tests.input_output must be JSON, got {io[:80]!r}") from None
        if not isinstance(io, dict) or not isinstance(io.get("inputs"), list) \
                or not isinstance(io.get("outputs"), list) or len(io["inputs"]) != len(io["outputs"]):
            raise TestSpecError("tests.input_output must hold 'inputs' and 'outputs' lists of one length")
        if io.get("fn_name"):
            cases = [{"args": a if isinstance(a, list) else [a],
                      "expected": o[0] if isinstance(o, list) and len(o) == 1 else o}
                     for a, o in zip(io["inputs"], io["outputs"])]
            return {"kind": "call", "entry_point": io["fn_name"], "cases": cases}
        return {"kind": "stdio", "cases": [{"stdin": _text(i), "expected_stdout": _text(o)}
                                           for i, o in zip(io["inputs"], io["outputs"])]}
    groups = [spec[k] for k in ("public_tests", "private_tests", "generated_tests") if isinstance(spec.get(k), dict)]
    if groups:  # CodeContests
        cases = [{"stdin": _text(i), "expected_stdout": _text(o)}
                 for g in groups for i, o in zip(g.get("input") or [], g.get("output") or [])]
        return {"kind": "stdio", "cases": cases}
    raise TestSpecError(f"tests: no 'kind' and not a known public format (HumanEval, MBPP, APPS, CodeContests); "
                        f"keys: {sorted(spec)[:8]}")


_LEETCODE_ENTRY = re.compile(r"^\s*(\w+)\(\)\.(\w+)\s*$")  # "Solution().twoSum"


def _json_field(spec: dict, key: str, default: Any) -> Any:
    v = spec.get(key, default)
    if isinstance(v, str) and v.strip()[:1] in ("[", "{"):
        try:
            return json.loads(v)
        except ValueError:
            raise TestSpecError(f"tests.{key} must be JSON, got {v[:80]!r}") from None
    return v


def _livecodebench(spec: dict) -> dict:
    """A LiveCodeBench row: functional cases -> method (class and method from the starter code, the method name
    from metadata.func_name when given), stdin cases -> stdio. Its private cases come compressed: decode them
    into `public_test_cases` (or a list of your own) before they reach here."""
    cases = _json_field(spec, "public_test_cases", [])
    if not isinstance(cases, list) or not cases or not all(isinstance(c, dict) for c in cases):
        raise TestSpecError(f"tests.public_test_cases must be a non-empty list of cases, got {str(cases)[:80]!r}")
    if all(c.get("testtype") == "stdin" for c in cases):
        return {"kind": "stdio", "cases": [{"stdin": _text(c.get("input", "")), "expected_stdout": _text(
            c.get("output", ""))} for c in cases]}
    meta = _json_field(spec, "metadata", {}) or {}
    method = {"method": meta["func_name"]} if isinstance(meta, dict) and meta.get("func_name") else {}
    return {"kind": "method", "starter": spec.get("starter_code") or "", **method,
            "cases": [{"input": c.get("input", ""), "output": c.get("output", "")} for c in cases]}


def _literal(text: str, where: str) -> Any:
    """A value written as a Python literal ("[1, None]") or a JSON one ("[1, null]", "true")."""
    t = text.strip()
    try:
        return ast.literal_eval(t)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    try:
        return json.loads(t)
    except ValueError:
        raise TestSpecError(f"{where} is neither a Python nor a JSON literal: {t[:80]!r}") from None


def _arguments(text: str, where: str) -> tuple[list, dict]:
    """A case's input as public sets store it: "nums = [2,7], target = 9" (keyword arguments), "[2,7], 9"
    (positional ones), or "[2,7]\\n9" (one literal per line, LiveCodeBench's form)."""
    t = text.strip()
    try:
        call = ast.parse(f"f({t})", mode="eval").body
    except SyntaxError:
        call = None
    if isinstance(call, ast.Call) and all(k.arg for k in call.keywords):
        src = f"f({t})"
        args = [_literal(ast.get_source_segment(src, a) or "", f"{where}.input") for a in call.args]
        kwargs = {k.arg: _literal(ast.get_source_segment(src, k.value) or "", f"{where}.input") for k in call.keywords}
        return args, kwargs
    return [_literal(line, f"{where}.input") for line in t.splitlines() if line.strip()], {}


def _method_entry(spec: dict) -> str:
    """"Class.method" from the spec's class/method, else from its starter code (the first class and its first
    public method)."""
    starter = spec.get("starter") or ""
    if not isinstance(starter, str):
        raise TestSpecError(f"tests.starter must be a string, got {starter!r:.80}")
    found_cls = re.search(r"^class\s+(\w+)", starter, re.M)
    found_method = re.search(r"^\s+def\s+([A-Za-z]\w*)\s*\(\s*self", starter, re.M)
    cls = spec.get("class") or (found_cls.group(1) if found_cls else "Solution")
    method = spec.get("method") or (found_method.group(1) if found_method else None)
    for key, v in (("class", cls), ("method", method)):
        if not isinstance(v, str) or not v.isidentifier():
            raise TestSpecError(f"tests.{key} must be a Python identifier (or readable from tests.starter), got {v!r:.80}")
    return f"{cls}.{method}"


def _text(x: Any) -> str:
    """A stdio input or output as given: a string, or a list of lines."""
    if isinstance(x, list):
        return "\n".join(str(line) for line in x) + "\n"
    if not isinstance(x, str):
        raise TestSpecError(f"tests: a stdio input/output must be a string or a list of lines, got {x!r:.80}")
    return x


@functools.lru_cache(maxsize=512)
def compiled(code: str, filename: str):
    """Trusted test or helper code, compiled once per text and process (a GRPO group verifies the same tests
    once per completion; a code object runs afresh in every namespace it is given). SyntaxError as compile."""
    return compile(code, filename, "exec", dont_inherit=True)  # not this module's __future__ flags


def _trusted(spec: dict) -> dict:
    """The optional `helpers` (trusted code; must compile) and `names` (identifiers) of a spec."""
    out: dict = {}
    if spec.get("helpers") is not None:
        helpers = _need_str(spec, "helpers", "tests")
        try:
            compiled(helpers, "<helpers>")
        except SyntaxError as e:
            raise TestSpecError(f"tests.helpers does not compile: {e}") from None
        out["helpers"] = helpers
    names = spec.get("names", [])
    if not isinstance(names, list) or not all(isinstance(n, str) and n.isidentifier() for n in names):
        raise TestSpecError(f"tests.names must be a list of identifiers, got {names!r:.80}")
    if names:
        out["names"] = tuple(names)
    return out


def parse_tests(spec: Any) -> Tests:
    if isinstance(spec, Tests):
        return spec
    if isinstance(spec, str):
        try:
            spec = json.loads(spec)
        except ValueError as e:
            raise TestSpecError(f"tests: a string must hold a JSON object, got {spec[:80]!r} ({e})") from None
    if not isinstance(spec, dict):
        raise TestSpecError(f"tests must be a dict (or JSON object), got {type(spec).__name__}")
    if "kind" not in spec:
        spec = _public_format(spec)
    kind = spec.get("kind")
    if kind not in KINDS:
        raise TestSpecError(f"tests.kind must be one of {list(KINDS)}, got {kind!r}")
    compare = spec.get("compare", "exact")
    if compare not in COMPARES:
        raise TestSpecError(f"tests.compare must be one of {list(COMPARES)}, got {compare!r:.80}")
    tol = {"rel_tol": _tol(spec, "rel_tol"), "abs_tol": _tol(spec, "abs_tol"), "compare": compare, **_trusted(spec)}
    if kind in ("stdio", "call", "method"):
        cases = spec.get("cases")
        if not isinstance(cases, list) or not cases:
            raise TestSpecError(f"tests.cases must be a non-empty list, got {cases!r:.80}")
        parsed = []
        for i, case in enumerate(cases):
            where = f"tests.cases[{i}]"
            if not isinstance(case, dict):
                raise TestSpecError(f"{where} must be a dict, got {case!r:.80}")
            if kind == "stdio":
                stdin = case.get("stdin", "")
                if not isinstance(stdin, str):
                    raise TestSpecError(f"{where}.stdin must be a string, got {stdin!r:.80}")
                parsed.append((stdin, _need_str(case, "expected_stdout", where)))
            elif kind == "method" and "input" in case:
                if not isinstance(case["input"], str) or not isinstance(case.get("output"), str):
                    raise TestSpecError(f"{where}: 'input' and 'output' must be strings, got {case!r:.80}")
                args, kwargs = _arguments(case["input"], where)
                parsed.append((args, kwargs, _literal(case["output"], f"{where}.output")))
            else:
                args, kwargs = case.get("args", []), case.get("kwargs", {})
                if not isinstance(args, list):
                    raise TestSpecError(f"{where}.args must be a list, got {args!r:.80}")
                if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
                    raise TestSpecError(f"{where}.kwargs must be a dict with string keys, got {kwargs!r:.80}")
                if "expected" not in case:
                    raise TestSpecError(f"{where} has no 'expected' value")
                parsed.append((args, kwargs, case["expected"]))
        if kind == "method":
            prelude = spec.get("prelude", LEETCODE_PRELUDE)
            if not isinstance(prelude, str):
                raise TestSpecError(f"tests.prelude must be a string, got {prelude!r:.80}")
            return Tests(kind, tuple(parsed), _method_entry(spec), None, prelude=prelude, **tol)
        entry = _identifier(spec, "entry_point") if kind == "call" else None
        return Tests(kind, tuple(parsed), entry, None, **tol)
    code = _need_str(spec, "code", "tests")
    try:
        compiled(code, "<tests>")
    except SyntaxError as e:
        raise TestSpecError(f"tests.code does not compile: {e}") from None
    entry = _identifier(spec, "entry_point") if kind == "assert" else None
    return Tests(kind, (), entry, code, **tol)
