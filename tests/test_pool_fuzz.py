"""Fuzz the verifier pool: a verdict never belongs to another call.

A Hypothesis state machine drives one pool through random sequences of valid batches, calls with
invalid options (a bad `timeout`, an unknown verifier), short deadlines on a hanging call, workers
SIGKILLed mid-batch, Ctrl-C (KeyboardInterrupt) mid-batch, and repeated calls that hit the cache.
Every verdict the pool returns is compared with the one computed for the same call in a fresh
process (`EXPECTED`, built once by a subprocess that runs the workers' own `handle_call`):

- a call in a batch nobody disturbed gets exactly the fresh verdict (status, score, detail);
- a call whose worker was killed under it may instead be ERROR (masked, score None), never
  another scored verdict;
- a batch refused for a bad option raises ValueError/KeyError before anything is sent, and the
  next batch is exact;
- an interrupted batch raises KeyboardInterrupt (or finishes first), and the next batch is exact.

The same machine runs on the Ray backend with fewer steps (slow). The counts of calls checked are
asserted (at least 400 for the process pool in the fast suite, 2,500 in the slow run's 100 sequences, which draw
new random sequences each time) so the test cannot pass by running nothing. The floors are about half
the usual counts: how many calls a sequence checks depends on timing (a kill or an interrupt cuts a
batch short) even when the sequences are derandomized, and on the draw in the slow run (one CI run
checked 8,995 calls in 200 sequences, another over 10,000: the
slow run was cut to 100 sequences when the whole CI run came close to its hour).
"""
import _thread
import contextlib
import importlib.util
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from multiprocessing.connection import wait

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule, run_state_machine_as_test

import verifiers
from reasoning_rl.types import MASKED, Status
from tests.conftest import ROOT
from tests.helpers.fuzz_verifier import Graded
from verifiers import Call, VerifierPool

# (verifier, completion, reference): fast deterministic built-ins and the sleeping test verifier
UNIVERSE = [
    ("exact", "7", "7"), ("exact", "7", "8"), ("exact", " 42 ", "42"), ("exact", "abc", "abc"),
    ("math", "the answer is 42", "42"), ("math", "so 41", "42"), ("math", "\\frac{1}{2}", "0.5"),
    ("math", "3", "4"), ("math", "\\boxed{2}", "2"), ("math", "7", None),
] + [("fuzz_graded", f"{ms}:{text}", ref) for ms in (0, 1, 4) for text in ("a", "bb", "ccc", "dddd")
     for ref in ("a", "ccc")] + [("fuzz_graded", "raise", "a")]

FRESH = """
import json, sys
sys.path.insert(0, {root!r})
import verifiers
from tests.helpers.fuzz_verifier import Graded
from verifiers.worker_call import handle_call
verifiers.register(Graded())
out = []
for name, completion, reference in json.loads(sys.stdin.read()):
    r = handle_call({{}}, (name, None), completion, reference, {{}})
    out.append([r[1], r[2], r[3]] if r[0] == "ok" else ["error", None, r[1]])
print(json.dumps(out))
"""


def _fresh_verdicts() -> list[tuple]:
    """Each UNIVERSE call's verdict computed in a fresh process by the workers' own code."""
    done = subprocess.run([sys.executable, "-c", FRESH.format(root=str(ROOT))], input=json.dumps(UNIVERSE),
                          capture_output=True, text=True, timeout=120, check=True)
    return [tuple(v) for v in json.loads(done.stdout.strip().splitlines()[-1])]


EXPECTED: list[tuple] = []
COUNTS: Counter = Counter()

indices = st.integers(0, len(UNIVERSE) - 1)
timeouts = st.sampled_from([None, 60.0])  # an explicit generous deadline, or the verifier's own
batches = st.lists(st.tuples(indices, timeouts), min_size=1, max_size=24)
delays = st.floats(0.0, 0.03)
BAD_TIMEOUTS = ["a", -1, 0, 0.0, float("nan"), float("inf"), True, [1]]


def _calls(batch) -> list[Call]:
    return [Call(*UNIVERSE[i], {} if t is None else {"timeout": t})
            for i, t in batch]


def _key(v) -> tuple:
    return (v.status.value, v.score, v.detail)


