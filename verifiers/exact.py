"""`exact`: the completion's final line equals the reference, after stripping whitespace.

The simplest outcome verifier, useful for tasks whose answers are canonical strings.
An empty completion is UNPARSEABLE (scored 0: the model's failure); a missing reference
is ABSTAIN (masked: the verifier does not apply). For math answers use `math`.
"""
from __future__ import annotations

from typing import Any

from reasoning_rl.types import Status, Verdict

from .base import Verifier, VerifierSpec


class ExactMatch(Verifier):
    name = "exact"
    version = "1"
    spec = VerifierSpec(needs=("reference",), output_range=(0.0, 1.0), deterministic=True, default_timeout=1.0,
                        description="final line of the completion equals the reference (whitespace-stripped)")

    def verify(self, completion: str, reference: Any = None, **options: Any) -> Verdict:
        if reference is None or not str(reference).strip():
            return Verdict.masked_as(Status.ABSTAIN, "no reference")
        lines = [ln.strip() for ln in str(completion).strip().splitlines() if ln.strip()]
        if not lines:
            return Verdict.unparseable(detail="empty completion")
        got, want = lines[-1], str(reference).strip()
        if got == want:
            return Verdict.correct(detail=f"{got!r} == reference")
        return Verdict.incorrect(detail=f"{got[:80]!r} != {want[:80]!r}")
