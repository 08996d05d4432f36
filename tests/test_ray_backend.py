"""The verifier runtime on a local Ray cluster of 2 worker actors: the same verdicts as the
in-process pool, TIMEOUT from a hanging verifier included."""
import importlib.util
import time

import pytest

import verifiers
from reasoning_rl.types import Status

pytestmark = [pytest.mark.slow,  # each test starts a local Ray cluster (over 5 s) before its first actor
              pytest.mark.timeout(300),
              pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="the `ray` extra is not installed")]


def calls():
    math = [("math", "the answer is 42", "42"), ("math", "so 41", "42"), ("math", "\\frac{1}{2}", "0.5"),
            ("exact", "abc", "abc"), ("exact", "", "x"), ("math", "7", None)]
    # generous deadlines for the normal calls (a loaded CI machine), a short one for the hanging verifier
    return [verifiers.Call(n, c, r, {"timeout": 60.0}) for n, c, r in math] + [
        verifiers.Call("sleepy", "0.1", None, {"timeout": 60.0}), verifiers.Call("sleepy", "30", None, {"timeout": 2.0})]


def test_ray_pool_gives_the_same_verdicts_as_the_process_pool():
    from tests.helpers.slow_verifier import Sleepy
    from verifiers.registry import REGISTRY

    verifiers.register(Sleepy())
    try:
        with verifiers.VerifierPool(num_workers=2, cache_size=0) as local:
            expected = local.run(calls())
        ray_pool = verifiers.VerifierPool(num_workers=2, cache_size=0, backend="ray")
        try:
            got = ray_pool.run(calls())
            assert ray_pool.workers_replaced == 1  # the hung actor was killed and replaced
            again = ray_pool.run(calls()[:2])  # the replacement works
        finally:
            ray_pool.close()
    finally:
        REGISTRY.remove("sleepy")
    assert [(v.status, v.score, v.detail) for v in got[:-1]] == [(v.status, v.score, v.detail) for v in expected[:-1]]
    assert got[-1].status is Status.TIMEOUT and expected[-1].status is Status.TIMEOUT and got[-1].score is None
    assert [v.status for v in again] == [Status.CORRECT, Status.INCORRECT]


def test_a_timeout_inside_a_batch_costs_only_its_own_call():
    """One actor gets the calls in batches; the hanging call's batch-mates are sent again and answered."""
    from tests.helpers.slow_verifier import Sleepy
    from verifiers.registry import REGISTRY

    ok = [verifiers.Call("math", f"the answer is {k}", str(k), {"timeout": 60.0}) for k in range(11)]
    hang = verifiers.Call("sleepy", "30", None, {"timeout": 2.0})
    verifiers.register(Sleepy())
    try:
        pool = verifiers.VerifierPool(num_workers=1, cache_size=0, backend="ray")
        try:
            got = pool.run(ok[:3] + [hang] + ok[3:])  # 12 calls, one actor: batches of 6, the hang is 4th
            assert pool.workers_replaced == 1
        finally:
            pool.close()
    finally:
        REGISTRY.remove("sleepy")
    assert got[3].status is Status.TIMEOUT and got[3].score is None
    assert [v.status for v in got[:3] + got[4:]] == [Status.CORRECT] * 11


def test_an_actor_killed_while_idle_is_replaced_before_the_next_batch():
    """An actor that died between batches is found by its closed socket and replaced before anything is sent
    to it: the next batch is answered in full, not with ERROR for the calls that would have reached it."""
    import ray

    from tests.test_pool_fuzz import _ended

    pool = verifiers.VerifierPool(num_workers=2, cache_size=0, backend="ray")
    try:
        first = pool.run(calls()[:6])
        victim = pool._workers[0]
        pid = ray.get(victim.actor.pid.remote(), timeout=30)
        ray.kill(victim.actor, no_restart=True)
        for _ in range(3000):  # ray.kill is asynchronous
            if _ended(pid) and not victim.alive():
                break
            time.sleep(0.01)
        assert not victim.alive()
        again = pool.run(calls()[:6])
        assert pool.workers_replaced == 1 and victim not in pool._workers
    finally:
        pool.close()
    assert [(v.status, v.score, v.detail) for v in again] == [(v.status, v.score, v.detail) for v in first]
    assert Status.ERROR not in {v.status for v in first}