def _ended(pid: int) -> bool:
    """Whether process `pid` has exited: gone, or every thread of it a zombie. (The first thread turns zombie
    before the others end, and the files, the actor's socket among them, close only with the last.)"""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except (FileNotFoundError, ProcessLookupError):
        return True
    for t in threads:
        try:
            with open(f"/proc/{pid}/task/{t}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
                    return False
        except (FileNotFoundError, ProcessLookupError):  # the thread is gone (reading a dead task's stat: ESRCH)
            continue
    return True


def _kill_one_busy(pool: VerifierPool) -> None:
    """SIGKILL (process) or ray.kill (Ray) a worker, preferring one that holds a call."""
    workers = list(pool._workers)
    if not workers:
        return
    w = next((w for w in workers if w.task is not None), workers[0])
    if hasattr(w, "actor"):
        import ray

        try:
            pid = ray.get(w.actor.pid.remote(), timeout=30)  # the actor runs on this machine (a local cluster)
        except ray.exceptions.RayActorError:
            return  # the pool replaced it meanwhile
        ray.kill(w.actor, no_restart=True)
        # ray.kill is asynchronous (Ray marks the actor dead before its process ends): return once the process
        # has ended, as SIGKILL below waits for the worker process
        deadline = time.monotonic() + 30
        while not _ended(pid):
            assert time.monotonic() < deadline, f"a killed actor's process {pid} still runs after 30 s"
            time.sleep(0.002)
        with contextlib.suppress(OSError, ValueError):  # and once its end of the socket has closed (or it answered)
            select.select([w.conn.sock], [], [], 1)
    else:
        try:
            os.kill(w.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, TypeError):
            return
        wait([w.proc.sentinel], timeout=10)  # SIGKILL is asynchronous: return once the process is gone
    COUNTS["workers killed"] += 1


class PoolMachine(RuleBasedStateMachine):
    backend = "process"

    def __init__(self) -> None:
        super().__init__()
        self.pool: VerifierPool | None = None

    @initialize(cache=st.booleans())
    def start(self, cache: bool) -> None:
        self.pool = VerifierPool(num_workers=2, memory_mb=1024, cache_size=1000 if cache else 0,
                                 backend=self.backend)

    def _check_exact(self, batch, out) -> None:
        for (i, _), v in zip(batch, out):
            assert _key(v) == EXPECTED[i], (UNIVERSE[i], v)
            COUNTS["exact"] += 1

    @rule(batch=batches)
    def valid_batch(self, batch) -> None:
        self._check_exact(batch, self.pool.run(_calls(batch)))

    @rule(batch=batches, bad=st.sampled_from(BAD_TIMEOUTS), at=st.integers(0, 23))
    def bad_timeout_is_refused_before_sending(self, batch, bad, at) -> None:
        calls = _calls(batch)
        at = at % len(calls)
        calls[at] = Call(calls[at].verifier, calls[at].completion, calls[at].reference, {"timeout": bad})
        with pytest.raises(ValueError, match="timeout"):
            self.pool.run(calls)
        COUNTS["refused"] += 1

    @rule(batch=batches, at=st.integers(0, 23))
    def unknown_verifier_is_refused_before_sending(self, batch, at) -> None:
        calls = _calls(batch)
        calls.insert(at % (len(calls) + 1), Call("no_such_verifier", "1", "1", {}))
        with pytest.raises(KeyError, match="no_such_verifier"):
            self.pool.run(calls)
        COUNTS["refused"] += 1

    @rule(batch=batches, at=st.integers(0, 23))
    def a_hanging_call_times_out_alone(self, batch, at) -> None:
        calls = _calls(batch)
        at = at % (len(calls) + 1)
        calls.insert(at, Call("fuzz_graded", "hang", "a", {"timeout": 0.05}))
        out = self.pool.run(calls)
        hung = out[at]
        assert hung.status is Status.TIMEOUT and hung.score is None, hung
        self._check_exact(batch, out[:at] + out[at + 1:])
        COUNTS["timeouts"] += 1

    @rule(batch=batches, delay=delays)
    def worker_killed_mid_batch(self, batch, delay) -> None:
        killer = threading.Timer(delay, _kill_one_busy, args=(self.pool,))
        killer.start()
        try:
            out = self.pool.run(_calls(batch))
        finally:
            killer.join()
        for (i, _), v in zip(batch, out):
            if _key(v) != EXPECTED[i]:  # only the calls of the killed worker may differ, and only as masked
                assert v.status in MASKED and v.score is None, (UNIVERSE[i], v)
                COUNTS["masked by a kill"] += 1
            else:
                COUNTS["exact"] += 1

    @rule(batch=batches, delay=delays)
    def interrupted_mid_batch(self, batch, delay) -> None:
        timer = threading.Timer(delay, _thread.interrupt_main)
        out = None
        try:
            try:
                timer.start()  # inside the try: a zero delay can fire before start() returns
                out = self.pool.run(_calls(batch))
            finally:
                timer.cancel()
                timer.join()
                time.sleep(0.001)  # an interrupt already raised lands here at the latest
        except KeyboardInterrupt:
            COUNTS["interrupts"] += 1
        if out is not None:  # finished before the interrupt: still exact
            self._check_exact(batch, out)

    def teardown(self) -> None:
        if self.pool is not None:
            self.pool.close()


class RayPoolMachine(PoolMachine):
    """The same rules on Ray actors. One pool serves every example (an actor takes seconds to start);
    each example starts from an empty cache, as a new pool would."""

    backend = "ray"
    shared: VerifierPool | None = None

    @initialize(cache=st.booleans())
    def start(self, cache: bool) -> None:
        if RayPoolMachine.shared is None:
            RayPoolMachine.shared = VerifierPool(num_workers=2, cache_size=1000, backend="ray")
        self.pool = RayPoolMachine.shared
        self.pool.cache_size = 1000 if cache else 0
        self.pool._cache.clear()

    def teardown(self) -> None:
        pass  # closed by the test


@pytest.fixture(scope="module", autouse=True)
def graded_registered():
    from verifiers.registry import REGISTRY

    verifiers.register(Graded())
    EXPECTED[:] = _fresh_verdicts()
    assert len(EXPECTED) == len(UNIVERSE)
    assert {s for s, _, _ in EXPECTED} >= {"correct", "incorrect", "error", "abstain"}  # the table is varied
    yield
    REGISTRY.remove("fuzz_graded")


# The fast suite runs 20 sequences of 25 steps (usually 740-900 calls checked, about 20 s on 2 cores); the slow
# run (CI) runs 200 other sequences (usually 9,000-11,000 calls). The floors are half of that: see the docstring.
@pytest.mark.timeout(900)
@pytest.mark.parametrize("examples, seed, least", [(20, 0, 400), pytest.param(100, 1, 2_500, marks=pytest.mark.slow)])
def test_process_pool_never_returns_another_calls_verdict(examples, seed, least):
    COUNTS.clear()
    run_state_machine_as_test(PoolMachine, settings=settings(
        max_examples=examples, stateful_step_count=25, deadline=None, derandomize=seed == 0, database=None,
        phases=[Phase.generate], suppress_health_check=list(HealthCheck)))
    print(dict(COUNTS))
    assert COUNTS["exact"] + COUNTS["masked by a kill"] >= least
    assert COUNTS["workers killed"] > 0 and COUNTS["interrupts"] > 0 and COUNTS["timeouts"] > 0
    assert COUNTS["refused"] > 0


@pytest.mark.slow  # a Ray cluster starts, and each kill replaces an actor: over a minute
@pytest.mark.timeout(900)
@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="the `ray` extra is not installed")
def test_ray_pool_never_returns_another_calls_verdict():
    COUNTS.clear()
    try:
        run_state_machine_as_test(RayPoolMachine, settings=settings(
            max_examples=12, stateful_step_count=12, deadline=None, derandomize=True, phases=[Phase.generate],
            suppress_health_check=list(HealthCheck)))
    finally:
        if RayPoolMachine.shared is not None:
            RayPoolMachine.shared.close()
            RayPoolMachine.shared = None
    print(dict(COUNTS))
    import ray

    deadline = time.monotonic() + 30  # ray.kill is asynchronous: the CPUs come back shortly
    while ray.available_resources().get("CPU", 0) < ray.cluster_resources().get("CPU", 0) and time.monotonic() < deadline:
        time.sleep(0.2)
    # no actor outlives the closed pool, also none an interrupt orphaned mid-creation
    assert ray.available_resources().get("CPU", 0) == ray.cluster_resources().get("CPU", 0)
    assert COUNTS["exact"] + COUNTS["masked by a kill"] + COUNTS["masked by an earlier kill"] >= 100
    assert COUNTS["workers killed"] > 0
