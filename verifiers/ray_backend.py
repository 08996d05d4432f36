"""Verifier workers as Ray actors: `VerifierPool(backend="ray")`.

Each worker is one Ray actor (one CPU) that loads the built-in and plugin verifiers and answers
calls with the very function the process workers use (`worker_call.handle_call`), so statuses,
details and metrics are identical. The pool's scheduling loop does not change: a `RayWorker`
offers it the same small interface as a process worker, with a socket that becomes readable when the actor's reply
arrives (a small thread waits on the Ray future and writes the reply into it). A call past its
deadline gets TIMEOUT and its actor is killed (`ray.kill`) and replaced, as a process worker is.

`ray_address=None` starts (or reuses) a local cluster whose workers see this process's
`sys.path`; an address joins an existing cluster (the package must be installed on its nodes).
Needs the optional extra `ray`. Not here: placement groups, GPUs for verifiers, autoscaling.
"""
from __future__ import annotations

import contextlib
import os
import uuid
import pickle
import socket
import sys
import threading


def _ray(address: str | None = None):
    """Ray, initialised on first use: joining `address`, else starting (or reusing) a local cluster."""
    try:
        import ray
    except ImportError as e:
        raise ImportError("VerifierPool(backend='ray') needs Ray: pip install 'reasoning-rl[ray]'") from e
    if not ray.is_initialized():
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            path = os.pathsep.join(p for p in sys.path if p)
            ray.init(include_dashboard=False, log_to_driver=False,
                     runtime_env={"env_vars": {"PYTHONPATH": path}})
    return ray


_ACTOR_CLASS: list = []


def _actor_class(address: str | None = None):
    if not _ACTOR_CLASS:
        ray = _ray(address)

        @ray.remote(num_cpus=1, max_restarts=0)
        class VerifierActor:
            def __init__(self, memory_mb: int) -> None:
                # no RLIMIT_AS here: a Ray worker maps gigabytes of address space for its own runtime and dies
                # under the cap the process workers use; bound memory with Ray's `memory` resource instead
                from verifiers.registry import load_all

                load_all()
                self.known: dict = {}

            def ready(self) -> bool:
                return True

            def handle(self, blob, completion, reference, options):
                from .worker_call import handle_call

                return handle_call(self.known, blob, completion, reference, options)

        _ACTOR_CLASS.append(VerifierActor)
    return _ACTOR_CLASS[0]


class _Conn:
    """What the pool's loop needs of a worker connection: send, recv, fileno (for `wait`), close."""

    def __init__(self, actor) -> None:
        self.actor = actor
        self._r, self._w = socket.socketpair()

    def fileno(self) -> int:
        return self._r.fileno()

    def send(self, msg) -> None:
        ray = _ray()
        if msg is None:
            return
        call_id, *call = msg
        ref = self.actor.handle.remote(*call)

        def deliver() -> None:
            try:
                reply = ray.get(ref)
            except Exception:  # the actor died or was killed: close the line, so the pool sees a dead worker,
                with contextlib.suppress(OSError):  # answers ERROR (masked) and replaces the actor
                    self._w.shutdown(socket.SHUT_WR)
                return
            data = pickle.dumps((call_id, reply))  # the id travels back with its reply, as with process workers
            try:
                self._w.sendall(len(data).to_bytes(8, "big") + data)
            except OSError:
                pass  # the pool gave up on this worker (timeout) and closed it

        threading.Thread(target=deliver, daemon=True).start()

    def _exact(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self._r.recv(n - len(buf))
            if not chunk:
                raise EOFError("ray worker connection closed")
            buf += chunk
        return buf

    def recv(self):
        return pickle.loads(self._exact(int.from_bytes(self._exact(8), "big")))

    def close(self) -> None:
        self._r.close()
        self._w.close()


def sweep(tag: str, keep: frozenset = frozenset()) -> int:
    """Kill every actor named with the pool's `tag` except those in `keep` (the pool's live workers), also one
    whose handle an interrupt lost mid-creation (it would hold its CPU for good, and a 2-CPU cluster would
    schedule no new actor). Returns how many."""
    import ray

    if not ray.is_initialized():
        return 0
    n = 0
    for name in ray.util.list_named_actors():
        if name.startswith(tag) and name not in keep:
            with contextlib.suppress(Exception):
                ray.kill(ray.get_actor(name), no_restart=True)
                n += 1
    return n


class RayWorker:
    def __init__(self, memory_mb: int, address: str | None = None, tag: str = "rrl-verifier") -> None:
        self.name = f"{tag}-{uuid.uuid4().hex[:12]}"
        self.actor = _actor_class(address).options(name=self.name).remote(memory_mb)
        ready = False
        try:
            _ray().get(self.actor.ready.remote(), timeout=300)  # started and loaded: deadlines count calls only
            ready = True
        finally:
            if not ready:  # an interrupt or a failed start: an actor no pool knows about would hold its CPU for good
                with contextlib.suppress(Exception):
                    _ray().kill(self.actor, no_restart=True)
        self.conn = _Conn(self.actor)
        self.task: int | None = None
        self.call_id: int | None = None
        self.deadline = 0.0
        self.started = 0.0
        self.sent_verifiers: set[str] = set()

    @classmethod
    def start(cls, memory_mb: int, address: str | None = None, tag: str = "rrl-verifier",
              live: frozenset = frozenset()) -> "RayWorker":
        """A new actor, after killing the pool's actors (`tag`) that are not `live`: ones an interrupt orphaned
        mid-creation would hold their CPUs for good."""
        sweep(tag, live)
        return cls(memory_mb, address, tag)

    def alive(self) -> bool:
        return True  # a dead actor is found out by its next call (ERROR, masked, and the actor replaced)

    def exit_code(self) -> int | None:
        return None  # an actor has no exit status to report

    def kill(self) -> None:
        try:
            _ray().kill(self.actor, no_restart=True)
        finally:
            self.conn.close()

    def stop(self) -> None:
        self.kill()
