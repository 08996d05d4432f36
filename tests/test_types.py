"""The seam types: a masked verdict carries no score, a scored one always does."""
import math

import pytest

from reasoning_rl.types import Group, Pair, Sample, Status, Verdict

# (status, score, ok?) -- the masking rule, row by row
VERDICT_TABLE = [
    (Status.CORRECT, 1.0, True),
    (Status.INCORRECT, 0.0, True),
    (Status.UNPARSEABLE, 0.0, True),  # the model's fault: scored
    (Status.CORRECT, None, False),  # a scored status needs a number
    (Status.INCORRECT, float("nan"), False),  # and a finite one
    (Status.CORRECT, True, False),  # bool is not a score
    (Status.ABSTAIN, None, True),
    (Status.TIMEOUT, None, True),
    (Status.ERROR, None, True),
    (Status.TIMEOUT, 0.0, False),  # a timeout must never carry 0.0
    (Status.ERROR, 0.0, False),
    (Status.ABSTAIN, 1.0, False),
]


@pytest.mark.parametrize("status,score,ok", VERDICT_TABLE)
def test_verdict_status_and_score_agree(status, score, ok):
    if ok:
        v = Verdict(status, score)
        assert v.masked == (score is None)
        assert v.passed == (None if score is None else status is Status.CORRECT)
    else:
        with pytest.raises(ValueError):
            Verdict(status, score)


def test_verdict_is_frozen_and_accepts_status_strings():
    v = Verdict("correct", 1)
    assert v.status is Status.CORRECT and v.score == 1.0 and isinstance(v.score, float)
    with pytest.raises(AttributeError):
        v.score = 0.0  # type: ignore[misc]
    with pytest.raises(ValueError, match="unknown status 'right'"):
        Verdict("right", 1.0)


def _s(*statuses):
    verdicts = {
        "c": Verdict.correct(), "i": Verdict.incorrect(), "u": Verdict.unparseable(),
        "t": Verdict.masked_as(Status.TIMEOUT), "e": Verdict.masked_as(Status.ERROR),
    }
    return tuple(Sample(text=str(k), verdicts={"math": verdicts[x]}) for k, x in enumerate(statuses))


# (outcomes under "math", mixed?) -- masked samples never make a group mixed
MIXED_TABLE = [
    ("ci", True),
    ("cu", True),  # unparseable is a fail
    ("cc", False),
    ("ii", False),
    ("ct", False),  # one pass + one timeout: only one scored sample
    ("ite", False),
    ("tte", False),
    ("cite", True),
]


@pytest.mark.parametrize("code,mixed", MIXED_TABLE)
def test_group_mixed_ignores_masked(code, mixed):
    g = Group("p0", "1+1=", {"answer": "2"}, _s(*code))
    assert g.is_mixed("math") is mixed


def test_sample_checks_logprob_length_and_finish_reason():
    with pytest.raises(ValueError, match="logprobs"):
        Sample("x", token_ids=(1, 2), logprobs=(-0.1,))
    with pytest.raises(ValueError, match="finish_reason"):
        Sample("x", finish_reason="eos")
    s = Sample("x", (1,), (-0.5,), "length")
    assert s.truncated and s.outcome("math") is None
    s2 = s.with_verdicts({"math": Verdict.correct()})
    assert s2.outcome("math") is True and s.verdicts == {}  # original untouched


def test_pair_refuses_identical_texts():
    with pytest.raises(ValueError):
        Pair("q", "a", "a")
    assert Pair("q", "a", "b").chosen == "a"


def test_masked_as_refuses_scored_status():
    with pytest.raises(ValueError):
        Verdict.masked_as(Status.CORRECT)
    assert math.isclose(Verdict.correct(0.5).score, 0.5)


def test_a_samples_loss_mask_has_one_form_and_is_checked():
    assert Sample("x", (1, 2, 3), (-0.1,) * 3).loss_mask == (1, 1, 1)  # given empty: every token is trained on
    assert Sample("x", (1, 2, 3), (-0.1,) * 3, loss_mask=(1, 0, 1)).loss_mask == (1, 0, 1)
    with pytest.raises(ValueError, match="loss_mask"):
        Sample("x", (1, 2), loss_mask=(1,))
    with pytest.raises(ValueError, match="loss_mask"):
        Sample("x", (1, 2), loss_mask=(1, 2))


def test_a_turn_round_trips_through_its_archive_form_and_a_samples_dict_turns_become_turns():
    from reasoning_rl.types import Turn

    answered = Turn("```python\nprint(6*7)\n```", (5, 6, 7), 0.25, call="print(6*7)", observation="42\n", tool_s=0.1)
    last = Turn("so 42", (8, 9), 0.1, template_mismatch=3)
    failed = Turn("```python\nx\n```", (4,), call="x", error="sandbox died")
    for t in (answered, last, failed):
        assert Turn.from_dict(t.to_dict()) == t
    assert answered.to_dict()["tokens"] == 3 and "observation" not in last.to_dict()
    # an older archive's turn: a dict with a token count and no ids
    s = Sample("so 4", (1, 2), turns=({"model": "so 4", "tokens": 2, "generate_s": 0.5},))
    assert s.turns == (Turn("so 4", (), 0.5),) and isinstance(s.turns[0], Turn)
    with pytest.raises(ValueError, match="unknown keys \\['tool'\\]"):
        Turn.from_dict({"model": "x", "tool": "y"})
