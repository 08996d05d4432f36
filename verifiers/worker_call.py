"""One verifier call inside a worker (a pool's process or a Ray actor): the reply the pool turns into a Verdict.

Shared by both worker backends, so statuses, details and metrics are identical whichever runs the call.
A verifier that raises or returns something other than a valid Verdict is answered ("error", why): the pool
masks it (ERROR, score None), never 0. `serve(conn, known)` is the workers' loop over any connection with send/recv:
a message is one call or a batch of calls (a list), answered one reply per call, in order, each as soon as it is
made, a call whose verifier the worker loads first preceded by the word that it has loaded it.
Not here: deadlines and killing (the pool's), transport.
"""
from __future__ import annotations

import pickle
import time
import traceback
from functools import partial

from .base import check_verdict
from .registry import get

BATCH_MAX = 64  # calls per message to a worker (each answered, and timed, on its own): a message costs more than a
#               math check


def load(known: dict, blob):
    """The verifier a call names, loaded into `known` on its first call in this worker: `blob` is (name, pickled
    verifier or None); None loads a built-in or plugin by name. Returns (verifier, whether it was loaded now)."""
    verifier = known.get(blob[0])
    if verifier is not None and blob[1] is None:
        return verifier, False
    verifier = pickle.loads(blob[1]) if blob[1] is not None else get(blob[0])
    known[blob[0]] = verifier
    return verifier, True


def handle_call(known: dict, blob, completion, reference, options, loaded=None) -> tuple:
    """One call inside a worker (process or Ray actor): the reply tuple the pool turns into a Verdict. `loaded()` is
    called once the verifier is at hand, when it had to be loaded first (the pool's clock for the call starts then)."""
    try:
        verifier, fresh = load(known, blob)
        if fresh and loaded is not None:
            loaded()
        t0 = time.perf_counter()
        v = verifier.verify(completion, reference, **options)
        check_verdict(verifier, v)
        return ("ok", v.status.value, v.score, v.detail, dict(v.metrics), time.perf_counter() - t0)
    except MemoryError:
        return ("error", "MemoryError: verifier exceeded its memory limit")
    except Exception as e:  # noqa: BLE001 - any verifier failure becomes ERROR (masked), reported in detail
        tb = traceback.format_exception_only(type(e), e)[-1].strip()
        return ("error", tb[:500])


def serve(conn, known: dict) -> None:
    """Answer (call id, verifier, completion, reference, options) messages, or lists of them, with (call id,
    reply) until the connection closes or sends None. The call id travels back with its reply, so the pool can
    tell a reply to the call it waits for from anything else. A call whose verifier this worker loads first is
    preceded by (call id, ("loaded",)): loading (importing a plugin, unpickling a user's verifier) is not the call's
    time."""
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        for call_id, *call in (msg if isinstance(msg, list) else [msg]):
            reply = handle_call(known, *call, loaded=partial(conn.send, (call_id, ("loaded",))))
            try:
                conn.send((call_id, reply))
            except (ValueError, pickle.PicklingError, TypeError, AttributeError) as e:  # the reply itself
                conn.send((call_id, ("error", f"reply not sendable: {e}")))
