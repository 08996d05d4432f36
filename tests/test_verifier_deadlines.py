"""A verifier that hangs inside its parser gives TIMEOUT (masked, never 0), under the pool's per-call wall clock,
and the pool stays usable after it. The pathological input is a tower of powers: math-verify's sympy evaluation of
9^(9^(9^9)) runs for minutes (more than 60 s measured on this project's CPU machine), which is how its own parser
hangs when no deadline reaches it (its `signal.alarm` timeouts are off inside our workers, which run off the main
thread in Ray actors)."""
from __future__ import annotations

import time

import pytest

import verifiers
from reasoning_rl.types import Status

TOWER = "The answer is $\\boxed{9^{9^{9^{9}}}}$."


@pytest.fixture(scope="module")
def pool():
    with verifiers.VerifierPool(num_workers=1, timeout=3.0) as p:
        yield p


def test_math_verify_hanging_in_its_parser_is_a_masked_timeout_and_the_next_call_is_judged(pool):
    t0 = time.monotonic()
    v = pool.verify("math_verify", TOWER, "7")
    assert v.status is Status.TIMEOUT and v.masked and v.score is None, v  # masked: never scored as 0
    assert time.monotonic() - t0 < 30  # bounded by the deadline (3 s), not by the parser (minutes)
    ok = pool.verify("math_verify", "so the answer is $\\frac{1}{2}$", "0.5")
    assert ok.status is Status.CORRECT, ok  # the worker that hung was replaced


def test_the_second_opinion_sees_the_timeout_as_masked_in_a_batch(pool):
    out = pool.verify_batch("math_verify", [TOWER, "#### 7", "#### 8"], ["7", "7", "7"])
    assert [v.status for v in out] == [Status.TIMEOUT, Status.CORRECT, Status.INCORRECT]


def test_our_math_verifier_reads_the_same_input_without_hanging(pool):
    t0 = time.monotonic()
    v = pool.verify("math", TOWER, "7")
    assert not v.masked, v  # a judgement (the tower is not 7), within the deadline
    assert v.status in (Status.INCORRECT, Status.UNPARSEABLE) and time.monotonic() - t0 < 3
