"""One round's rollouts: prompts -> sampled groups -> verified groups -> the batch an update trains on.

    Rounds.make(step, sampler, n, ...) -> Round
                                       push the weights if given, then DAPO dynamic sampling: generate,
                                       verify, keep mixed groups, refill; the round as a value
    WeightSync(push_every, ...)        which weights the engine holds, and when to push new ones
    round_metrics(groups, ...)         reward, masking, group mix, lengths and sandbox use of a round

Generation of a round is cut into `rollout_chunks`; each chunk is verified on a background
thread while the next is generated. Every verified group of the round (kept or not) goes to
the ledger and the archive; only the kept ones reach the update.
Not here: tensors, losses or the optimiser (the algorithms), the loop itself (loop.py).
"""
from __future__ import annotations

import concurrent.futures
import dataclasses
import itertools
import random
import time
import weakref
from dataclasses import dataclass

import verifiers
from curricula import RefillStats, apply_filters, fill_batch, group_stats

from ..config.sections import RLConfig
from ..rollout import SamplingConfig
from ..task.task import Task
from ..types import Group


def shuffle_verdicts(groups: list[Group], rng: random.Random) -> list[Group]:
    """The `shuffled_rewards` control: every sample gets the verdicts of a random sample of the round, so the
    rewards keep their distribution but say nothing about the completion they are attached to."""
    verdicts = [s.verdicts for g in groups for s in g.samples]
    rng.shuffle(verdicts)
    it = iter(verdicts)
    return [Group(g.prompt_id, g.prompt, g.row, [s.with_verdicts(next(it)) for s in g.samples]) for g in groups]


@dataclass
class Round:
    """One round as it was made: the kept groups (what the update trains on), every generated group (the ledger's
    and the archive's), the refill's stats, its seconds (rollout, verify, verify_busy, push), the seed of its
    generation calls and how many calls it made. The weights' version is on every sample."""
    step: int
    kept: list[Group]
    generated: list[Group]
    refill: RefillStats
    timing: dict[str, float]
    seed: int | None
    calls: int


def round_seed(seed: int, step: int) -> int:
    """The seed of round `step`'s generation calls: a function of the run's seed (plus the rank) and the step
    alone, so a round's samples do not depend on when or on which thread it was made."""
    return seed * 1_000_003 + step


class WeightSync:
    """Which weights the engine holds. The hf engine samples from the trained model itself (`shares`); another
    engine gets the trainer's weights pushed before a round from a newer version, every `push_every` updates.
    A resumed run starts at version -1 (unknown): its first round pushes."""

    def __init__(self, shares: bool, push_every: int = 1, version: int = 0) -> None:
        self.shares, self.push_every, self.version = shares, push_every, version

    def due(self, version: int) -> bool:
        """Whether a round from weights that have had `version` updates needs them pushed first (and, if so,
        records that the engine then holds them)."""
        if self.shares or version == self.version:
            return False
        if version % self.push_every != 0 and self.version >= 0:
            return False  # push_every > 1 skips pushes (the engine samples from older weights)
        self.version = version
        return True

    def held(self, version: int) -> int:
        """The version a round's samples come from when the trainer is at `version`."""
        return version if self.shares else self.version


