"""Refill: when filtering leaves a batch short, generate more groups until it is full.

`fill_batch` draws prompts, generates and verifies a group for each, keeps the groups the
filter keeps, and repeats for at most `max_extra_rounds` more rounds (and, given one, a time budget). It reports the
yield (kept / generated groups) and the extra generation cost, so a run can see how much
compute the filter costs. Generation and verification are the caller's: pass functions.

Standard library only.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Sequence

from reasoning_rl.types import Group


@dataclass(frozen=True)
class RefillStats:
    generated_groups: int
    kept_groups: int
    extra_generation_rounds: int
    full: bool

    @property
    def yield_(self) -> float:
        return self.kept_groups / self.generated_groups if self.generated_groups else 0.0

    def metrics(self) -> dict[str, float]:
        return {"curriculum/yield": self.yield_, "curriculum/extra_generation_rounds": self.extra_generation_rounds,
                "curriculum/generated_groups": self.generated_groups, "curriculum/batch_full": float(self.full)}


def fill_batch(draw: Callable[[int], Sequence[str]], generate: Callable[[Sequence[str]], list[Group]],
               keep: Callable[[Group], bool], batch_size: int, max_extra_rounds: int = 2,
               oversample: float = 1.0, max_seconds: float = 0.0,
               clock: Callable[[], float] = time.monotonic) -> tuple[list[Group], RefillStats]:
    """Up to `batch_size` kept groups. Round 0 draws `batch_size` prompts; each extra round draws
    ceil(oversample * missing) more. Stops when full, after `max_extra_rounds` extra rounds, or (max_seconds > 0)
    once the rounds so far have taken `max_seconds`."""
    if batch_size < 1:
        raise ValueError(f"fill_batch: batch_size must be >= 1, got {batch_size}")
    if max_extra_rounds < 0 or oversample < 1.0:
        raise ValueError("fill_batch: max_extra_rounds must be >= 0 and oversample >= 1")
    kept: list[Group] = []
    generated = 0
    rounds = 0
    want = batch_size
    t0 = clock()
    while True:
        prompts = list(draw(want))
        if not prompts:
            break
        groups = generate(prompts)
        generated += len(groups)
        kept.extend(g for g in groups if keep(g))
        if len(kept) >= batch_size or rounds >= max_extra_rounds or max_seconds and clock() - t0 >= max_seconds:
            break
        rounds += 1
        want = max(1, math.ceil((batch_size - len(kept)) * oversample))
    full = len(kept) >= batch_size
    return kept[:batch_size], RefillStats(generated, min(len(kept), batch_size), rounds, full)
