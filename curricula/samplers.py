"""Prompt samplers: uniform, weighted toward the mixed band, and easy-first (docs/algorithms.md §curriculum).

mixed_band weighs prompt i by w_i = max(floor, 1 - p_i^G - (1 - p_i)^G): the probability
that a group of G samples comes back mixed and so carries a GRPO signal. p_i is the
ledger's EMA pass rate, shrunk toward a prior for prompts with few attempts:
p_i = (passes + prior * prior_strength) / (attempts + prior_strength) blended with the EMA.
Unseen prompts get the prior's weight. Retired prompts (solved k times in a row, see the
ledger) are not drawn until revived. Both samplers are deterministic given the seed.

Standard library only.
"""
from __future__ import annotations

import math
import random
from typing import Sequence

from .ledger import Entry, Ledger
from .signal import p_mixed


class UniformSampler:
    name = "uniform"

    def __init__(self, prompt_ids: Sequence[str], seed: int = 0, ledger: Ledger | None = None) -> None:
        if not prompt_ids:
            raise ValueError("sampler: no prompts to sample from")
        self.prompt_ids = list(prompt_ids)
        self.rng = random.Random(seed)
        self.ledger = ledger

    def weights(self) -> dict[str, float]:
        retired = {k for k, e in self._entries().items() if e.retired}
        return {p: (0.0 if p in retired else 1.0) for p in self.prompt_ids}

    def _entries(self) -> dict[str, Entry]:
        return self.ledger.entries() if self.ledger is not None else {}

    def probabilities(self) -> dict[str, float]:
        w = self.weights()
        total = sum(w.values())
        if total <= 0:
            raise ValueError("sampler: every prompt is retired; revive some or lower retire_after")
        return {k: v / total for k, v in w.items()}

    def sample(self, k: int, replace: bool = False) -> list[str]:
        """k prompt ids; without replacement by weighted reservoir keys u^(1/w) (Efraimidis-Spirakis)."""
        w = self.weights()
        ids = [p for p in self.prompt_ids if w[p] > 0]
        if not ids:
            raise ValueError("sampler: every prompt is retired; revive some or lower retire_after")
        if replace:
            return self.rng.choices(ids, weights=[w[p] for p in ids], k=k)
        keys = sorted(ids, key=lambda p: -math.log(self.rng.random() or 1e-300) / w[p])
        return keys[:min(k, len(keys))]


class MixedBandSampler(UniformSampler):
    name = "mixed_band"

    def __init__(self, prompt_ids: Sequence[str], G: int, seed: int = 0, ledger: Ledger | None = None,
                 prior: float = 0.5, prior_strength: float = 0.5, floor: float = 0.02) -> None:
        super().__init__(prompt_ids, seed, ledger)
        if G < 2:
            raise ValueError(f"mixed_band: G must be >= 2 (a group of one is never mixed), got {G}")
        if not 0 <= prior <= 1 or prior_strength < 0 or not 0 < floor <= 1:
            raise ValueError("mixed_band: need 0 <= prior <= 1, prior_strength >= 0, 0 < floor <= 1")
        self.G, self.prior, self.prior_strength, self.floor = G, prior, prior_strength, floor

    def estimate(self, e: Entry | None) -> float:
        if e is None or e.attempts == 0:
            return self.prior
        shrunk = (e.passes + self.prior * self.prior_strength) / (e.attempts + self.prior_strength)
        return shrunk if e.ema is None else 0.5 * (shrunk + e.ema)

    def weights(self) -> dict[str, float]:
        entries = self._entries()
        out = {}
        for p in self.prompt_ids:
            e = entries.get(p)
            out[p] = 0.0 if (e is not None and e.retired) else max(self.floor, p_mixed(self.estimate(e), self.G))
        return out


class EasyFirstSampler(MixedBandSampler):
    """mixed_band within a window of the easiest prompts by a prior difficulty (lower = easier, given before any
    sampling: a solution's steps, a level column, a probe's pass rate), which doubles each time its prompts' pooled
    pass rate reaches `widen_at` (once each has `min_attempts` attempts): a model that passes 1% of a data set still
    finds mixed groups among the easiest rows, and meets harder ones as it learns. The window is computed from the
    ledger each time (no state of its own), so a resumed run draws as the uninterrupted one."""
    name = "easy_first"

    def __init__(self, prompt_ids: Sequence[str], G: int, difficulty: dict[str, float], seed: int = 0,
                 ledger: Ledger | None = None, start: float = 0.05, widen_at: float = 0.3, **options) -> None:
        super().__init__(prompt_ids, G, seed, ledger, **options)
        missing = [p for p in self.prompt_ids if p not in difficulty]
        if missing:
            raise ValueError(f"easy_first: no difficulty for prompt {missing[0]!r} (and {len(missing) - 1} more)")
        self.order = sorted(self.prompt_ids, key=lambda p: (difficulty[p], p))  # easiest first; ties by id
        self.start = max(1, min(len(self.order), math.ceil(start * len(self.order))))
        self.widen_at, self.min_attempts = widen_at, G

    def window(self) -> int:
        """How many of the easiest prompts are drawn from now: `start`, doubled while the current window's pooled
        pass rate (over its prompts with min_attempts attempts, all of them having that many) reaches widen_at."""
        entries, size = self._entries(), self.start
        while size < len(self.order):
            seen = [entries.get(p) for p in self.order[:size]]
            if any(e is None or e.attempts < self.min_attempts for e in seen):
                break
            passes, attempts = sum(e.passes for e in seen), sum(e.attempts for e in seen)
            if passes / attempts < self.widen_at:
                break
            size = min(len(self.order), 2 * size)
        return size

    def weights(self) -> dict[str, float]:
        inside = set(self.order[:self.window()])
        return {p: (w if p in inside else 0.0) for p, w in super().weights().items()}


def make_sampler(name: str, prompt_ids: Sequence[str], G: int, seed: int = 0, ledger: Ledger | None = None,
                 difficulty: dict[str, float] | None = None, **options) -> UniformSampler:
    if name == "uniform":
        return UniformSampler(prompt_ids, seed, ledger)
    if name == "mixed_band":
        return MixedBandSampler(prompt_ids, G, seed, ledger, **options)
    if name == "easy_first":
        if difficulty is None:
            raise ValueError("easy_first: needs each prompt's difficulty")
        return EasyFirstSampler(prompt_ids, G, difficulty, seed, ledger, **options)
    raise ValueError(f"unknown sampler {name!r}; valid: easy_first, mixed_band, uniform")