class Rounds:
    """Generates and verifies rounds for one rank."""

    def __init__(self, rl: RLConfig, gen: SamplingConfig, engine, task: Task, reward, pool, rows_by_id: dict,
                 control_rng: random.Random) -> None:
        self.rl, self.sampling, self.engine, self.reward, self.pool = rl, gen, engine, reward, pool
        self.task = task
        self.rows_by_id, self.control_rng = rows_by_id, control_rng
        self.verifying = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="verify")

    def keep(self, group: Group) -> bool:
        """DAPO dynamic sampling on the outcome's pass/fail."""
        return not self.rl.filter_mixed or bool(apply_filters([group], self.reward.outcome, ["mixed"])[0])

    def _verify(self, groups: list[Group], timing: dict[str, float]) -> list[Group]:  # on the verification thread
        t0 = time.perf_counter()
        out = self.task.verify_groups(self.reward, groups, self.pool)
        timing["verify_busy"] += time.perf_counter() - t0
        return out

    def _generate(self, prompt_ids, version: int, seed: int | None, calls, timing: dict[str, float]) -> list[Group]:
        """One generation pass over `prompt_ids` in `rollout_chunks` chunks, each verified on the verification thread
        while the next generates; time/verify counts only the wait after the last chunk (what generation did not
        hide). `calls` numbers the generation calls of the round (each gets its own seed)."""
        rows = [dict(self.rows_by_id[p], prompt_id=p) for p in prompt_ids]
        size = -(-len(rows) // max(1, min(self.rl.rollout_chunks, len(rows))))
        futures = []
        for i in range(0, len(rows), size):
            sampling = self.sampling
            call = next(calls)
            if seed is not None:  # a seed per call: the samples do not depend on which thread ran first
                sampling = dataclasses.replace(sampling, seed=random.Random(f"{seed}:{call}").getrandbits(31))
            t0 = time.perf_counter()
            chunk = self.engine.generate(rows[i:i + size], self.rl.group_size, sampling)
            timing["rollout"] += time.perf_counter() - t0
            chunk = [Group(g.prompt_id, g.prompt, g.row,
                           [dataclasses.replace(x, weight_version=version) for x in g.samples]) for g in chunk]
            futures.append(self.verifying.submit(self._verify, chunk, timing))
        t1 = time.perf_counter()
        groups = [grp for f in futures for grp in f.result()]
        timing["verify"] += time.perf_counter() - t1
        if self.rl.control == "shuffled_rewards":
            groups = shuffle_verdicts(groups, self.control_rng)
        return groups

    def make(self, step: int, sampler, n: int, version: int = 0, seed: int | None = None, weights=None) -> Round:
        """Round `step` of `n` prompts on this rank, sampled by weights that have had `version` updates: `weights`
        (a model or a snapshot of one) are pushed to the engine first when given; the sampler draws the prompts
        (refilled while groups are unmixed, up to max_refill_rounds); `seed` seeds each generation call (None:
        the engine's own RNG)."""
        timing = {"rollout": 0.0, "verify": 0.0, "verify_busy": 0.0}
        if weights is not None:
            t0 = time.perf_counter()
            self.engine.update_weights(weights)
            timing["push"] = time.perf_counter() - t0
        generated: list[Group] = []
        calls = itertools.count()

        def generate(prompt_ids) -> list[Group]:
            groups = self._generate(prompt_ids, version, seed, calls, timing)
            generated.extend(groups)
            return groups

        kept, refill = fill_batch(sampler.sample, generate, self.keep, n,
                                  self.rl.max_refill_rounds if self.rl.filter_mixed else 0,
                                  max_seconds=self.rl.refill_seconds)
        return Round(step, kept, generated, refill, timing, seed, next(calls))

    def close(self) -> None:
        self.verifying.shutdown(wait=True)
        if hasattr(self.engine, "close"):  # an engine with a process of its own (worker)
            self.engine.close()


class SandboxTally:
    """Counts each sandboxed verdict (one whose metrics say it ran programs) once: a cache hit or a repeat of a
    program already counted is not new work. Rounds whose verifiers ran no sandbox report nothing."""

    def __init__(self) -> None:
        self.counted = weakref.WeakValueDictionary()  # id -> verdict already in some round's totals

    def metrics(self, groups: list[Group]) -> dict[str, float]:
        fresh, sandboxed = [], False
        for v in (v for g in groups for s in g.samples for v in s.verdicts.values()):
            if "sandbox_runs" not in v.metrics and "sandbox_wall_s" not in v.metrics:
                continue
            sandboxed = True
            if id(v) not in self.counted:
                self.counted[id(v)] = v
                fresh.append(v.metrics)
        if not sandboxed:
            return {}
        levels = [v["sandbox_level"] for v in fresh if "sandbox_level" in v]
        return {**({"sandbox/level": min(levels)} if levels else {}), "sandbox/programs": len(fresh),
                "sandbox/wall_s": sum(v.get("sandbox_wall_s", 0.0) for v in fresh),
                "sandbox/runs": sum(v.get("sandbox_runs", 0) for v in fresh),
                "sandbox/leftover_processes": sum(v.get("leftover_processes", 0) for v in fresh)}


def round_metrics(generated: list[Group], reward: verifiers.Reward) -> dict[str, float]:
    """What every round reports about its verified groups (all ranks'): scores, masking, mix and lengths."""
    m = group_stats(generated, reward.outcome, reward=lambda s: reward.combine(s.verdicts))
    samples = [s for g in generated for s in g.samples]
    scores = [reward.combine(s.verdicts) for s in samples]
    scored = [x for x in scores if x is not None]
    mean = sum(scored) / len(scored) if scored else 0.0
    m["reward/mean"] = mean
    m["reward/std"] = (sum((x - mean) ** 2 for x in scored) / len(scored)) ** 0.5 if scored else 0.0
    m["verify/masked"] = len(scores) - len(scored)
    for t in reward.terms:  # each term's own score, so a plugin or format term can be watched on its own
        own = [s.verdicts[t.verifier] for s in samples if not s.verdicts[t.verifier].masked]
        if own:
            m[f"reward/term/{t.verifier}"] = sum(v.score for v in own) / len(own)
            if t.verifier != reward.outcome:  # a rule's term (format, length, a plugin): how many broke it
                m[f"reward/broken/{t.verifier}"] = sum(not v.passed for v in own) / len(own)
    m["completions/mean_length"] = sum(len(s.token_ids) for s in samples) / max(1, len(samples))
    m["completions/clipped_ratio"] = sum(s.truncated for s in samples) / max(1, len(samples))
    if any(s.turns for s in samples):  # multi-turn episodes: how the tool was used
        from ..rollout.episodes import episode_metrics

        m.update(episode_metrics(samples))
    return m
