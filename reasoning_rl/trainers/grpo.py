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

import dataclasses
from typing import Callable

import torch

from ..config.sections import Config
from ..algos.losses import entropy_coef_update
from ..types import Group
from . import loop
from .algorithm import Learner, Net
from .distributed import zero_loss
from .grpo_batch import GRPOBatch, live_rows, make_batch, micro_batches, update_minibatch
from .offpolicy import correct_batch

__all__ = ["GRPO", "train_grpo"]


class EntropyCoef:
    """The entropy bonus's coefficient, adapted towards grpo.entropy_target (checkpointed with the run)."""

    def __init__(self, coef: float) -> None:
        self.coef = coef

    def state_dict(self) -> dict:
        return {"coef": self.coef}

    def load_state_dict(self, state: dict) -> None:
        self.coef = state["coef"]


class GRPO:
    name = "grpo"

    def setup(self, learner: Learner) -> tuple[list[Net], dict]:
        self.ent = EntropyCoef(learner.rl.entropy_coef)
        return [], ({"entropy_coef": self.ent} if learner.rl.entropy_coef else {})  # no critic: the group is the baseline

    def make_batch(self, learner: Learner, groups: list[Group]) -> tuple[GRPOBatch | None, dict[str, float]]:
        if not groups:
            return None, {}
        batch, m = make_batch(groups, learner.reward, learner.tok, learner.rl, learner.model.device,
                              max_len=learner.generation.max_tokens)
        if batch is not None:  # engines that are not the trainer: its own pi_old and the importance weights
            tokens, w, metrics = correct_batch(learner, batch.tokens)
            batch = dataclasses.replace(batch, tokens=tokens, is_weight=w)
            m.update(metrics)
        return batch, m

    def minibatch(self, learner: Learner, batch: GRPOBatch, idx) -> dict[str, float]:
        metrics = update_minibatch(learner.policy.wrapped, learner.ref, learner.ranks, learner.rl, learner.generation,
                                   batch, idx, entropy_coef=self.ent.coef, share_prompts=learner.share_prompts)
        live = self.live(learner, batch, idx)
        if live is not None and not live.any():  # no row ran: one zero pass, so the gradients are zeros (the
            self.touch(learner)  # optimiser steps as on the rows' zero gradient) and DDP's all-reduce still meets
        return metrics

    def live(self, learner: Learner, batch: GRPOBatch, idx) -> torch.Tensor | None:
        """The minibatch's rows the update runs, (n,) bool, or None for all of them (grpo_batch.live_rows)."""
        return live_rows(batch.A[idx], learner.rl, self.ent.coef)

    def passes(self, learner: Learner, batch: GRPOBatch, idx) -> int:
        live = self.live(learner, batch, idx)
        rl = learner.rl
        return max(1, len(list(micro_batches(batch.tokens[idx], rl.length_buckets, learner.share_prompts, live,
                                             rl.micro_batch_tokens))))  # at least the zero pass with no live row

    def touch(self, learner: Learner) -> None:  # each pass scores the reference too: a LoRA one's is a collective
        zero_loss(learner.policy.wrapped, ref=learner.ranks.in_step(learner.ref))

    def after_update(self, learner: Learner, metrics: dict[str, float]) -> dict[str, float]:
        rl = learner.rl
        if not rl.entropy_coef:
            return {}
        out = {"entropy/coef": self.ent.coef}
        if "entropy" in metrics:
            self.ent.coef = entropy_coef_update(self.ent.coef, metrics["entropy"], rl.entropy_target, rl.entropy_coef_lr)
        return out


def train_grpo(cfg: Config, log: Callable[[str], None] = print,
               on_step: Callable[[dict], bool | None] | None = None,
               resume: bool = False, resume_changed: bool = False):
    """Run GRPO as configured (section `grpo`). Returns (history, model, tokenizer).

    resume: continue from `output_dir/checkpoint` (the same trajectory as an uninterrupted run); resume_changed:
    accept config changes since the checkpoint that make the trajectory depart (refused otherwise)."""
    return loop.train(cfg, GRPO(), log, on_step, resume, resume_changed)
