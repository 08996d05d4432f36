"""`Run`: everything one training run of the loop (loop.py) holds, built whole by its `_setup`.

The algorithm's hooks never see it (they get a `Learner`, algorithm.py); the loop's steps and the run's checkpoint
(run_checkpoint.py) read it. Not here: building it (loop._setup), any step of the loop.
"""
from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from typing import Any, Callable

import verifiers
from curricula import Ledger, UniformSampler

from ..config.sections import Config, RLConfig
from ..eval import held_out
from ..task.task import Task
from .algorithm import Learner, Net
from .distributed import NullWriter, Ranks
from .metrics import MetricsWriter
from .monitors import Monitors
from .pipeline import RoundPipeline
from .rounds import Rounds, WeightSync


@dataclass
class Run:
    """Everything one training run holds, built whole by `_setup`. The algorithm's hooks see only `learner`."""
    cfg: Config
    rl: RLConfig
    ranks: Ranks
    log: Callable[[str], None]
    task: Task  # rows, prompts and the reward
    learner: Learner  # what the algorithm's hooks get: the policy, its reference, the tokenizer, the reward
    nets: list[Net]  # the policy first, then any further trained model (PPO: the critic)
    states: dict[str, Any]  # the algorithm's checkpointed objects
    rounds: Rounds
    pool: verifiers.VerifierPool
    ledger: Ledger
    sampler: UniformSampler  # or a subclass: which prompts a round draws (curricula.make_sampler)
    rngs: dict[str, random.Random]  # every RNG a checkpoint holds; "shuffle" orders the minibatches
    evals: list[dict]  # the held-out rows scored every eval_every steps
    prompts_here: int  # this rank's share of prompts_per_step
    monitors: Monitors  # reward-hacking monitors
    weights: WeightSync  # which weights the engine holds
    provenance: dict  # verifier -> {version, options_hash}, stamped on every archived verdict
    pipeline: RoundPipeline | None = None  # max_staleness >= 1: the rounds requested ahead of the update
    writer: MetricsWriter | NullWriter | None = None  # opened by `_start`
    history: list[dict] = field(default_factory=list)

    @property
    def model(self) -> Any:
        return self.nets[0].module

    @property
    def tok(self) -> Any:
        return self.learner.tok

    def path(self, name: str) -> str:
        return os.path.join(self.cfg.output_dir, name)

    @property
    def metrics_path(self) -> str:
        return self.path("metrics.jsonl")

    @property
    def archive_path(self) -> str:
        return self.path("archive.jsonl")

    @property
    def logs(self) -> tuple[str, str]:
        """The files a checkpoint cuts back to its step on resume."""
        return self.metrics_path, self.archive_path

    def evaluate(self) -> dict[str, float]:
        """Held-out greedy scores through the task's outcome verifier (the reward's own check), as metrics:
        eval/accuracy, and its format / correctness split eval/parseable and eval/accuracy_parseable."""
        got = held_out.configured(self.cfg, self.task, self.model, self.tok, self.evals, self.pool, self.rl)
        return {f"eval/{k}": v for k, v in got.items()}
