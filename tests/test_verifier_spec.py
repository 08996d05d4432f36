"""Spec validation for verifiers, built-in and plugin alike."""
import pytest

import verifiers
from verifiers import SpecError, Status, Verdict, Verifier, VerifierSpec, check_verdict, check_verifier

# (spec kwargs, fragment of the error) -- malformed declarations
BAD_SPECS = [
    (dict(needs=("refrence",)), "unknown item 'refrence'"),
    (dict(needs="reference"), "tuple of strings"),
    (dict(output_range=(1.0, 0.0)), "low must be below high"),
    (dict(output_range=(0.0, float("inf"))), "finite"),
    (dict(deterministic="yes"), "deterministic must be a bool"),
    (dict(default_timeout=0), "default_timeout"),
    (dict(default_timeout=1e9), "default_timeout"),
]


@pytest.mark.parametrize("kwargs,fragment", BAD_SPECS)
def test_bad_specs_are_refused(kwargs, fragment):
    class V(Verifier):
        name, version = "v", "1"
        spec = VerifierSpec(**kwargs)

        def verify(self, completion, reference=None, **o):
            return Verdict.correct()

    with pytest.raises(SpecError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        check_verifier(V())


def test_bad_names_and_versions():
    class V(Verifier):
        name, version = "has space", "1"

    with pytest.raises(SpecError, match="name"):
        check_verifier(V())
    V.name, V.version = "ok", ""
    with pytest.raises(SpecError, match="version"):
        check_verifier(V())


def test_score_outside_declared_range_is_refused():
    class V(Verifier):
        name, version = "v", "1"
        spec = VerifierSpec(output_range=(0.0, 1.0))

    with pytest.raises(SpecError, match="outside"):
        check_verdict(V(), Verdict.correct(2.0))
    with pytest.raises(SpecError, match="not a Verdict"):
        check_verdict(V(), 1.0)
    assert check_verdict(V(), Verdict.masked_as(Status.TIMEOUT)).score is None


# (completion, reference, status) -- the built-in `exact` verifier
EXACT = [
    ("42", "42", Status.CORRECT),
    ("work\n 42 \n", "42", Status.CORRECT),  # last non-empty line, stripped
    ("42\nno wait 41", "42", Status.INCORRECT),
    ("", "42", Status.UNPARSEABLE),
    ("   \n", "42", Status.UNPARSEABLE),
    ("42", None, Status.ABSTAIN),  # no reference: masked, not wrong
    ("42", "  ", Status.ABSTAIN),
]


@pytest.mark.parametrize("completion,reference,status", EXACT)
def test_exact_verifier(completion, reference, status):
    v = verifiers.get("exact")
    assert v.verify(completion, reference).status is status


def test_registering_a_taken_name_is_refused():
    with pytest.raises(ValueError, match="already registered"):
        verifiers.register(verifiers.get("exact"))
