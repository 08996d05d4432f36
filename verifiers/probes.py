"""Adversarial probes: inputs that must never score as correct, nor take longer than their budget.

`run_probes(name)` feeds each probe to a verifier through the runtime (worker, wall-clock
kill) and reports, per probe, the verdict and the time. A probe fails if its verdict is
CORRECT, if it was killed at its budget (TIMEOUT), or if the verifier crashed on it (ERROR):
a reward that can be gamed, stalls training or masks what it cannot handle is a bug to fix,
not a case to mask (a verifier that errs on every probe must not read "all probes passed").

Two classes: `PROBES` (answers: hedges, huge expressions, spoofed tags; for verifiers that take
a reference answer) and `CODE_PROBES` (programs, for verifiers that take tests). The code probes
are *masking escapes*: a wrong program that tries to turn its own failure into a masked verdict
(TIMEOUT, ERROR, ABSTAIN: not scored, where it should score 0) by shadowing what the tests read,
crashing the interpreter, exiting, running out a limit or returning something unreadable. Such a
probe fails on CORRECT and on any masked status. `reasoning-rl verifiers probe NAME`
prints the table and exits non-zero on any failure. Standard library only.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from reasoning_rl.types import MASKED, Status

from .registry import get
from .runtime import Call, VerifierPool


@dataclass(frozen=True)
class Probe:
    name: str
    completion: str
    reference: Any = "7"
    kind: str = "hack"  # "hack": must not pass, overrun or crash; "masking": must not be masked either


PROBES = [
    Probe("empty", ""),
    Probe("whitespace", " \n\t "),
    Probe("empty box", "\\boxed{}"),
    Probe("empty answer tags", "<think>hmm</think><answer></answer>"),
    Probe("enumeration", "The answer is 6 or 7 or 8"),
    Probe("enumeration in a box", "\\boxed{6 \\text{ or } 7}"),
    Probe("several boxes", "\\boxed{6} \\boxed{7} \\boxed{8}"),
    Probe("all digits", "\\boxed{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}"),
    Probe("spoofed answer tag", "<think>x</think><answer>6<answer>7</answer></answer>"),
    Probe("answer in the prompt echo", "Question: what is 3+4? Options: 7, 8. I will not say."),
    Probe("huge power tower", "\\boxed{10^{10^{10^{10}}}}"),
    Probe("huge factorial", "\\boxed{(10^{100})!}"),
    Probe("e tower", "\\boxed{e^{e^{e^{e^{e}}}}}"),
    Probe("deeply nested frac", "\\boxed{" + "\\frac{1}{" * 500 + "7" + "}" * 500 + "}", reference="5"),
    Probe("deep parentheses", "\\boxed{" + "(" * 3000 + "6" + ")" * 3000 + "}"),
    Probe("1 MB of digits", "8" * 1_000_000),
    Probe("1 MB of prose", "the answer is " + "a " * 500_000),
    Probe("1 MB then a wrong box", "x" * 1_000_000 + "\\boxed{6}"),
    Probe("code injection", "\\boxed{__import__('os').system('true')}"),
    Probe("unicode confusables", "\\boxed{７}", reference="8"),
    Probe("near miss decimal", "\\boxed{7.0001}"),
    Probe("variable named like the answer", "\\boxed{x}", reference="7"),
]


@dataclass(frozen=True)
class ProbeResult:
    probe: Probe
    status: Status
    seconds: float
    detail: str

    @property
    def failed(self) -> bool:
        if self.probe.kind == "masking":
            return self.status is Status.CORRECT or self.status in MASKED
        return self.status in (Status.CORRECT, Status.TIMEOUT, Status.ERROR)


_ADD = {"kind": "assert", "entry_point": "add", "code": "def check(candidate):\n    assert candidate(1, 2) == 3\n"}
_ADD_UNITTEST = {"kind": "unittest", "code": "class T(unittest.TestCase):\n"
                                            "    def test_add(self):\n        self.assertEqual(add(1, 2), 3)\n"}
_LOAD_TIME = {"kind": "unittest", "code": "X = add(1, 2)\nclass T(unittest.TestCase):\n"
                                         "    def test_x(self):\n        self.assertEqual(X, 3)\n"}
# limits that end a runaway program well inside the probe's budget
PROBE_LIMITS = {"wall_s": 1.0, "cpu_s": 1.0, "memory_mb": 256, "processes": 16, "output_bytes": 1 << 20}

CODE_PROBES = [
    Probe("shadow a builtin the tests call", "def add(a, b):\n    return 0\ndef abs(x):\n    return 3\n", _ADD, "masking"),
    Probe("define unittest", "unittest = None\ndef add(a, b):\n    return 0\n", _ADD_UNITTEST, "masking"),
    Probe("raise while the tests load", "def add(a, b):\n    raise ValueError('no')\n", _LOAD_TIME, "masking"),
    Probe("SystemExit at import", "raise SystemExit(0)\n", _ADD, "masking"),
    Probe("os._exit(0) at import", "import os\nos._exit(0)\n", _ADD, "masking"),
    Probe("crash the interpreter", "import ctypes\nctypes.string_at(0)\n", _ADD, "masking"),
    Probe("KeyboardInterrupt in the call", "def add(a, b):\n    raise KeyboardInterrupt\n", _ADD, "masking"),
    Probe("SystemExit in the call", "def add(a, b):\n    raise SystemExit(0)\n", _ADD, "masking"),
    Probe("a BaseException of its own", "class E(BaseException):\n    pass\ndef add(a, b):\n    raise E()\n", _ADD,
          "masking"),
    Probe("return a function", "def add(a, b):\n    return lambda: 3\n", _ADD, "masking"),
    Probe("return a forged equal", "class A:\n    def __eq__(s, o):\n        return True\n"
                                   "def add(a, b):\n    return A()\n", _ADD, "masking"),
    Probe("infinite loop in the call", "def add(a, b):\n    while True:\n        pass\n", _ADD, "masking"),
    Probe("memory bomb in the call", "def add(a, b):\n    return len(bytearray(8 << 30))\n", _ADD, "masking"),
    Probe("flood stdout", "import sys\nsys.stdout.write('x' * (64 << 20))\ndef add(a, b):\n    return 0\n", _ADD,
          "masking"),
    Probe("no program at all", "I cannot write this function.", _ADD, "masking"),
]


def probes_for(verifier) -> list[Probe]:
    """The probes that fit a verifier: programs for one that takes tests, answers for the others."""
    return CODE_PROBES if "tests" in verifier.spec.needs else PROBES


def probe_options(verifier, budget: float) -> dict:
    """Options for a probe call: only those the verifier takes."""
    opts: dict = {"timeout": budget}
    if "prompt" in verifier.spec.needs:
        opts["prompt"] = "Question: what is 3+4? Options: 7, 8."
    if "tests" in verifier.spec.needs:
        opts["limits"] = PROBE_LIMITS
    return opts


def run_probes(verifier: str, budget: float = 5.0, pool: VerifierPool | None = None) -> list[ProbeResult]:
    v = get(verifier)
    own = pool is None
    pool = pool or VerifierPool(num_workers=2)
    try:
        out = []
        for p in probes_for(v):
            t0 = time.monotonic()
            verdict = pool.run([Call(verifier, p.completion, p.reference, probe_options(v, budget))])[0]
            out.append(ProbeResult(p, verdict.status, time.monotonic() - t0, verdict.detail))
        return out
    finally:
        if own:
            pool.close()
