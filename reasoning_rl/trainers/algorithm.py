"""What an RL algorithm plugs into the shared loop (`loop.py`), and what its hooks are given.

    Algorithm            the five hooks GRPO (grpo.py) and PPO (ppo.py) implement
    Learner              what every hook gets: the models, the tokenizer, the ranks, the reward, the configs
    Net                  a trained module with its optimiser and scheduler (the policy; PPO's critic)
    adamw(module, ...)   the optimiser and warm-up schedule every Net uses

Hooks return their metrics; they never see the loop's own state (the rounds, the ledger, the archive,
the writer). Not here: the loop itself, any algorithm's maths.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import torch

import verifiers

from ..config.sections import GenerationConfig, RLConfig
from ..models.optim import adamw as fused_adamw
from .distributed import Ranks


@dataclass
class Net:
    """A trained module with its optimiser, scheduler and the metric name of its gradient norm; `name` keys its
    states in a checkpoint (`critic`, `critic_opt`, `critic_sched`)."""
    name: str
    module: Any  # the model itself (saved, evaluated)
    wrapped: Any  # what forward/backward runs through: DDP under a launcher, else the module
    opt: Any
    sched: Any
    grad_metric: str


@dataclass(frozen=True)
class Learner:
    """What an algorithm's hooks are given."""
    rl: RLConfig  # the algorithm's own config section (grpo / ppo)
    generation: GenerationConfig  # how the samples were drawn (temperature, max_tokens)
    policy: Net  # the trained policy: `.module` the model, `.wrapped` what forward/backward runs through
    ref: Any  # the frozen reference policy, or None when beta = 0
    tok: Any  # the tokenizer
    ranks: Ranks  # this process's rank, gather / no_sync / wrap
    reward: verifiers.Reward  # the reward's terms and its outcome verifier
    share_prompts: bool = False  # the update runs each group's prompt once (rl.share_prompt_pass, for this model)

    @property
    def model(self) -> Any:
        return self.policy.module

    @property
    def temperature(self) -> float:
        """The sampling temperature the log-probs are taken at (greedy sampling counts as 1)."""
        return self.generation.temperature or 1.0


class Algorithm(Protocol):
    name: str  # the config section and the run directory's prefix

    def setup(self, learner: Learner) -> tuple[list[Net], dict[str, Any]]:
        """Further trained models (PPO: the critic) and the objects a checkpoint holds for the algorithm."""

    def make_batch(self, learner: Learner, groups: list) -> tuple[Any, dict[str, float]]:
        """Verified groups -> (a batch with advantages, or None; metrics). Called on every rank, also one with
        no groups."""

    def minibatch(self, learner: Learner, batch: Any, idx: torch.Tensor) -> dict[str, float]:
        """The gradient of the rows `idx` of `batch` (backward only; the loop steps the optimisers)."""

    def passes(self, learner: Learner, batch: Any, idx: torch.Tensor) -> int:
        """How many forward/backward passes `minibatch` runs for these rows (its micro-batches), known before it
        runs: under FSDP2 each is a collective, and the loop pads every rank to the busiest rank's count."""

    def touch(self, learner: Learner) -> None:
        """A zero-loss backward through every DDP module (a rank with no rows this minibatch)."""

    def after_update(self, learner: Learner, metrics: dict[str, float]) -> dict[str, float]:
        """Anything after a round's update, given its metrics; returns metrics to add."""


def adamw(module, lr: float, warmup_steps: int):
    """AdamW over `module`'s trainable parameters, with a linear warm-up of `warmup_steps`; fused where the
    parameters allow it (models/optim.py)."""
    params = [p for p in module.parameters() if p.requires_grad]  # with LoRA: the adapters alone
    opt = fused_adamw(params, lr=lr, betas=(0.9, 0.99), weight_decay=0.0)
    return opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / max(1, warmup_steps)))
