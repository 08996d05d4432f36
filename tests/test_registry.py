import pytest

from reasoning_rl.registry import DuplicateNameError, Registry, UnknownNameError


def test_duplicate_names_are_refused_and_name_the_first_source():
    reg: Registry[int] = Registry("thing")
    reg.add("a", 1, source="pkg-one")
    with pytest.raises(DuplicateNameError, match="pkg-one"):
        reg.add("a", 2, source="pkg-two")
    assert reg.get("a") == 1


def test_unknown_name_lists_the_valid_ones():
    reg: Registry[int] = Registry("advantage estimator")

    @reg.register("grpo")
    def _g():
        return 0

    reg.add("rloo", 3)
    with pytest.raises(UnknownNameError) as e:
        reg.get("gpro")
    assert str(e.value) == "unknown advantage estimator 'gpro'; valid: grpo, rloo"
    assert reg.names() == ["grpo", "rloo"] and "grpo" in reg and len(reg) == 2


def test_empty_name_refused():
    with pytest.raises(ValueError):
        Registry("x").add("", 1)
