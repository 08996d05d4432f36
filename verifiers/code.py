"""`code`: run the model's Python program in the sandbox against tests; score = fraction passed.

    verifiers.verify("code", completion=program_text, reference=tests, limits={"wall_s": 5})

`tests` is one of the five kinds in `code_tests.py` (stdio, call, method, assert, unittest).
`limits` is a `sandboxes.Limits` or a dict of its fields (wall_s, cpu_s, memory_mb,
output_bytes, file_size_mb, disk_mb, processes, open_files); the limits bind each run.
`packages` are the third-party packages the program may import (with what they require), read-only, from `site` (a
virtual environment or site-packages folder; default: this interpreter's): `sandboxes/packages.py`. Default:
numpy and sympy, those of them `site` has. A name given that is not installed there is an error, never an install.

The verdict is decided here, outside the candidate, never inside its process:
  * stdio: all cases run in one sandbox session, each as a fresh process with its own
    limits and a scratch space emptied in between (`Sandbox.run_cases`); stdout is compared
    here (trailing whitespace of each line and trailing blank lines ignored). A pass also
    needs exit status 0 and no limit hit.
  * call / method / assert / unittest: the program is loaded once in a sandboxed session and every
    value it returns crosses back as fresh plain data (`sandboxes.plain`). By default the
    session is one program of the process's host run (`Sandbox.serve(..., hosted=True)`: a
    fresh process per program, one isolated run for many; option `hosted=False` gives each
    program a run of its own, at about three times the cost); the comparisons,
    the `check(candidate)` function and the TestCases run here, in this process, against
    proxies that forward each call. Expected values never enter the sandbox, so printing
    "OK", exiting 0 early, `atexit` hooks, a forged `__eq__`, patching `unittest` or reading
    frames/gc/files/`/proc` cannot produce a pass. A test that is not run, is skipped, or
    runs into a dead program fails.

Statuses: all tests passed -> CORRECT (1.0); otherwise INCORRECT with the fraction passed,
and a limit hit is named in `detail` ("wall limit exceeded"); no program -> UNPARSEABLE
(0.0); a malformed test spec -> ABSTAIN (masked); a sandbox failure -> ERROR (masked: never
a 0). Test code (the dataset's, trusted) runs in the verifier's worker process.
"""
from __future__ import annotations

import ast
import builtins
import contextlib
import decimal
import functools
import math
import os
import re
import sys
import threading
import types
import unittest
import warnings
from dataclasses import dataclass, field
from typing import Any

from reasoning_rl.types import Status, Verdict
from sandboxes import Limits, RunEnded, Sandbox, SandboxError
from sandboxes.packages import installed_defaults

from .base import Verifier, VerifierSpec
from .code_tests import TestSpecError, Tests, compiled, parse_tests

FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n(.*?)```", re.S)
SANDBOX_LEVELS = {"none": 0.0, "rootless": 1.0, "full": 2.0}  # verdict metric `sandbox_level`
_SANDBOXES: dict = {}  # pid (the default packages), or (pid, packages, site)
_LOCK = threading.Lock()
_MODULE_LOCK = threading.Lock()


def extract_program(text: str) -> str:
    """The program in a completion: the text itself if it compiles, else its last Python code block."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a model's odd literals are the sandbox's business, not our log's
            compile(text, "<completion>", "exec", dont_inherit=True)
        return text
    except (SyntaxError, ValueError):
        pass
    blocks = [(lang.lower(), body) for lang, body in FENCE.findall(text)]
    for wanted in (("python", "py", "python3"), ("",)):
        chosen = [body for lang, body in blocks if lang in wanted]
        if chosen:
            return chosen[-1]
    return "" if blocks else text  # only non-Python blocks: no program; no blocks: let it fail in the sandbox


def sandbox(packages: tuple[str, ...] | None = None, site: str | None = None) -> Sandbox:
    """This process's sandbox offering `packages` from `site` (one warm zygote per process and package set,
    started on first use). None: the default set (numpy, sympy), those of them `site` has; its sandbox is keyed by
    the pid alone."""
    key = os.getpid() if (packages, site) == (None, None) else (os.getpid(), packages, site)
    with _LOCK:
        sb = _SANDBOXES.get(key)
        if sb is None:
            sb = _SANDBOXES[key] = Sandbox(packages=installed_defaults(site) if packages is None else packages,
                                           site=site)
        return sb


def normalise_stdout(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.rstrip().splitlines())


def same_stdout(got: str, want: str, tolerant: bool = False, rel_tol: float = 0.0, abs_tol: float = 0.0) -> bool:
    """Exact: equal once trailing whitespace of each line and trailing blank lines are gone. Tolerant (a
    competitive-programming judge's comparison): lines stripped at both ends, blank lines dropped, and each
    whitespace-separated token equal as text or as a decimal ("1.50" = "1.5"), within rel_tol/abs_tol if given."""
    if not tolerant:
        return normalise_stdout(got) == normalise_stdout(want)
    g = [line.split() for line in got.splitlines() if line.strip()]
    w = [line.split() for line in want.splitlines() if line.strip()]
    return len(g) == len(w) and all(len(a) == len(b) and all(_same_token(x, y, rel_tol, abs_tol) for x, y in zip(a, b))
                                    for a, b in zip(g, w))


def _same_token(got: str, want: str, rel_tol: float, abs_tol: float) -> bool:
    if got == want:
        return True
    try:
        a, b = decimal.Decimal(got), decimal.Decimal(want)
    except decimal.InvalidOperation:
        return False
    if not (a.is_finite() and b.is_finite()):
        return False
    return a == b or bool((rel_tol or abs_tol) and math.isclose(float(a), float(b), rel_tol=rel_tol, abs_tol=abs_tol))


def same_value(got: Any, want: Any, rel_tol: float = 0.0, abs_tol: float = 0.0, tolerant: bool = False) -> bool:
    """Plain-data equality as JSON sees it (tuples are lists), bool distinct from int, floats optionally close.
    Tolerant: strings also equal once stripped (numbers already compare by value: 2 = 2.0, never True = 1)."""
    if isinstance(got, bool) or isinstance(want, bool):
        return type(got) is type(want) and got == want
    if isinstance(got, (int, float)) and isinstance(want, (int, float)):
        if (rel_tol or abs_tol) and (isinstance(got, float) or isinstance(want, float)):
            return math.isclose(got, want, rel_tol=rel_tol, abs_tol=abs_tol)
        return got == want  # 2 = 2.0, as JSON readers see them
    if tolerant and isinstance(got, str) and isinstance(want, str):
        return got.strip() == want.strip()
    if isinstance(got, (list, tuple)) and isinstance(want, (list, tuple)):
        return len(got) == len(want) and all(same_value(g, w, rel_tol, abs_tol, tolerant) for g, w in zip(got, want))
    if isinstance(got, dict) and isinstance(want, dict):
        return got.keys() == want.keys() and all(same_value(got[k], want[k], rel_tol, abs_tol, tolerant) for k in got)
    return type(got) is type(want) and got == want


class CandidateError(Exception):
    """The candidate's function raised something that is not a builtin exception type."""


def _raise_like(error: str) -> None:
    name, _, message = error.partition(": ")
    cls = getattr(builtins, name.strip(), None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        raise cls(message)
    raise CandidateError(error)


@dataclass
class Tally:
    passed: int = 0
    total: int = 0
    failures: list = field(default_factory=list)
    limit: str | None = None
    runs: int = 0
    wall_s: float = 0.0
    cpu_s: float = 0.0
    peak_memory_bytes: int = 0
    leftover: int = 0
    level: str | None = None
    limits_by: str | None = None
    seccomp: bool = False

    def add_run(self, r) -> None:
        self.runs += 1
        self.level, self.limits_by, self.seccomp = r.isolation, r.limits_by, r.seccomp
        self.leftover += r.leftover_processes
        self.wall_s += r.wall_s
        self.cpu_s += r.cpu_s
        self.peak_memory_bytes = max(self.peak_memory_bytes, r.peak_memory_bytes)
        if r.limit and not self.limit:
            self.limit = r.limit

    def record(self, ok: bool, why: str = "") -> None:
        self.total += 1
        if ok:
            self.passed += 1
        elif len(self.failures) < 3:
            self.failures.append(why[:300])


def _run_stdio(sb: Sandbox, program: str, tests: Tests, lim: Limits, tally: Tally) -> None:
    """All cases in one sandbox session (`Sandbox.run_cases`: a fresh process and the same limits per case);
    a session that ended early for any reason but time is resumed in a fresh one from the next case."""
    todo = list(enumerate(tests.cases))
    while todo:
        results = sb.run_cases(program, [stdin for _, (stdin, _) in todo], lim)
        for (i, (_, expected)), r in zip(todo, results):
            tally.add_run(r)
            if not r.ok:
                tally.record(False, f"case {i}: {r.describe()}")
            elif not same_stdout(r.stdout, expected, tests.compare == "tolerant", tests.rel_tol, tests.abs_tol):
                tally.record(False, f"case {i}: wrong output {r.stdout[:60]!r}")
            else:
                tally.record(True)
        todo = todo[len(results):]
        if tally.limit in ("wall", "cpu"):  # a program that ran out of time once would again: save the budget
            for i, _ in todo:
                tally.record(False, f"case {i}: not run after an earlier {tally.limit} limit")
            return


@functools.lru_cache(maxsize=512)
def _referenced(code: str) -> tuple[frozenset[str], frozenset[str]]:
    """(names the test code reads, names it binds itself): which of the candidate's names it may see."""
    tree = ast.parse(code)
    reads, binds = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (reads if isinstance(node.ctx, ast.Load) else binds).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            binds.add(node.name)
        elif isinstance(node, ast.arg):
            binds.add(node.arg)
        elif isinstance(node, ast.ImportFrom) and node.module == "solution":
            reads.update(a.name for a in node.names if a.name != "*")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            binds.update((a.asname or a.name).split(".")[0] for a in node.names)
    return frozenset(reads), frozenset(binds)


def _exposed(tests: Tests, trusted: dict) -> set[str]:
    """The candidate's names the tests may read: the entry point, the spec's `names`, and the names the test
    code reads that neither it, the trusted helpers, nor Python's builtins define. Never `unittest`, never a
    builtin's name (a candidate's `abs` must not replace the one the tests call), never a helper's."""
    reads, binds = _referenced(tests.code or "")
    free = reads - binds - set(trusted) - set(dir(builtins)) - {"unittest", "__name__"}
    return free | set(tests.names) | ({tests.entry_point} if tests.entry_point else set())


def _proxies(session, allowed: set[str]) -> dict:
    """Callables that forward to the sandboxed program's functions; plain constants as values. Only `allowed`."""
    out = {}
    for name, info in session.names.items():
        if name not in allowed:
            continue
        if info.get("callable"):
            def proxy(*args, _name=name, **kwargs):
                res = session.call(_name, *args, **kwargs)
                if not res.ok:
                    _raise_like(res.error)
                return res.value
            proxy.__name__ = proxy.__qualname__ = name
            out[name] = proxy
        else:
            from sandboxes.plain import decode
            out[name] = decode(info["value"])
    return out


@contextlib.contextmanager
def _solution_module(names: dict):
    mod = types.ModuleType("solution")
    mod.__dict__.update(names)
    with _MODULE_LOCK:
        saved = sys.modules.get("solution")
        sys.modules["solution"] = mod
        try:
            yield
        finally:
            if saved is None:
                sys.modules.pop("solution", None)
            else:
                sys.modules["solution"] = saved


class _CountingResult(unittest.TestResult):
    def __init__(self) -> None:
        super().__init__()
        self.successes = 0

    def addSuccess(self, test) -> None:
        super().addSuccess(test)
        self.successes += 1


def _run_calls(session, tests: Tests, tally: Tally) -> None:
    """call / method: each case one call into the loaded program (`Class.method` builds a fresh instance per case),
    its plain-data result compared here."""
    for i, (args, kwargs, expected) in enumerate(tests.cases):
        try:
            res = session.call(tests.entry_point, *args, **kwargs)
        except RunEnded as e:
            tally.record(False, f"case {i}: {e}")
            continue
        if not res.ok:
            tally.record(False, f"case {i}: {res.error}")
        elif not same_value(res.value, expected, tests.rel_tol, tests.abs_tol, tests.compare == "tolerant"):
            tally.record(False, f"case {i}: returned {str(res.value)[:60]}")
        else:
            tally.record(True)


def _run_session(sb: Sandbox, program: str, tests: Tests, lim: Limits, tally: Tally, hosted: bool = True) -> None:
    session = sb.serve(program, lim, hosted=hosted)
    try:
        if not session.loaded:
            why = session.load_error or (session.result.describe() if session.result else "did not load")
            n = len(tests.cases) if tests.kind in ("call", "method") else 1
            for _ in range(n):
                tally.record(False, f"program did not load: {why}")
            if tests.kind == "unittest":
                tally.total = max(tally.total, _count_tests(tests.code))
            return
        if tests.kind in ("call", "method"):
            _run_calls(session, tests, tally)
            return
        ns = {"__name__": "tests", "__builtins__": builtins, "unittest": unittest}
        if tests.helpers:  # trusted code given with the problem: its helpers, not the candidate's copies
            try:
                exec(compiled(tests.helpers, "<helpers>"), ns)
            except Exception as e:  # the dataset's helper code is broken: not the candidate's fault
                raise TestSpecError(f"tests.helpers raised {type(e).__name__}: {e}") from None
        names = _proxies(session, _exposed(tests, ns))
        ns.update({k: v for k, v in names.items() if k not in ns or k == tests.entry_point})
        with _solution_module(names):
            if tests.kind == "assert":
                candidate = names.get(tests.entry_point)
                if not callable(candidate):
                    tally.record(False, f"the program defines no function {tests.entry_point!r}")
                    return
                try:
                    exec(compiled(tests.code, "<tests>"), ns)
                    check = ns.get("check")
                    if callable(check):
                        check(candidate)
                except AssertionError as e:
                    tally.record(False, _failed_line(e, tests.code))
                except SandboxError as e:
                    if not isinstance(e, RunEnded):
                        raise  # the sandbox failed, not the program: ERROR, never a failed test
                    tally.record(False, str(e))
                except Exception as e:  # the candidate's error (re-raised by its proxy) or a wrong-typed result
                    tally.record(False, f"{type(e).__name__}: {e}")
                else:
                    tally.record(True)
                return
            try:
                exec(compiled(tests.code, "<tests>"), ns)
            except SandboxError as e:
                if not isinstance(e, RunEnded):
                    raise
                tally.record(False, f"the tests could not load: {e}")
                return
            except Exception as e:  # the candidate's error, raised while the test module loaded: INCORRECT
                tally.total = max(tally.total, _count_tests(tests.code) - 1)
                tally.record(False, f"the tests could not load: {type(e).__name__}: {str(e)[:100]}")
                return
            suite = unittest.TestSuite()
            loader = unittest.TestLoader()
            for obj in list(ns.values()):
                if isinstance(obj, type) and issubclass(obj, unittest.TestCase) and obj is not unittest.TestCase:
                    suite.addTests(loader.loadTestsFromTestCase(obj))
            result = _CountingResult()
            suite.run(result)
            if session.broken:
                raise SandboxError("the sandbox failed during the unit tests")
            problems = [f"{t.id().rsplit('.', 1)[-1]}: {tb.strip().splitlines()[-1]}" for t, tb in result.failures
                        + result.errors] + [f"{t.id().rsplit('.', 1)[-1]}: skipped" for t, _ in result.skipped]
            for _ in range(result.successes):
                tally.record(True)
            for i in range(suite.countTestCases() - result.successes):
                tally.record(False, problems[i] if i < len(problems) else "not passed")
    finally:
        run = session.close()
        if run is not None:
            tally.add_run(run)


def _failed_line(e: AssertionError, code: str) -> str:
    """`assertion failed at line N: <the test line>` (+ the assertion's message), capped in size."""
    import traceback

    lines = code.splitlines()
    frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == "<tests>"]
    where = ""
    if frames and frames[-1].lineno and 0 < frames[-1].lineno <= len(lines):
        where = f" at line {frames[-1].lineno}: {lines[frames[-1].lineno - 1].strip()[:160]}"
    msg = str(e)[:100]
    return f"assertion failed{where}" + (f" ({msg})" if msg else "")


def _count_tests(code: str) -> int:
    return max(1, len(re.findall(r"^\s+def test\w*\s*\(", code, re.M)))


class CodeVerifier(Verifier):
    name = "code"
    version = "2"  # 2: numpy and sympy importable by default (option packages); the method kind; compare
    spec = VerifierSpec(needs=("tests",), output_range=(0.0, 1.0), deterministic=True, default_timeout=60.0,
                        description="runs the program in the sandbox against stdio/call/method/assert/unittest tests; "
                                    "score = fraction of tests passed")

    def time_budget(self, reference: Any, limits: Any = None, hosted: bool = True, **options: Any) -> float | None:
        # (+ the one-time import of the declared packages when this process's sandbox starts: within the 15 s)
        tests = parse_tests(reference)
        return tests.runs * (Limits.of(limits).wall_s + 2.0) + 15.0

    def verify(self, completion: str, reference: Any = None, limits: Any = None, hosted: bool = True,
               packages: Any = None, site: str | None = None, **options: Any) -> Verdict:
        if options:
            raise ValueError(f"code verifier: unknown option {next(iter(options))!r}; "
                             "valid: ['hosted', 'limits', 'packages', 'site', 'timeout']")
        if not isinstance(hosted, bool):
            raise ValueError(f"code verifier: option 'hosted' must be True or False, got {hosted!r}")
        if packages is not None and (isinstance(packages, str) or not isinstance(packages, (list, tuple))):
            raise ValueError(f"code verifier: option 'packages' must be a list of distribution names, got {packages!r}")
        lim = Limits.of(limits)
        try:
            tests = parse_tests(reference)
        except TestSpecError as e:
            return Verdict.masked_as(Status.ABSTAIN, str(e))
        if not isinstance(completion, str):
            raise TypeError(f"code verifier: completion must be a str, got {type(completion).__name__}")
        program = extract_program(completion)
        if not program.strip():
            return Verdict.unparseable(detail="no Python program in the completion")
        if tests.prelude:  # the judge's imports (method tests), before the program as LeetCode runs it
            program = tests.prelude.rstrip("\n") + "\n" + program
        tally = Tally()
        try:
            if tests.kind == "stdio":
                _run_stdio(sandbox(None if packages is None else tuple(packages), site), program, tests, lim, tally)
            else:
                _run_session(sandbox(None if packages is None else tuple(packages), site), program, tests, lim, tally, hosted)
        except SandboxError as e:
            return Verdict.masked_as(Status.ERROR, f"sandbox failure: {e}")
        except TestSpecError as e:  # the dataset's trusted helper code failed: not the candidate's doing
            return Verdict.masked_as(Status.ABSTAIN, str(e))
        metrics = {"tests_passed": tally.passed, "tests_total": tally.total, "sandbox_runs": tally.runs,
                   "sandbox_wall_s": tally.wall_s, "sandbox_cpu_s": tally.cpu_s,
                   "peak_memory_mb": tally.peak_memory_bytes / 2**20, "leftover_processes": tally.leftover}
        if tally.level is not None:  # which isolation the runs had (see SANDBOX_LEVELS), in every verdict
            metrics.update({"sandbox_level": SANDBOX_LEVELS[tally.level],
                            "sandbox_cgroup_limits": float(tally.limits_by != "rlimits"),
                            "sandbox_seccomp": float(tally.seccomp)})
        if tally.total == 0:
            return Verdict.masked_as(Status.ABSTAIN, "the tests define no test case")
        summary = f"{tally.passed}/{tally.total} tests passed"
        if tally.limit:
            summary += f"; {tally.limit} limit exceeded"
        if tally.passed == tally.total and not tally.limit:
            return Verdict(Status.CORRECT, 1.0, summary, metrics)
        detail = summary + ("; " + "; ".join(tally.failures) if tally.failures else "")
        passed = min(tally.passed, tally.total - 1)  # a limit hit after every test passed still is no pass
        return Verdict(Status.INCORRECT, passed / tally.total, detail, metrics)
