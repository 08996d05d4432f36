"""`SandboxPool`: many programs at once on a bounded number of warm sandboxes.

Each worker slot owns one `Sandbox` (one zygote); `map` hands items to slots from a thread
pool, so at most `workers` programs run at any moment. A slot whose zygote died is
restarted by its next run. Results come back in input order.
"""
from __future__ import annotations

import os
import queue
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, TypeVar

from .client import Sandbox
from .limits import Limits, RunResult

T = TypeVar("T")


class SandboxPool:
    def __init__(self, workers: int | None = None, limits: Limits | dict | None = None,
                 allow_weak: bool | None = None, python: str | None = None, user: int | None = None,
                 packages: tuple[str, ...] | list = (), site: str | None = None) -> None:
        workers = workers if workers is not None else (os.cpu_count() or 1)
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"SandboxPool.workers must be a positive integer, got {workers!r}")
        self.workers = workers
        self.limits = Limits.of(limits)
        self._slots: queue.Queue[Sandbox] = queue.Queue()
        self._all = [Sandbox(self.limits, allow_weak, python=python, user=user, packages=packages, site=site)
                     for _ in range(workers)]
        for sb in self._all:
            self._slots.put(sb)
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sandbox")

    def start(self) -> dict:
        """Start every zygote now (else each starts on first use); return the isolation report."""
        reports = list(self._executor.map(lambda sb: sb.start(), self._all))
        return reports[0]

    def submit(self, fn: Callable[[Sandbox], T]):
        """Run `fn(sandbox)` on a free slot; returns a Future."""
        def task():
            sb = self._slots.get()
            try:
                return fn(sb)
            finally:
                self._slots.put(sb)
        return self._executor.submit(task)

    def map(self, fn: Callable[[Sandbox, T], object], items: Iterable[T]) -> list:
        futures = [self.submit(lambda sb, it=it: fn(sb, it)) for it in items]
        return [f.result() for f in futures]

    def run_many(self, programs: Iterable[tuple[str, str]], limits: Limits | dict | None = None) -> list[RunResult]:
        """Run each (code, stdin) pair; results in input order."""
        return self.map(lambda sb, p: sb.run(p[0], p[1], limits), programs)

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        for sb in self._all:
            sb.close()

    def __enter__(self) -> "SandboxPool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
