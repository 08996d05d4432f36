"""GRPO: sample groups, verify them, keep the mixed ones, and climb the clipped surrogate.

What is GRPO's own (the loop, `loop.py`, does the rest):
  - the batch: A = group-normalised advantage (grpo / dr_grpo / rloo; docs/algorithms.md §grpo-advantages)
    over each group's scored samples, or per-step PRM advantages (§process); masked samples
    (TIMEOUT / ERROR / ABSTAIN) are left out of the loss entirely (`grpo_batch.make_batch`);
  - the update: the PPO-clip objective with eps_low / eps_high, token aggregation by `loss_type`
    (§aggregation), and an optional KL to the frozen reference in the loss (§kl), accumulated over
    length-bucketed micro-batches (`grpo_batch.update_minibatch`).

No critic: the group is the baseline, so the loop's curriculum keeps mixed groups (DAPO dynamic
sampling) by default. PPO with a critic is `ppo.py`.
"""
from __future__ import annotations

from typing import Callable

from ..configs import Config
from ..types import Group
from . import loop
from .distributed import zero_loss
from .grpo_batch import GRPOBatch, make_batch, update_minibatch

__all__ = ["GRPO", "train_grpo"]


class GRPO:
    name = "grpo"

    def setup(self, run: loop.Run):
        return [], {}  # no further model: the group is the baseline

    def make_batch(self, run: loop.Run, groups: list[Group], m: dict) -> GRPOBatch | None:
        return make_batch(groups, run.rounds.reward, run.tok, run.rl, run.model.device) if groups else None

    def minibatch(self, run: loop.Run, batch: GRPOBatch, idx) -> dict[str, float]:
        return update_minibatch(run.policy, run.ref, run.ranks, run.rl, run.cfg.generation, batch, idx)

    def touch(self, run: loop.Run) -> None:
        zero_loss(run.policy, run.tok.bos_token_id)

    def after_update(self, run: loop.Run, m: dict) -> None:
        pass


def train_grpo(cfg: Config, log: Callable[[str], None] = print, on_step: Callable[[dict], None] | None = None,
               resume: bool = False):
    """Run GRPO as configured (section `grpo`). Returns (history, model, tokenizer).

    resume: continue from `output_dir/checkpoint` (the same trajectory as an uninterrupted run)."""
    return loop.train(cfg, GRPO(), log, on_step, resume)
