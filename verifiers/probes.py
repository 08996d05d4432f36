"""Adversarial probes: inputs that must never score as correct, nor take longer than their budget.

`run_probes(name)` feeds each probe to a verifier through the runtime (worker, wall-clock
kill) and reports, per probe, the verdict and the time. A probe fails if its verdict is
CORRECT, if it was killed at its budget (TIMEOUT), or if the verifier crashed on it (ERROR):
a reward that can be gamed, stalls training or masks what it cannot handle is a bug to fix,
not a case to mask (a verifier that errs on every probe must not read "all probes passed"). `reasoning-rl verifiers probe NAME`
prints the table and exits non-zero on any failure. Standard library only.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

from reasoning_rl.types import Status

from .runtime import Call, VerifierPool


@dataclass(frozen=True)
class Probe:
    name: str
    completion: str
    reference: str = "7"


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
        return self.status in (Status.CORRECT, Status.TIMEOUT, Status.ERROR)


def run_probes(verifier: str, budget: float = 5.0, pool: VerifierPool | None = None) -> list[ProbeResult]:
    own = pool is None
    pool = pool or VerifierPool(num_workers=2)
    try:
        out = []
        for p in PROBES:
            t0 = time.monotonic()
            v = pool.run([Call(verifier, p.completion, p.reference,
                               {"timeout": budget, "prompt": "Question: what is 3+4? Options: 7, 8."})])[0]
            out.append(ProbeResult(p, v.status, time.monotonic() - t0, v.detail))
        return out
    finally:
        if own:
            pool.close()
