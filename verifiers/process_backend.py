"""Verifier workers as local processes: the pool's default backend.

Each worker is a process forked from a `forkserver` that has imported the verifiers (not torch), so it
starts in milliseconds and never inherits the trainer's threads. It caps its own address space
(`memory_mb`: a sympy blow-up becomes a MemoryError, answered ERROR, not the machine's OOM killer) and
answers (call id, verifier, completion, reference, options) with (call id, reply), one reply per call, also
when the pool sends a batch of calls in one message (`worker_call.serve`).
A worker offers the pool the same small interface as a Ray actor (`ray_backend.RayWorker`): conn, alive(),
exit_code(), kill(), stop(). Not here: deadlines, caching, the choice of worker (runtime.py).
"""
from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import sys
import time
from multiprocessing.connection import Connection

from .registry import load_all
from . import worker_call
from .worker_call import serve

_CTX = None
_START_TRIES = 6  # attempts to start a worker process while the forkserver restarts (about 1.5 s in all)


def _context():
    global _CTX
    if _CTX is None:
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(["verifiers", "verifiers.math_verifier", "sympy"])
        _CTX = ctx
    return _CTX


def _worker_main(conn: Connection, memory_mb: int) -> None:
    """Cap the address space, load the verifiers, then answer calls on `conn` (`worker_call.serve`). Ctrl-C at a
    terminal reaches the whole process group: a worker ignores it, and the pool that owns it decides (a run that
    stops after its round still needs its verdicts)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if memory_mb:
        import resource

        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    load_all()
    serve(conn, {})


def _reset_forkserver() -> None:
    """Forget a forkserver that is gone. CPython's ForkServer keeps the pid of the server it started; an interrupt
    inside its restart (after it reaped the dead server, before it cleared the pid) leaves a pid that is no longer
    our child, and every later start then fails with ChildProcessError, for the life of the process. Clearing
    that state makes the next start launch a fresh server. (CPython internals, present in 3.8-3.13; skipped if not.)"""
    from multiprocessing import forkserver

    fs = getattr(forkserver, "_forkserver", None)
    if fs is None or not all(hasattr(fs, a) for a in ("_lock", "_forkserver_pid", "_forkserver_alive_fd")):
        return
    with fs._lock:
        if fs._forkserver_alive_fd is not None:
            with contextlib.suppress(OSError):
                os.close(fs._forkserver_alive_fd)
        fs._forkserver_alive_fd = None
        fs._forkserver_pid = None
        fs._forkserver_address = None


@contextlib.contextmanager
def main_module_hidden():
    """Start a process without re-importing the parent's __main__ in it.

    multiprocessing's forkserver/spawn children re-run the parent's main script (as __mp_main__)
    unless it has an `if __name__ == "__main__"` guard; a training script without one would
    start training again in every verifier worker. Workers need nothing from __main__ (built-in
    and plugin verifiers load by name; user verifiers must live in an importable module), so
    the main module's file and spec are hidden while the child's preparation data is taken.
    (The generation process of the `worker` rollout engine starts under it too.)
    """
    main = sys.modules.get("__main__")
    saved = {k: main.__dict__[k] for k in ("__file__", "__spec__") if main is not None and k in main.__dict__}
    try:
        for k in saved:
            if k == "__spec__":
                main.__spec__ = None
            else:
                del main.__dict__[k]
        yield
    finally:
        for k, v in saved.items():
            main.__dict__[k] = v


class ProcessWorker:
    def __init__(self, memory_mb: int):
        ctx = _context()
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child, memory_mb), daemon=True)
        with main_module_hidden():
            self.proc.start()
        child.close()
        self.task: int | None = None  # index of the call held, in the running batch
        self.call_id: int | None = None  # the id that call was sent under
        self.queue: list = []  # (index, call id) of calls sent after it, answered in order
        self.batch_max = worker_call.BATCH_MAX
        self.deadline = 0.0
        self.started = 0.0
        self.sent_verifiers: set[str] = set()
        self.loading: set[int] = set()  # ids of held calls whose verifier this worker loads first

    def alive(self) -> bool:
        return self.proc.is_alive()

    def exit_code(self) -> int | None:
        self.proc.join(timeout=2)  # reap it, so the exit code is known
        return self.proc.exitcode

    def kill(self) -> None:
        try:
            self.proc.kill()
            self.proc.join(timeout=5)
        finally:
            self.conn.close()

    def stop(self) -> None:
        try:
            self.conn.send(None)
        except (OSError, ValueError):
            pass
        self.proc.join(timeout=2)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(timeout=2)
        self.conn.close()

    @classmethod
    def start(cls, memory_mb: int, address: str | None = None, tag: str = "", live: frozenset = frozenset()
              ) -> "ProcessWorker":
        """A new worker, waiting out a forkserver that an interrupt killed or left stale. (`address`, `tag` and
        `live` are the Ray backend's: the backends share one signature.)"""
        for attempt in range(_START_TRIES):
            try:
                return cls(memory_mb)
            except (ConnectionError, EOFError, ChildProcessError) as e:
                # the forkserver died (an interrupt while it was handing over a new worker ends it): Python
                # starts a new one once the old one has exited, so wait a moment and ask again
                if isinstance(e, ChildProcessError):
                    _reset_forkserver()
                if attempt == _START_TRIES - 1:
                    raise RuntimeError(f"verifier pool: could not start a worker process ({e})") from e
                time.sleep(0.05 * 2 ** attempt)
        raise AssertionError("unreachable")
