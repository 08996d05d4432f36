"""The four kinds of code tests the `code` verifier accepts, parsed from plain dicts.

    {"kind": "stdio",    "cases": [{"stdin": "1 2\\n", "expected_stdout": "3\\n"}, ...]}
    {"kind": "call",     "entry_point": "add", "cases": [{"args": [1, 2], "expected": 3}, ...]}
                         (a case may also give "kwargs": {...})
    {"kind": "assert",   "entry_point": "add", "code": "def check(candidate):\\n    assert candidate(1, 2) == 3"}
    {"kind": "unittest", "code": "class T(unittest.TestCase):\\n    def test_add(self): self.assertEqual(add(1, 2), 3)"}

Optional on any kind: "rel_tol"/"abs_tol" (float comparison for `call`, default exact).
A JSON string holding one of these dicts is accepted too. `parse_tests` raises `TestSpecError`
naming the field and the value when a spec is malformed.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

KINDS = ("stdio", "call", "assert", "unittest")


class TestSpecError(ValueError):
    """A malformed test specification (the dataset's fault, not the model's)."""

    __test__ = False  # not a pytest class


@dataclass(frozen=True)
class Tests:
    __test__ = False

    kind: str
    cases: tuple = ()            # stdio: (stdin, expected_stdout); call: (args, kwargs, expected)
    entry_point: str | None = None
    code: str | None = None
    rel_tol: float = 0.0
    abs_tol: float = 0.0
    extra: dict = field(default_factory=dict)

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
    kind = spec.get("kind")
    if kind not in KINDS:
        raise TestSpecError(f"tests.kind must be one of {list(KINDS)}, got {kind!r}")
    tol = {"rel_tol": _tol(spec, "rel_tol"), "abs_tol": _tol(spec, "abs_tol")}
    if kind in ("stdio", "call"):
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
            else:
                args, kwargs = case.get("args", []), case.get("kwargs", {})
                if not isinstance(args, list):
                    raise TestSpecError(f"{where}.args must be a list, got {args!r:.80}")
                if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
                    raise TestSpecError(f"{where}.kwargs must be a dict with string keys, got {kwargs!r:.80}")
                if "expected" not in case:
                    raise TestSpecError(f"{where} has no 'expected' value")
                parsed.append((args, kwargs, case["expected"]))
        entry = _identifier(spec, "entry_point") if kind == "call" else None
        return Tests(kind, tuple(parsed), entry, None, **tol)
    code = _need_str(spec, "code", "tests")
    try:
        compile(code, "<tests>", "exec")
    except SyntaxError as e:
        raise TestSpecError(f"tests.code does not compile: {e}") from None
    entry = _identifier(spec, "entry_point") if kind == "assert" else None
    return Tests(kind, (), entry, code, **tol)
