"""Ctrl-C (SIGINT) and SIGTERM during training: the first asks the run to stop after the round in progress, the
second stops it at once.

    with stop_requests(log) as stop:   # the handlers, on the main thread of one process; restored after
        ...
        if stop.signal: ...             # the name of the first signal received, or None

    Interrupted(message)               what the trainer raises once it stopped cleanly; the CLI prints the message
                                       as its one line and exits 130

A second signal raises KeyboardInterrupt wherever the program is. Checkpoints are written atomically
(trainers/checkpoint.py), so even then nothing partial is left for a resume to read. Not here: where a run
may stop (the loop decides: after a round, with a checkpoint of it), other commands (for them Ctrl-C is a
plain KeyboardInterrupt, which the CLI also reports in one line with exit status 130; their results are written
whole or not at all by `run_dir.written_together`).
"""
from __future__ import annotations

import contextlib
import signal
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator


class Interrupted(KeyboardInterrupt):
    """A run stopped on request at a safe point; the message says where, and how to continue."""


@dataclass
class StopRequest:
    signal: str | None = None  # "SIGINT" or "SIGTERM" once one has arrived


@contextlib.contextmanager
def stop_requests(log: Callable[[str], None], enabled: bool = True, same_within_s: float = 0.0,
                  after: str = "the round in progress, with a checkpoint") -> Iterator[StopRequest]:
    """Within the block, the first SIGINT or SIGTERM is recorded (and said in one log line) instead of stopping the
    program; the second raises KeyboardInterrupt. A signal within `same_within_s` seconds of the first counts as
    the same one: under a launcher a terminal's Ctrl-C reaches each rank twice, once from the terminal and once
    forwarded by the launcher. Off the main thread, or not `enabled`, the handlers stay as they were.

    Nested (a command that runs others: `recipe` runs a training, then an evaluation), the inner block shares the
    outer one's request: a signal that came before the inner block began stops it at its first safe point, and one
    that comes within it is seen by the outer block too."""
    request = _ACTIVE[-1] if _ACTIVE else StopRequest()
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield request
        return
    first = [0.0]

    def handler(signum, frame) -> None:
        if request.signal is not None:
            if time.monotonic() - first[0] < same_within_s:
                return
            raise KeyboardInterrupt
        request.signal = signal.Signals(signum).name
        first[0] = time.monotonic()
        log(f"{request.signal}: stopping after {after}; a second signal stops at once")

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    _ACTIVE.append(request)
    try:
        yield request
    finally:
        _ACTIVE.pop()
        for s, h in previous.items():
            signal.signal(s, h)


_ACTIVE: list[StopRequest] = []  # the requests of the blocks open now, outermost first (main thread only)
