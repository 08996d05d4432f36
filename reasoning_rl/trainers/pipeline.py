"""Rounds requested ahead of the update: with `max_staleness` = k, round t+k is generated while update t runs.

    pipe = RoundPipeline(rounds, sampler, n, k, seed, push_every)
    pipe.prime(first, last, version, model, entries)  # before the first step: rounds not requested yet
    pipe.request(step, version, model, entries)       # the main thread, at fixed points of the loop (below)
    pipe.take(step) -> RoundResult                    # waits for round `step` (generated and verified)
    pipe.state_dict() / load_state_dict(state)        # requested rounds travel in a checkpoint
    pipe.close()

The schedule (loop.py), for step t:
  k = 0   request(t) then take(t): round t is sampled from the weights after update t-1, made by the same
          code on the calling thread (an in-process engine keeps its thread): the synchronous loop.
  k >= 1  rounds 1..k are requested before step 1, from the initial weights. At step t, take(t), write its
          ledger rows, then request(t+k) from the weights after update t-1, then run update t while a
          producer thread generates and verifies round t+k. A sample trained at step t is then exactly
          min(k, t-1) updates stale.
A request fixes everything its round depends on when it is made: the weights (for k >= 1 a CPU copy,
pushed to the engine before the round generates, only when they changed), the ledger's pass rates (a
frozen copy for the sampler), and the seed of every generation call (from the run's seed and the
step). So the trajectory does not depend on how the two threads interleave, and a resumed run
continues it. Every sample carries the version of the weights that sampled it (`Sample.weight_version`).
The producer is one thread: rounds are made in the order requested, and the sampler's RNG is drawn
in that order. Verification shares the run's verifier pool, which takes one batch at a time.
Not here: k >= 1 with an engine that shares the trainer's weights (hf), several producers, several ranks.
"""
from __future__ import annotations

import concurrent.futures
import copy
import time
from dataclasses import dataclass
from typing import Any

from curricula import RefillStats

from ..types import Group
from .rounds import Rounds


@dataclass
class RoundResult:
    """One round as the producer made it: kept groups, every generated group, refill stats, seconds. (The weights'
    version is on every sample.)"""
    step: int
    batch: list[Group]
    generated: list[Group]
    refill: RefillStats
    timing: dict[str, float]


class _FrozenLedger:
    """The ledger's entries as they were when a round was requested: what its sampler draws from."""

    def __init__(self, entries: dict) -> None:
        self._entries = entries

    def entries(self, prompt_ids=None) -> dict:
        if prompt_ids is None:
            return dict(self._entries)
        return {p: self._entries[p] for p in prompt_ids if p in self._entries}


@dataclass
class _Snapshot:
    """A model's weights at one version, as `update_weights` reads a model: `config` and `state_dict()`."""
    config: Any
    state: dict

    def state_dict(self) -> dict:
        return self.state


class RoundPipeline:
    def __init__(self, rounds: Rounds, sampler, n: int, max_staleness: int, seed: int, push_every: int = 1,
                 shares_weights: bool = False, version: int = 0) -> None:
        self.rounds, self.sampler, self.n = rounds, sampler, n
        self.k, self.seed, self.push_every = max_staleness, seed, push_every
        self.shares_weights = shares_weights  # the hf engine samples from the trained model itself
        self.engine_version = version  # the version the engine holds once every request so far has run
        self.futures: dict[int, concurrent.futures.Future] = {}
        self.producer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rounds")

    def _round_seed(self, step: int) -> int:
        return self.seed * 1_000_003 + step

    def request(self, step: int, version: int, model, entries: dict) -> None:
        """Ask for round `step`, sampled from `model`, which has had `version` updates, drawing prompts by the
        ledger `entries` as they are now."""
        if step in self.futures:
            return
        weights = None
        # push_every > 1 (synchronous only) skips pushes; a resumed run (engine_version -1) pushes at once
        due = version % self.push_every == 0 or self.engine_version < 0
        if not self.shares_weights and version != self.engine_version and due:
            # k = 0: the model does not change before the round is made (the main thread waits for it)
            weights = model if self.k == 0 else _Snapshot(model.config, {
                name: t.detach().to("cpu", copy=True) for name, t in model.state_dict().items()})
            self.engine_version = version
        used = version if self.shares_weights else self.engine_version
        if self.k == 0:  # made here, now: engines that compute in this process (hf, vllm) stay on its main thread
            done: concurrent.futures.Future = concurrent.futures.Future()
            done.set_result(self._make(step, used, weights, _FrozenLedger(entries)))
            self.futures[step] = done
            return
        self.futures[step] = self.producer.submit(self._make, step, used, weights, _FrozenLedger(entries))

    def prime(self, first: int, last: int, version: int, model, entries: dict) -> None:
        """k >= 1: request rounds first..first+k-1 (up to `last`) that are not requested yet, from `model`."""
        for step in range(first, min(last, first + self.k - 1) + 1):
            self.request(step, version, model, entries)

    def _make(self, step: int, version: int, weights, ledger: _FrozenLedger) -> RoundResult:  # producer (k >= 1)
        t0 = time.perf_counter()
        push = 0.0
        if weights is not None:
            self.rounds.engine.update_weights(weights)
            push = time.perf_counter() - t0
        sampler = copy.copy(self.sampler)  # the same RNG, drawn in request order; the ledger as requested
        sampler.ledger = ledger
        batch, generated, refill = self.rounds.fill(sampler, self.n, version, self._round_seed(step))
        timing = dict(self.rounds.timing, push=push) if weights is not None else dict(self.rounds.timing)
        return RoundResult(step, batch, generated, refill, timing)

    def take(self, step: int) -> RoundResult:
        """Round `step`, waiting for it if it is still being made; its error, if making it failed."""
        if step not in self.futures:
            raise RuntimeError(f"round {step} was never requested (rounds pending: {sorted(self.futures)})")
        return self.futures.pop(step).result()

    def drain(self) -> None:
        """Wait until every requested round is made (before a checkpoint reads the RNGs the producer draws)."""
        for f in list(self.futures.values()):
            f.result()

    def state_dict(self) -> dict:
        self.drain()
        return {"pending": [self.futures[s].result() for s in sorted(self.futures)]}

    def load_state_dict(self, state: dict) -> None:
        for r in state["pending"]:
            done: concurrent.futures.Future = concurrent.futures.Future()
            done.set_result(r)
            self.futures[r.step] = done

    def close(self) -> None:
        """Stop after the round being made (rounds not yet started are dropped)."""
        self.producer.shutdown(wait=True, cancel_futures=True)


def staleness_metrics(generated: list[Group], step: int) -> dict[str, float]:
    """rollout/staleness (mean over the round's samples) and rollout/staleness_max: updates the sampling weights
    were behind the weights being trained at `step`."""
    lags = [step - 1 - s.weight_version for g in generated for s in g.samples if s.weight_version is not None]
    if not lags:
        return {}
    return {"rollout/staleness": sum(lags) / len(lags), "rollout/staleness_max": float(max(lags))}

