"""What a verifier is: a name, a version, a declared spec, and `verify(...) -> Verdict`.

The spec says what the verifier needs (a reference answer, tests, a judge endpoint),
the range its scores fall in, whether it is deterministic, and its default time budget.
`check_verifier` validates all of that, for built-ins and plugins alike, so a plugin
with a malformed spec is refused at load time with a message that says what is wrong,
instead of failing mid-training.

Never imports torch. A verifier returns a `Verdict`; it never returns a bare number and
never maps its own exception to 0.0 (the runtime turns a crash into ERROR, masked).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

from reasoning_rl.types import Verdict

NEEDS = frozenset({"reference", "tests", "judge", "prompt"})


class SpecError(ValueError):
    """A verifier (or plugin) whose declaration is malformed."""


@dataclass(frozen=True)
class VerifierSpec:
    needs: tuple[str, ...] = ("reference",)
    output_range: tuple[float, float] = (0.0, 1.0)
    deterministic: bool = True
    default_timeout: float = 5.0
    description: str = ""

    def check(self) -> None:
        if not isinstance(self.needs, tuple) or not all(isinstance(n, str) for n in self.needs):
            raise SpecError(f"spec.needs must be a tuple of strings, got {self.needs!r}")
        bad = [n for n in self.needs if n not in NEEDS]
        if bad:
            raise SpecError(f"spec.needs has unknown item {bad[0]!r}; valid: {sorted(NEEDS)}")
        r = self.output_range
        if (not isinstance(r, tuple) or len(r) != 2
                or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in r)):
            raise SpecError(f"spec.output_range must be a (low, high) pair of finite numbers, got {r!r}")
        if not r[0] < r[1]:
            raise SpecError(f"spec.output_range low must be below high, got {r!r}")
        if not isinstance(self.deterministic, bool):
            raise SpecError(f"spec.deterministic must be a bool, got {self.deterministic!r}")
        t = self.default_timeout
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not (0 < t <= 3600):
            raise SpecError(f"spec.default_timeout must be seconds in (0, 3600], got {t!r}")


class Verifier:
    """Base class for verifiers. Subclasses set `name`, `version`, `spec` and implement `verify`."""

    name: str = ""
    version: str = ""
    spec: VerifierSpec = VerifierSpec()
    # the reward passes the prompt (option `prompt`) to a verifier that needs it (spec.needs) or reads it to tell an
    # answer from a restatement of the question (`math`, `math_verify`)
    reads_prompt: bool = False
    # the reward tells a verifier that reads it (option `truncated`) when the completion was cut at its token limit:
    # `math` then reads only an answer the text states, never one a fallback reads into it
    reads_truncation: bool = False

    def verify(self, completion: str, reference: Any = None, **options: Any) -> Verdict:
        raise NotImplementedError

    def verify_batch(self, completions: Sequence[str], references: Sequence[Any], **options: Any) -> list[Verdict]:
        if len(completions) != len(references):
            raise ValueError(f"verify_batch: {len(completions)} completions but {len(references)} references")
        return [self.verify(c, r, **options) for c, r in zip(completions, references)]

    def time_budget(self, reference: Any, **options: Any) -> float | None:
        """Seconds the runtime should allow this call (None: `spec.default_timeout`). Verifiers whose
        cost depends on the reference (e.g. `code`: one sandbox run per test case) override it."""
        return None

    def config_key(self) -> str:
        """What, besides name and version, changes this verifier's verdicts (for the cache key)."""
        return ""


def wants_prompt(verifier: Any) -> bool:
    """Is a verifier called with the prompt (option `prompt`)? When it reads it (`reads_prompt`) or needs it (spec).
    A plugin that does not subclass Verifier has no `reads_prompt`: only its spec decides."""
    return bool(getattr(verifier, "reads_prompt", False)) or "prompt" in verifier.spec.needs


def wants_truncation(verifier: Any) -> bool:
    """Is a verifier told (option `truncated=True`) that a completion was cut at its token limit?"""
    return bool(getattr(verifier, "reads_truncation", False))


def check_verifier(obj: Any) -> Verifier:
    """Validate a verifier object's declaration; raise SpecError naming what is wrong."""
    name = getattr(obj, "name", None)
    if not isinstance(name, str) or not name.strip() or any(c.isspace() for c in name):
        raise SpecError(f"verifier name must be a non-empty string without spaces, got {name!r}")
    version = getattr(obj, "version", None)
    if not isinstance(version, str) or not version.strip():
        raise SpecError(f"verifier {name!r}: version must be a non-empty string, got {version!r}")
    spec = getattr(obj, "spec", None)
    if not isinstance(spec, VerifierSpec):
        raise SpecError(f"verifier {name!r}: spec must be a verifiers.VerifierSpec, got {type(spec).__name__}")
    spec.check()
    if not callable(getattr(obj, "verify", None)):
        raise SpecError(f"verifier {name!r}: has no callable verify()")
    if not callable(getattr(obj, "verify_batch", None)):
        raise SpecError(f"verifier {name!r}: has no callable verify_batch() (subclass verifiers.Verifier)")
    return obj


def check_verdict(verifier: Verifier, verdict: Any) -> Verdict:
    """A verifier's return value must be a Verdict whose score lies in its declared range."""
    if not isinstance(verdict, Verdict):
        raise SpecError(f"verifier {verifier.name!r} returned {type(verdict).__name__}, not a Verdict")
    if verdict.score is not None:
        lo, hi = verifier.spec.output_range
        if not lo <= verdict.score <= hi:
            raise SpecError(f"verifier {verifier.name!r} returned score {verdict.score} outside its "
                            f"declared range {verifier.spec.output_range}")
    return verdict
