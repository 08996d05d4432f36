"""`math_verify`: Hugging Face's math-verify as a registered verifier (a reward term or a second opinion).

    verifiers.verify("math_verify", completion="... so the answer is $\\frac{1}{2}$", reference="0.5")

math-verify extracts the answer from the completion (LaTeX and plain expressions, `\\boxed{}` first)
and compares it with the parsed reference by sympy. Its own timeouts are `signal.alarm`, which fails
off the main thread (a Ray actor, a thread pool) and would race our worker's deadline; here they are
switched off (`parsing_timeout=None`, `timeout_seconds=None`) and the runtime's per-call wall clock,
which kills the worker process, bounds every call instead, from any thread.

Statuses: equal -> CORRECT (1.0); not equal -> INCORRECT (0.0); nothing extracted from the
completion -> UNPARSEABLE (0.0); a reference math-verify cannot parse -> ABSTAIN (masked: the
verifier does not apply). The detail names what each side parsed to.

Not here: our own extraction rules (that is the `math` verifier); this one is math-verify as it is.
"""
from __future__ import annotations

import logging
from typing import Any

from reasoning_rl.types import Status, Verdict

from .base import Verifier, VerifierSpec


def _quiet() -> None:
    # math-verify warns on every call made with its timeouts switched off; ours bound the call instead
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    for name in list(logging.root.manager.loggerDict):
        if name.startswith("math_verify"):
            logging.getLogger(name).setLevel(logging.ERROR)


class MathVerifyVerifier(Verifier):
    name = "math_verify"
    version = "1"
    spec = VerifierSpec(needs=("reference",), output_range=(0.0, 1.0), deterministic=True, default_timeout=10.0,
                        description="Hugging Face math-verify's extraction and sympy comparison (its signal "
                                    "timeouts off; the runtime's wall clock bounds each call)")

    def verify(self, completion: str, reference: Any = None, **options: Any) -> Verdict:
        if options:
            raise ValueError(f"math_verify: unknown option {next(iter(options))!r}; valid: ['timeout']")
        from math_verify import parse, verify

        _quiet()
        if reference is None or not str(reference).strip():
            return Verdict.masked_as(Status.ABSTAIN, "no reference answer")
        ref = str(reference).strip()
        gold = parse(ref, parsing_timeout=None) or parse(f"${ref}$", parsing_timeout=None)
        if not gold:
            return Verdict.masked_as(Status.ABSTAIN, f"math-verify cannot parse the reference {ref[:80]!r}")
        pred = parse(str(completion), parsing_timeout=None)
        if not pred:
            return Verdict.unparseable(detail="math-verify extracted no answer")
        shown = f"{str(pred[-1])[:80]!r} vs {str(gold[-1])[:80]!r}"
        if verify(gold, pred, timeout_seconds=None):
            return Verdict.correct(detail=f"{shown}: equal")
        return Verdict.incorrect(detail=f"{shown}: not equal")
