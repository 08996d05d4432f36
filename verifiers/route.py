"""`route`: the outcome verifier of mixed data, where each row names its own verifier (verl's `data_source`).

The reference is `{"verifier": NAME, "reference": REF, "options": {...}}`; the call is passed to that
verifier unchanged (its own options first, then the call's), and its verdict comes back as it is, the
detail prefixed with the name. One reward, one outcome and one curriculum can then serve math and code
rows together. The time budget is the named verifier's for that reference.

Not here: deciding which verifier a row needs (reasoning_rl/task/task.py maps a column's values to names).
A malformed routing reference is ABSTAIN (the dataset's fault), never a score.
"""
from __future__ import annotations

from typing import Any, Callable

from reasoning_rl.types import Status, Verdict

from .base import Verifier, VerifierSpec, check_verdict


def _target(reference: Any) -> tuple[str, Any, dict] | None:
    if not isinstance(reference, dict) or not isinstance(reference.get("verifier"), str):
        return None
    options = reference.get("options") or {}
    return (reference["verifier"], reference.get("reference"), dict(options)) if isinstance(options, dict) else None


class Route(Verifier):
    """`lookup(name) -> Verifier` is the registry's `get` (given by the registry, which lists this verifier)."""
    name = "route"
    version = "1"
    spec = VerifierSpec(needs=("reference", "prompt"), output_range=(-1.0, 1.0), deterministic=True,
                        default_timeout=30.0, description="passes each call to the verifier its reference names "
                                                          "(mixed data: verl's data_source)")

    def __init__(self, lookup: Callable[[str], Verifier]) -> None:
        self.lookup = lookup

    def verify(self, completion: str, reference: Any = None, **options: Any) -> Verdict:
        target = _target(reference)
        if target is None:
            return Verdict.masked_as(Status.ABSTAIN, f"route: reference is not {{verifier, reference}}: "
                                                     f"{str(reference)[:80]!r}")
        name, ref, own = target
        inner = self.lookup(name)
        if name == self.name:
            return Verdict.masked_as(Status.ABSTAIN, "route: a reference may not route to route")
        if "prompt" not in inner.spec.needs and name != "math":
            options.pop("prompt", None)  # only verifiers that read the prompt get it (as Reward does)
        v = check_verdict(inner, inner.verify(completion, ref, **{**own, **options}))
        return Verdict(v.status, v.score, f"[{name}] {v.detail}", v.metrics)

    def time_budget(self, reference: Any, **options: Any) -> float | None:
        target = _target(reference)
        if target is None:
            return None
        inner = self.lookup(target[0])
        return inner.time_budget(target[1], **target[2]) or inner.spec.default_timeout

    def answer_key(self, completion: str) -> str | None:
        return completion.strip()
