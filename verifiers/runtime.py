"""The verifier runtime: worker processes, a wall-clock kill per call, a cache, and metrics.

Every call runs in a worker: a local process (`process_backend.py`, the default) or a Ray actor
(`ray_backend.py`), both behind one small interface and chosen by name. The pool waits on the
workers' connections with a deadline; a call that overruns is answered TIMEOUT and its worker is
killed and replaced, so a hung sympy, a runaway regex or a C extension stuck in a loop cannot stall
training. A worker that dies mid-call, a verifier that raises, or one that returns something other
than a valid `Verdict` is answered ERROR. TIMEOUT and ERROR carry score=None: masked downstream,
never 0. No signals are used, so this works from any thread, and verifiers never need `signal.alarm`.

Calls travel in batches (a share of what is pending, at most the worker's `batch_max`), answered
one reply per call as each is made; a call that hangs costs only itself: its batch-mates are sent
to another worker.

A reply never reaches another call: every request carries a call id that the worker sends back, a
reply with any other id gets its worker replaced (ERROR), options are validated before anything is
sent, and a run that is interrupted (Ctrl-C) kills the workers still holding its calls.

Deterministic verdicts are cached in memory, keyed by a hash of (verifier name, version,
config, reference, completion, options); TIMEOUT and ERROR are never cached.

Not here: persistence of the cache across runs.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import pickle
import threading
import time
from collections import OrderedDict, defaultdict
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import Any, Sequence

from reasoning_rl.types import Status, Verdict

from .base import SpecError, Verifier
from .process_backend import ProcessWorker
from .ray_backend import RayWorker, sweep
from .registry import distribution, get

_SEND_TRIES = 3  # a call whose worker was found dead this many times is answered ERROR

# Worker backends, chosen by name: `start(memory_mb, address, tag, live)` makes one. A worker offers: conn
# (send/recv/fileno), task, call_id, started, deadline, queue, batch_max, sent_verifiers, loading, alive(),
# exit_code(), kill(), stop(). Up to `batch_max` calls travel in one message (a message costs more than a `math`
# check); the worker answers them one by one, in order, so each still has its own deadline (counted from the previous
# reply). A call whose verifier the worker loads first (`loading`: its call ids) has the pool's `load_timeout` for
# that; the worker says ("loaded",) when done, and the call's own time starts then.
WORKER_BACKENDS = {"process": ProcessWorker, "ray": RayWorker}


@dataclass(frozen=True)
class Call:
    verifier: str
    completion: Any
    reference: Any
    options: dict


class _Stats:
    def __init__(self) -> None:
        self.status: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.latency: dict[str, list[float]] = defaultdict(list)
        self.hits: dict[str, int] = defaultdict(int)
        self.calls: dict[str, int] = defaultdict(int)

    def record(self, name: str, v: Verdict, latency: float | None, hit: bool) -> None:
        self.calls[name] += 1
        self.status[name][v.status.value] += 1
        if hit:
            self.hits[name] += 1
        elif latency is not None:
            lat = self.latency[name]
            lat.append(latency)
            if len(lat) > 20000:
                del lat[: len(lat) - 20000]

    def summary(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for name, n in self.calls.items():
            for st in Status:
                out[f"verifier/{name}/{st.value}"] = self.status[name].get(st.value, 0)
            out[f"verifier/{name}/calls"] = n
            out[f"verifier/{name}/timeout_rate"] = self.status[name].get("timeout", 0) / n
            out[f"verifier/{name}/error_rate"] = self.status[name].get("error", 0) / n
            out[f"verifier/{name}/cache_hit_rate"] = self.hits[name] / n
            lat = sorted(self.latency[name])
            if lat:
                out[f"verifier/{name}/latency_p50_ms"] = 1000 * lat[len(lat) // 2]
                out[f"verifier/{name}/latency_p99_ms"] = 1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))]
        return out


def cache_key(verifier: Verifier, call: Call) -> str:
    payload = json.dumps([verifier.name, verifier.version, verifier.config_key(), call.reference, call.completion,
                          call.options], sort_keys=True, default=repr)
    return hashlib.sha256(payload.encode()).hexdigest()


class VerifierPool:
    """Run verifier calls in `num_workers` processes with a wall-clock limit per call.

    num_workers: concurrent calls (default: the machine's cores).
    timeout:     seconds per call; None = the verifier's `time_budget` for the call, else `spec.default_timeout`
                 (a `timeout=` option on a call overrides both).
    memory_mb:   address-space cap per worker (0 = none).
    load_timeout: seconds a worker may take to load a verifier before its first call there (a fresh worker's
                 start, a plugin's import, a user verifier unpickled): not counted in the call's own time, so a
                 replacement worker on a loaded machine does not turn a good call into TIMEOUT; a load that
                 overruns it is TIMEOUT (masked) and the worker is replaced.
    cache_size:  deterministic verdicts kept in memory (0 = no cache); with the cache on, identical deterministic
                 calls in one batch also run once.
    backend:     "process" (local worker processes) or "ray" (Ray actors, any number of nodes: the same
                 timeouts, statuses and cache; `ray_address` joins an existing cluster, else a local one).
    """

    def __init__(self, num_workers: int | None = None, timeout: float | None = None, memory_mb: int = 4096,
                 cache_size: int = 200_000, backend: str = "process", ray_address: str | None = None,
                 load_timeout: float = 60.0) -> None:
        if backend not in WORKER_BACKENDS:
            raise ValueError(f"VerifierPool.backend must be one of {sorted(WORKER_BACKENDS)}, got {backend!r}")
        self.backend, self.ray_address = backend, ray_address
        self.num_workers = max(1, num_workers or (os.cpu_count() or 1))
        if timeout is not None and not timeout > 0:
            raise ValueError(f"VerifierPool.timeout must be > 0 seconds, got {timeout!r}")
        self.timeout = timeout
        if not (isinstance(load_timeout, (int, float)) and math.isfinite(load_timeout) and load_timeout > 0):
            raise ValueError(f"VerifierPool.load_timeout must be > 0 seconds, got {load_timeout!r}")
        self.load_timeout = float(load_timeout)
        self.memory_mb = memory_mb
        self.cache_size = cache_size
        self._cache: OrderedDict[str, Verdict] = OrderedDict()
        self._workers: list = []  # ProcessWorker or RayWorker
        self.stats = _Stats()
        self.workers_replaced = 0
        self._next_id = 0  # the id of the last call sent; replies carry it back
        self._send_failures: dict[int, int] = {}  # this run's calls whose worker was found dead, and how often
        self._tag = f"rrl-verifier-{os.getpid()}-{id(self):x}"  # names this pool's Ray actors
        self._turn = threading.Lock()  # one batch in flight at a time, whichever thread sends it

    # -- lifecycle ---------------------------------------------------------------
    def _new_worker(self):
        live = frozenset(getattr(w, "name", "") for w in self._workers)
        return WORKER_BACKENDS[self.backend].start(self.memory_mb, self.ray_address, self._tag, live)

    def _ensure_workers(self) -> None:
        while len(self._workers) < self.num_workers:
            self._workers.append(self._new_worker())

    def close(self) -> None:
        for w in self._workers:
            w.stop()
        self._workers = []
        if self.backend == "ray":
            sweep(self._tag)  # actors an interrupt left behind

    def __enter__(self) -> "VerifierPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- calls -------------------------------------------------------------------
    def verify(self, name: str, completion: Any, reference: Any = None, **options: Any) -> Verdict:
        return self.run([Call(name, completion, reference, options)])[0]

    def verify_batch(self, name: str, completions: Sequence[Any], references: Sequence[Any],
                     **options: Any) -> list[Verdict]:
        if len(completions) != len(references):
            raise ValueError(f"verify_batch: {len(completions)} completions but {len(references)} references")
        return self.run([Call(name, c, r, dict(options)) for c, r in zip(completions, references)])

    def run(self, calls: Sequence[Call]) -> list[Verdict]:
        """Verdicts for the calls, in order. Never raises for a verifier's failure: that is a masked verdict.

        Raises before anything is sent for the caller's own mistakes (an unknown verifier, a `timeout`
        option that is not a positive number of seconds). An interrupt (Ctrl-C) or any other exception
        while calls are in flight kills the workers holding them, so the pool stays usable and no reply
        of an abandoned call can reach a later one. Calls from several threads (a round verified on a producer
        thread while the trainer scores its held-out set) take turns: one batch at a time.
        """
        with self._turn:
            return self._run(calls)

    def _run(self, calls: Sequence[Call]) -> list[Verdict]:
        self._reap_abandoned()
        self._send_failures.clear()
        results: list[Verdict | None] = [None] * len(calls)
        pending: list[int] = []
        objs: dict[str, Verifier] = {}
        keys: dict[int, str] = {}
        first: dict[str, int] = {}  # cache key -> the call in this batch that computes it
        repeats: list[tuple[int, int]] = []  # (call, the identical earlier call whose verdict it shares)
        timeouts: dict[int, float] = {}
        blobs: dict[str, bytes | None] = {}
        for i, c in enumerate(calls):
            v = objs.get(c.verifier) or get(c.verifier)
            if c.verifier not in objs:
                objs[c.verifier], blobs[c.verifier] = v, self._pickle(v)  # a user verifier travels pickled
            timeouts[i] = self._call_timeout(v, c)  # validated for every call before any is sent
            if self.cache_size and v.spec.deterministic:
                k = cache_key(v, c)
                keys[i] = k
                hit = self._cache.get(k)
                if hit is not None:
                    self._cache.move_to_end(k)
                    results[i] = hit
                    self.stats.record(c.verifier, hit, None, True)
                    continue
                if k in first:  # the same deterministic call twice in one batch (a policy repeating itself): run once
                    repeats.append((i, first[k]))
                    continue
                first[k] = i
            pending.append(i)
        pending.reverse()
        self._ensure_workers()
        self._solo: set[int] = set()  # calls that must travel alone (a batch holding them could not be sent)
        busy: dict[Any, Any] = {}  # connection -> the worker holding a call
        try:
            while pending or busy:
                for w in list(self._workers):
                    if w.task is None and pending:
                        batch = [pending.pop() for _ in range(self._batch_len(w, pending))]
                        # calls whose worker was dead before they reached it are sent again
                        pending.extend(reversed(self._send(w, batch, calls, blobs, timeouts, busy, results)))
                if not busy:
                    continue
                now = time.monotonic()
                ready = wait(list(busy), timeout=max(0.0, min(w.deadline for w in busy.values()) - now))
                for conn in ready:
                    w = busy.pop(conn)
                    i, started = w.task, w.started
                    verdict, unrun = self._receive(w, timeouts)
                    if verdict is None:  # the worker has loaded the verifier: the call's own time runs from now
                        busy[conn] = w
                        continue
                    self._finish(i, calls[i], verdict, time.monotonic() - started, results, keys)
                    pending.extend(unrun)  # the rest of a dead worker's batch never ran: send it elsewhere
                    if w.task is not None:
                        busy[conn] = w  # the next call of its batch is under way
                now = time.monotonic()
                for conn, w in list(busy.items()):
                    if now >= w.deadline:
                        busy.pop(conn)
                        i, unrun = w.task, [q[0] for q in w.queue]
                        self._replace(w)
                        what = "verifier not loaded" if w.call_id in w.loading else "no verdict"
                        verdict = Verdict.masked_as(Status.TIMEOUT, f"{what} within {w.deadline - w.started:.3g}s; "
                                                                   "worker killed and replaced")
                        self._finish(i, calls[i], verdict, now - w.started, results, keys)
                        pending.extend(unrun)
        finally:
            # left early (an interrupt, a bug): the replies still owed must never reach a later call
            self._reap_abandoned()
        for i, j in repeats:
            results[i] = results[j]
            self.stats.record(calls[i].verifier, results[j], None, True)
        return results  # type: ignore[return-value]

    def _batch_len(self, w, pending: list) -> int:
        """How many pending calls go to idle worker `w` in one message: a share of what is left (so the batches
        still balance over the workers), at most its `batch_max`, and never past a call that must travel alone."""
        if w.batch_max <= 1 or pending[-1] in self._solo:
            return 1
        n = min(w.batch_max, math.ceil(len(pending) / (2 * self.num_workers)))
        return next((k for k in range(1, n) if pending[-1 - k] in self._solo), n)

    def _send(self, w, batch: list[int], calls: Sequence[Call], blobs: dict, timeouts: dict, busy: dict,
              results: list) -> list[int]:
        """Send the calls `batch` to an idle worker in one message, each under a fresh call id; the worker
        holds the first (`task`), the rest wait in its `queue`. Returns the calls to send again: the worker
        had died while idle (it is replaced; a call found so `_SEND_TRIES` times is answered ERROR), or a batch
        could not be pickled (its calls then travel alone). A single call that cannot be sent is ERROR."""
        msgs, ids, seen, loading = [], [], set(w.sent_verifiers), set()
        for i in batch:
            c = calls[i]
            opts = {k: val for k, val in c.options.items() if k != "timeout"}
            blob = (c.verifier, None if c.verifier in seen else blobs[c.verifier])
            self._next_id += 1
            if c.verifier not in seen:
                loading.add(self._next_id)  # the worker loads it first, and says so
            seen.add(c.verifier)
            ids.append(self._next_id)
            msgs.append((self._next_id, blob, c.completion, c.reference, opts))
        # the worker is marked as holding the calls before they are sent: an interrupt between the two must
        # leave a worker that is reaped, never one that owes a reply nobody is waiting for
        now = time.monotonic()
        w.task, w.call_id, w.loading, w.queue = batch[0], ids[0], loading, list(zip(batch[1:], ids[1:]))
        w.started, w.deadline = now, now + self._allowed(w, timeouts)
        try:
            w.conn.send(msgs[0] if len(msgs) == 1 else msgs)
        except OSError as e:  # a broken pipe: the worker died while idle
            w.task = w.call_id = None
            w.queue = []
            self._replace(w)
            again = []
            for i in batch:
                self._send_failures[i] = tries = self._send_failures.get(i, 0) + 1
                if tries < _SEND_TRIES:
                    again.append(i)
                else:
                    results[i] = Verdict.masked_as(Status.ERROR, f"call not sendable to a worker after {tries} tries: {e}")
                    self.stats.record(calls[i].verifier, results[i], None, False)
            return again
        except (ValueError, pickle.PicklingError, TypeError, AttributeError) as e:
            w.task = w.call_id = None  # pickling failed before any byte was written
            w.queue = []
            if len(batch) > 1:
                self._solo.update(batch)
                return list(batch)
            results[batch[0]] = Verdict.masked_as(Status.ERROR, f"call not sendable to a worker: {e}")
            self.stats.record(calls[batch[0]].verifier, results[batch[0]], None, False)
            return []
        w.sent_verifiers = seen
        busy[w.conn] = w
        return []

    def _receive(self, w, timeouts: dict) -> tuple[Verdict | None, list[int]]:
        """The verdict for the call `w` holds, and the calls of its batch that will now never run. A dead worker,
        or a reply for any other call id, is ERROR (masked) and the worker is replaced: a reply is never matched
        to a call it was not sent for. On a good reply the worker moves on to the next call of its batch. The
        worker's word that it has loaded the call's verifier is no verdict: (None, []), and the call's own time
        starts then."""
        try:
            call_id, reply = w.conn.recv()
        except (EOFError, OSError):
            code = w.exit_code()
            unrun, w.queue, w.task, w.call_id = [q[0] for q in w.queue], [], None, None
            self._replace(w)
            return Verdict.masked_as(Status.ERROR, f"worker died (exit code {code})"), unrun
        if call_id != w.call_id:
            held, unrun = w.call_id, [q[0] for q in w.queue]
            w.queue, w.task, w.call_id = [], None, None
            self._replace(w)
            return Verdict.masked_as(Status.ERROR, f"worker answered call {call_id} while holding call {held}; "
                                                   "worker replaced"), unrun
        if reply[0] == "loaded":  # not a verdict: the call's own time starts now
            w.loading.discard(call_id)
            w.started = time.monotonic()
            w.deadline = w.started + timeouts[w.task]
            return None, []
        w.task = w.call_id = None
        if w.queue:
            (w.task, w.call_id), w.queue = w.queue[0], w.queue[1:]
            w.started = time.monotonic()
            w.deadline = w.started + self._allowed(w, timeouts)
        if reply[0] == "ok":
            _, status, score, detail, metrics, _lat = reply
            return Verdict(Status(status), score, detail, metrics), []
        return Verdict.masked_as(Status.ERROR, reply[1]), []

    # -- helpers -----------------------------------------------------------------
    def _allowed(self, w, timeouts: dict) -> float:
        """Seconds the call `w` now holds may run before its next word: the load timeout while the worker loads
        its verifier (it says ("loaded",) when done), else the call's own."""
        return self.load_timeout if w.call_id in w.loading else timeouts[w.task]

    def _call_timeout(self, v: Verifier, c: Call) -> float:
        """Seconds call `c` may take: its `timeout` option, else the verifier's budget, the pool's, the spec's.

        Raises ValueError (nothing sent) for a `timeout` option that is not a positive, finite number.
        """
        if "timeout" in c.options and c.options["timeout"] is not None:
            t = c.options["timeout"]
            if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t <= 0:
                raise ValueError(f"verifier call option timeout must be a positive number of seconds, got {t!r}")
            return float(t)
        opts = {k: val for k, val in c.options.items() if k != "timeout"}
        return float(self._budget(v, c.reference, opts) or self.timeout or v.spec.default_timeout)

    def _drop(self, w) -> None:
        """Kill a worker that holds a call nobody will wait for; a fresh one is started on the next run."""
        with contextlib.suppress(OSError, ValueError):
            w.kill()
        w.task = w.call_id = None
        w.queue = []
        if w in self._workers:
            self._workers.remove(w)
        self.workers_replaced += 1

    def _reap_abandoned(self) -> None:
        """Drop workers still holding a call of an earlier, interrupted run (its cleanup was interrupted too),
        and workers that died while idle (killed between batches), so no call is sent to them."""
        for w in [w for w in self._workers if w.task is not None or not w.alive()]:
            self._drop(w)

    @staticmethod
    def _budget(v: Verifier, reference: Any, options: dict) -> float | None:
        try:
            return v.time_budget(reference, **options)
        except (TypeError, ValueError):
            return None  # a malformed reference: the verifier itself will say so (ABSTAIN)

    def _pickle(self, v: Verifier) -> bytes | None:
        try:
            if distribution(v.name) != "user":
                return None  # built-ins and plugins: the worker loads them by name
        except (KeyError, SpecError):
            pass
        try:
            return pickle.dumps(v)
        except (pickle.PicklingError, AttributeError, TypeError) as e:
            raise SpecError(f"verifier {v.name!r} cannot be sent to the worker processes ({e}); define its class at "
                            "the top level of an importable module") from None

    def _replace(self, w) -> None:
        w.kill()
        self._workers[self._workers.index(w)] = self._new_worker()
        self.workers_replaced += 1

    def _finish(self, i: int, c: Call, verdict: Verdict, latency: float, results: list, keys: dict) -> None:
        results[i] = verdict
        self.stats.record(c.verifier, verdict, latency, False)
        k = keys.get(i)
        if k is not None and verdict.status not in (Status.TIMEOUT, Status.ERROR):
            self._cache[k] = verdict
            if len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)

    def metrics(self) -> dict[str, float]:
        out = self.stats.summary()
        out["verifier/workers_replaced"] = self.workers_replaced
        return out


_DEFAULT_POOL: VerifierPool | None = None


def default_pool() -> VerifierPool:
    global _DEFAULT_POOL
    if _DEFAULT_POOL is None:
        import atexit

        _DEFAULT_POOL = VerifierPool()
        atexit.register(_DEFAULT_POOL.close)
    return _DEFAULT_POOL
