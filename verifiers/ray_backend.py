"""Verifier workers as Ray actors: `VerifierPool(backend="ray")`.

Each worker is one Ray actor (one CPU) that loads the built-in and plugin verifiers and answers
calls with the very function the process workers use (`worker_call.handle_call`), so statuses,
details and metrics are identical. Ray places and owns the actors (SPREAD: one per node first);
the calls themselves do not go through Ray's task machinery, which costs milliseconds a call (a
math verification takes a fraction of one): each actor connects back to the pool over TCP (one
port per actor on the pool's node, a one-time token) and answers framed calls on that socket,
as a process worker does on its pipe. The pool sends up to `worker_call.BATCH_MAX` calls in one message; the
actor answers each as soon as it is made, so every call keeps its own deadline. A `RayWorker`
offers the pool's loop the same small interface as a process worker. A call past its deadline
gets TIMEOUT and its actor is killed (`ray.kill`) and replaced, as a process worker is.

`ray_address=None` starts (or reuses) a local cluster whose workers see this process's
`sys.path`; an address joins an existing cluster (the package must be installed on its nodes).
Needs the optional extra `ray`. Not here: placement groups, GPUs for verifiers, autoscaling.
"""
from __future__ import annotations

import contextlib
import os
import uuid
import pickle
import select
import socket
import sys

from . import worker_call


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

            def node(self) -> str:
                """The Ray node this actor runs on (placement can be checked)."""
                return ray.get_runtime_context().get_node_id()

            def pid(self) -> int:
                """The actor's process id on its node (a test can wait for a killed actor's process to end)."""
                return os.getpid()

            def serve(self, host: str, port: int, token: bytes) -> bool:
                """Connect back to the pool and answer its calls over that socket, from a thread of this actor."""
                import threading

                from .worker_call import serve

                conn = _Conn(socket.create_connection((host, port), timeout=60))
                conn.sock.settimeout(None)
                conn.sock.sendall(token)
                threading.Thread(target=serve, args=(conn, self.known), daemon=True, name="rrl-verifier").start()
                return True

        _ACTOR_CLASS.append(VerifierActor)
    return _ACTOR_CLASS[0]


class _Conn:
    """Length-prefixed pickle frames over a TCP socket (the pool's end and the actor's): send, recv, fileno, close.
    Only the pool and the actor it started, which proved itself with a one-time token, ever hold either end."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, msg) -> None:
        data = pickle.dumps(msg)
        self.sock.sendall(len(data).to_bytes(8, "big") + data)

    def _exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise EOFError("ray worker connection closed")
            buf += chunk
        return bytes(buf)

    def recv(self):
        return pickle.loads(self._exact(int.from_bytes(self._exact(8), "big")))

    def close(self) -> None:
        self.sock.close()


def _connect(actor, address: str | None) -> _Conn:
    """Listen on a fresh port of this node, ask the actor to connect back, accept it (token checked)."""
    ray = _ray(address)
    token = os.urandom(16)
    with socket.create_server(("0.0.0.0", 0)) as server:
        server.settimeout(300)
        host = ray.util.get_node_ip_address()
        ref = actor.serve.remote(host, server.getsockname()[1], token)
        sock, _ = server.accept()
        sock.settimeout(60)
        conn = _Conn(sock)
        try:
            got = conn._exact(len(token))
        except EOFError:
            got = b""
        if got != token:
            conn.close()
            raise ConnectionError("a connection to the verifier pool did not come from its actor (bad token)")
        sock.settimeout(None)
        ray.get(ref, timeout=60)
    return conn


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
        # SPREAD: the pool's actors go to different nodes where the cluster has them
        self.actor = _actor_class(address).options(name=self.name, scheduling_strategy="SPREAD").remote(memory_mb)
        ready = False
        try:
            _ray().get(self.actor.ready.remote(), timeout=300)  # started and loaded: deadlines count calls only
            ready = True
        finally:
            if not ready:  # an interrupt or a failed start: an actor no pool knows about would hold its CPU for good
                with contextlib.suppress(Exception):
                    _ray().kill(self.actor, no_restart=True)
        connected = False
        try:
            self.conn = _connect(self.actor, address)
            connected = True
        finally:
            if not connected:  # an interrupt too: never leave an actor no pool knows about
                with contextlib.suppress(Exception):
                    _ray().kill(self.actor, no_restart=True)
        self.task: int | None = None
        self.call_id: int | None = None
        self.queue: list = []  # (index, call id) of the calls sent with it, answered in order
        self.batch_max = worker_call.BATCH_MAX
        self.deadline = 0.0
        self.started = 0.0
        self.sent_verifiers: set[str] = set()
        self.loading: set[int] = set()  # ids of held calls whose verifier this worker loads first

    @classmethod
    def start(cls, memory_mb: int, address: str | None = None, tag: str = "rrl-verifier",
              live: frozenset = frozenset()) -> "RayWorker":
        """A new actor, after killing the pool's actors (`tag`) that are not `live`: ones an interrupt orphaned
        mid-creation would hold their CPUs for good."""
        sweep(tag, live)
        return cls(memory_mb, address, tag)

    def alive(self) -> bool:
        """Whether an idle actor can still take a call. An idle actor owes nothing, so anything readable on its
        connection is its end closing (the actor died or was killed) or a reply nobody asked for: either way the
        pool replaces it before sending, instead of finding out by a call answered ERROR."""
        try:
            readable, _, _ = select.select([self.conn.sock], [], [], 0)
        except (OSError, ValueError):  # closed on our side
            return False
        return not readable

    def exit_code(self) -> int | None:
        return None  # an actor has no exit status to report

    def kill(self) -> None:
        try:
            _ray().kill(self.actor, no_restart=True)
        finally:
            self.conn.close()

    def stop(self) -> None:
        self.kill()
