"""Rounds requested ahead of the update: with `max_staleness` = k >= 1, round t+k is made while update t runs.

    pipe = RoundPipeline(rounds, sampler, n, k, seed, weights)
    pipe.prime(first, last, version, model, entries)  # before the first step: rounds not requested yet
    pipe.request(step, version, model, entries)       # the main thread, at fixed points of the loop (below)
    pipe.take(step) -> Round                          # waits for round `step` (generated and verified)
    pipe.state_dict() / load_state_dict(state)        # requested rounds travel in a checkpoint
    pipe.close()

The synchronous loop (k = 0) does not come here: it calls `Rounds.make` itself (loop.py). For k >= 1,
rounds 1..k are requested before step 1, from the initial weights. At step t the loop takes round t,
writes its ledger rows, requests round t+k from the weights after update t-1, then runs update t while
the producer thread generates and verifies round t+k. A sample trained at step t is then exactly
min(k, t-1) updates stale.
A request fixes everything its round depends on when it is made: the weights (a CPU copy, pushed to
the engine before the round generates, only when they changed), the ledger's pass rates (a frozen copy
for the sampler), and the seed of every generation call (from the run's seed and the step). So the
trajectory does not depend on how the two threads interleave, and a resumed run continues it. Every
sample carries the version of the weights that sampled it (`Sample.weight_version`). The producer is
one thread: rounds are made in the order requested, and the sampler's RNG is drawn in that order.
Verification shares the run's verifier pool, which takes one batch at a time.
Not here: an engine that shares the trainer's weights (hf), several producers, several ranks.
"""
from __future__ import annotations

import concurrent.futures
import copy
from dataclasses import dataclass
from typing import Any

from ..types import Group
from .rounds import Round, Rounds, WeightSync, round_seed


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
    """A model's weights at one version, as `update_weights` reads a model: `config`, `state_dict()`, `parameters()`."""
    config: Any
    state: dict

    def state_dict(self) -> dict:
        return self.state

    def parameters(self):
        """Its tensors (what `openai.push_deadline` sizes a push by)."""
        return iter(self.state.values())


class RoundPipeline:
    def __init__(self, rounds: Rounds, sampler, n: int, max_staleness: int, seed: int, weights: WeightSync) -> None:
        assert max_staleness >= 1, "the synchronous loop makes its rounds itself"
        self.rounds, self.sampler, self.n = rounds, sampler, n
        self.k, self.seed, self.weights = max_staleness, seed, weights
        self.futures: dict[int, concurrent.futures.Future] = {}
        self.producer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="rounds")

    def request(self, step: int, version: int, model, entries: dict) -> None:
        """Ask for round `step`, sampled from `model`, which has had `version` updates, drawing prompts by the
        ledger `entries` as they are now."""
        if step in self.futures:
            return
        snapshot = None
        if self.weights.due(version):  # a copy: the model changes while the round is made
            snapshot = _Snapshot(model.config, {name: t.detach().to("cpu", copy=True)
                                                for name, t in model.state_dict().items()})
        sampler = copy.copy(self.sampler)  # the same RNG, drawn in request order; the ledger as requested
        sampler.ledger = _FrozenLedger(entries)
        self.futures[step] = self.producer.submit(self.rounds.make, step, sampler, self.n,
                                                  self.weights.held(version), round_seed(self.seed, step), snapshot)

    def prime(self, first: int, last: int, version: int, model, entries: dict) -> None:
        """Request rounds first..first+k-1 (up to `last`) that are not requested yet, from `model`."""
        for step in range(first, min(last, first + self.k - 1) + 1):
            self.request(step, version, model, entries)

    def take(self, step: int) -> Round:
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

