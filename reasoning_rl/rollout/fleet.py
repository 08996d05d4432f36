"""A fleet of inference servers behind one engine: `grpo.engine_url` with several URLs (data-parallel inference on
other nodes, as TRL's `vllm-serve`, prime-rl and verl lay a cluster out).

    engine = FleetEngine([OpenAIEngine(url, ...) for url in urls])
    engine.generate(prompts, n, sampling)   # groups spread over the servers, a group never split
    engine.update_weights(model)            # written once, pushed to every server, each within its deadline
    engine.metrics()                        # fleet/<i>/share, fleet/<i>/latency_s of the last call

Spreading: the prompts of a call are dealt to the servers in turn (prompt i to server i mod S), each server's share
sent at its own bounded concurrency, all servers at once; a group (one prompt's n samples) is one request, so it
never spans servers. Multi-turn continuations go to the server their episode started on (its prefix cache holds
the turns so far), by the episode's key. Every request has the engine's request deadline and every push the push
deadline (openai.py): a server that stops answering ends the call with one line naming it and what it was doing,
never a wait without end; the run stops there, its last checkpoint intact.

Not here: balancing by measured speed (the share is even), adding or removing servers during a run.
"""
from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

from ..types import Group
from .base import PromptRow, SamplingConfig, as_rows
from .openai import OpenAIEngine, RolloutError


class FleetEngine:
    def __init__(self, servers: Sequence[OpenAIEngine]) -> None:
        if not servers:
            raise ValueError("fleet engine: no servers")
        self.servers = list(servers)
        self._last: dict[str, float] = {}

    @property
    def last_push_s(self) -> float:
        return max(s.last_push_s for s in self.servers)

    def update_weights(self, model) -> None:
        """The weights written once (the first server's weights_dir, which every server must read), then pushed to
        each server at once; the first failure (named) is raised after all have finished or failed."""
        path = self.servers[0].write_weights(model)
        with ThreadPoolExecutor(max_workers=len(self.servers)) as ex:
            futures = [ex.submit(s.update_weights, model, path) for s in self.servers]
        errors = [f.exception() for f in futures if f.exception() is not None]
        if errors:
            raise errors[0]

    def generate(self, prompts: Sequence[PromptRow | dict | str], n: int, sampling: SamplingConfig) -> list[Group]:
        rows = as_rows(prompts)
        S = len(self.servers)
        out = self._spread([i % S for i in range(len(rows))],  # prompt i -> server i mod S
                           lambda server, idx: server.generate([rows[i] for i in idx], n, sampling))
        return [g for g in out if g is not None]

    def continue_ids(self, seqs: Sequence[Sequence[int]], max_new: int, stops: Sequence[int], sampling: SamplingConfig,
                     seeds: Sequence[int] | None = None, keys: Sequence | None = None) -> list:
        """Each sequence continued on the server its episode's key maps to (else spread by position)."""
        S = len(self.servers)
        home = [int(hashlib.sha256(repr(k).encode()).hexdigest()[:8], 16) % S if keys is not None else i % S
                for i, k in enumerate(keys if keys is not None else range(len(seqs)))]
        return self._spread(home, lambda server, idx: server.continue_ids(
            [seqs[i] for i in idx], max_new, stops, sampling, [seeds[i] for i in idx] if seeds else None))

    def _spread(self, home: list[int], call) -> list:
        """Item i sent to server home[i], every server's items in one `call(server, indices)` at once, the results
        back in the items' order (None where a call returned fewer); each server's share and latency noted."""
        S = len(self.servers)
        dealt = [[i for i in range(len(home)) if home[i] == k] for k in range(S)]
        before = [s.busy_s for s in self.servers]
        with ThreadPoolExecutor(max_workers=S) as ex:
            parts = list(ex.map(lambda k: call(self.servers[k], dealt[k]) if dealt[k] else [], range(S)))
        out: list = [None] * len(home)
        for k, part in enumerate(parts):
            for i, r in zip(dealt[k], part):
                out[i] = r
        self._note(dealt, before, len(home))
        return out

    def _note(self, dealt: list[list[int]], before: list[float], total: int) -> None:
        self._last = {}
        for k, s in enumerate(self.servers):
            self._last[f"fleet/{k}/share"] = len(dealt[k]) / max(1, total)
            self._last[f"fleet/{k}/latency_s"] = (s.busy_s - before[k]) / max(1, len(dealt[k]))

    def metrics(self) -> dict[str, float]:
        """Each server's share of the last call's requests and its mean seconds per request."""
        return dict(self._last)

    def forget(self, keys) -> None:
        pass


__all__ = ["FleetEngine", "RolloutError"]
