"""One verifier call inside a worker (a pool's process or a Ray actor): the reply the pool turns into a Verdict.

Shared by both worker backends, so statuses, details and metrics are identical whichever runs the call.
A verifier that raises or returns something other than a valid Verdict is answered ("error", why): the pool
masks it (ERROR, score None), never 0. Not here: deadlines and killing (the pool's), transport.
"""
from __future__ import annotations

import pickle
import time
import traceback

from .base import check_verdict
from .registry import get


def handle_call(known: dict, blob, completion, reference, options) -> tuple:
    """One call inside a worker (process or Ray actor): the reply tuple the pool turns into a Verdict."""
    try:
        verifier = known.get(blob[0])
        if verifier is None or blob[1] is not None:
            verifier = pickle.loads(blob[1]) if blob[1] is not None else get(blob[0])
            known[blob[0]] = verifier
        t0 = time.perf_counter()
        v = verifier.verify(completion, reference, **options)
        check_verdict(verifier, v)
        return ("ok", v.status.value, v.score, v.detail, dict(v.metrics), time.perf_counter() - t0)
    except MemoryError:
        return ("error", "MemoryError: verifier exceeded its memory limit")
    except Exception as e:  # noqa: BLE001 - any verifier failure becomes ERROR (masked), reported in detail
        tb = traceback.format_exception_only(type(e), e)[-1].strip()
        return ("error", tb[:500])
