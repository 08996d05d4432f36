"""On-policy distillation: the student samples, a frozen teacher scores every sampled token.

What is distillation's own (the loop, `loop.py`, samples, verifies, archives, evaluates and checkpoints; GRPO's
update does the rest):
  - set-up: the teacher (models/teacher.py: the policy's sources, frozen, the student's tokenizer), on
    distill.teacher_device;
  - the batch: every sample of the round (no group needs to be mixed: the signal is per token), the teacher's
    log-prob of each sampled token at the rollout's temperature, and per token A_t = log p_T - log p_S (loss
    reverse_kl; docs/algorithms.md §distill), plus reward_weight x the group-normalised outcome advantage (the
    samples the verifier masked are then left out, never scored 0). Observation tokens of an episode carry no
    advantage and no loss (their loss mask is 0);
  - the update: loss reverse_kl is GRPO's clipped surrogate on those per-token advantages (grpo_batch.py);
    jsd and topk_forward_kl take the divergence over the whole vocabulary at each sampled position (the teacher's
    forward pass in each micro-batch, the round's only one for these losses: the batch then holds no teacher
    log-probs), token-mean aggregated as TRL's DistillationTrainer does, plus the outcome term's surrogate when
    reward_weight > 0.

Not here: the maths (algos/distill.py), loading the teacher (models/teacher.py).
"""
from __future__ import annotations

from typing import Callable

import torch

from ..algos.advantages import ADVANTAGES, GroupOptions
from ..algos.distill import DIVERGENCES, DivergenceOptions, reverse_kl_advantage
from ..algos.losses import POLICY_LOSSES, masked_mean, token_mean
from ..algos.vocab_blocks import sampled_logprobs
from ..config.sections import Config
from ..models.load import autocast, load_tokenizer
from ..models.logprobs import completion_logits, pad_rollouts
from ..models.teacher import check_teacher, load_teacher
from ..types import Group
from . import loop
from .algorithm import Learner, Net
from .grpo import GRPO
from .grpo_batch import GRPOBatch, micro_batches, pass_metrics
from .offpolicy import correct_batch, trainer_logprobs

__all__ = ["Distill", "train_distill", "distill_batch"]


def _trainable(groups: list[Group], reward, rl) -> tuple[list[tuple[Group, int]], torch.Tensor | None]:
    """(group, sample index) of every sample the batch trains on, and with reward_weight > 0 their outcome
    advantages (n,) from the group estimator over each group's scored samples (masked ones out)."""
    if not rl.reward_weight:
        return [(g, i) for g in groups for i, s in enumerate(g.samples) if s.token_ids
                and not (rl.mask_truncated_completions and s.truncated)], None
    est = ADVANTAGES.get(rl.advantage)
    scores = [[(reward.combine(s.verdicts) if est.scores == "reward" else
                (None if s.outcome(reward.outcome) is None else float(s.outcome(reward.outcome)))) for s in g.samples]
              for g in groups]
    R = torch.tensor([[0.0 if x is None else x for x in row] for row in scores])  # (B, G)
    valid = torch.tensor([[x is not None and len(s.token_ids) > 0 for x, s in zip(row, g.samples)]
                          for row, g in zip(scores, groups)])
    A = est(R, valid, GroupOptions(scale=rl.scale_rewards, k=rl.pass_k))  # (B, G)
    picked = [(b, i) for b, g in enumerate(groups) for i, s in enumerate(g.samples)
              if valid[b, i] and not (rl.mask_truncated_completions and s.truncated)]
    return [(groups[b], i) for b, i in picked], torch.tensor([A[b, i].item() for b, i in picked])


def distill_batch(learner: Learner, teacher, groups: list[Group]) -> tuple[GRPOBatch | None, dict[str, float]]:
    """Every trainable sample as tensors with its distillation advantage: per token (n, Tc) for loss reverse_kl,
    per sequence (n,) (the outcome term alone, or zeros) for the dense losses, whose divergence the update takes."""
    rl, tok = learner.rl, learner.tok
    picked, A_out = _trainable(groups, learner.reward, rl)
    if not picked:
        return None, {}
    samples = [g.samples[i] for g, i in picked]
    tokens = pad_rollouts([tok(g.prompt)["input_ids"] for g, _ in picked], [list(s.token_ids) for s in samples],
                          [list(s.logprobs) for s in samples], tok.pad_token_id, device=learner.model.device,
                          loss_masks=[s.loss_mask for s in samples])
    tokens, w, m = correct_batch(learner, tokens)  # an engine that is not the trainer: the trainer's own pi_old
    mask = tokens.loss_mask
    m = dict(m, **{"distill/samples": float(len(picked))})
    a_out = A_out.to(mask.device) if A_out is not None else torch.zeros(len(picked), device=mask.device)
    if rl.loss == "reverse_kl":
        # (n, Tc): each group's prompt run once through the teacher where the student's update does so too
        lp_t = trainer_logprobs(teacher, tokens, learner.temperature, rl.bf16, share_prompts=learner.share_prompts)
        m.update(_teacher_metrics(tokens.logp_old, lp_t, mask))
        A = reverse_kl_advantage(tokens.logp_old, lp_t, mask) + rl.reward_weight * a_out[:, None] * mask.float()
    else:  # the dense losses run the teacher in the update (dense_minibatch), which reports these metrics: once
        A = rl.reward_weight * a_out
    if A_out is not None:
        m["distill/outcome_advantage_abs"] = a_out.abs().mean().item()
    return GRPOBatch(tokens, A, [g for g, _ in picked], is_weight=w), m


def _teacher_metrics(logp_old: torch.Tensor, lp_t: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """The teacher's view of the sampled tokens: logp_old, lp_t (n, T) the sampler's and the teacher's log-probs."""
    return {"distill/reverse_kl": masked_mean(logp_old - lp_t, mask),  # k1 of KL(p_S || p_T) a token
            "distill/teacher_logprob": masked_mean(lp_t, mask)}


def dense_minibatch(learner: Learner, teacher, batch: GRPOBatch, idx: torch.Tensor) -> dict[str, float]:
    """Gradients of the dense divergence (distill.loss jsd or topk_forward_kl) over the minibatch `idx`, token-mean
    over its model tokens, in micro-batches of similar length (each weighed by its share of the tokens), plus the
    outcome term's clipped surrogate when reward_weight > 0. The teacher's one forward pass of the round per
    minibatch is this one (make_batch runs none for these losses): its metrics come from here."""
    rl, gen = learner.rl, learner.generation
    mb, A = batch.tokens[idx], batch.A[idx]
    divergence = DIVERGENCES.get(rl.loss)
    opts = DivergenceOptions(beta=rl.jsd_beta, k=rl.top_k)
    share = learner.share_prompts  # a group's rows in one micro-batch, its prompt run once (student and teacher)
    metrics: dict[str, float] = {}
    padded = []  # each pass's padded tokens
    for m in micro_batches(mb, rl.length_buckets, share, budget=rl.micro_batch_tokens):
        padded.append(m.padded)
        sub, p_ids, p_mask, c_ids, c_mask, loss_mask, weight = m.sub, m.p_ids, m.p_mask, m.c_ids, m.c_mask, \
            m.loss_mask, m.share
        tc = c_ids.shape[1]
        tau = learner.temperature
        with learner.ranks.no_sync(learner.policy.wrapped, not m.last):
            with autocast(rl.bf16):
                z_s = completion_logits(learner.policy.wrapped, p_ids, p_mask, c_ids, c_mask,
                                        share_prompts=share)  # (n, tc, V)
                with torch.no_grad():
                    on = teacher.device
                    z_t = completion_logits(teacher, p_ids.to(on), p_mask.to(on), c_ids.to(on), c_mask.to(on),
                                            share_prompts=share).to(z_s.device)
            per_token = divergence(z_s, z_t, opts, tau)  # (n, tc)
            loss = token_mean(per_token, loss_mask)
            if rl.reward_weight:
                logp = sampled_logprobs(z_s, c_ids, tau)[0] * c_mask
                objective = POLICY_LOSSES.get(rl.loss_type)
                pg = objective.fn(logp, mb.logp_old[sub][:, :tc], A[sub], loss_mask, eps_low=rl.eps_low,
                                  eps_high=rl.eps_high, ratio_level=rl.ratio_level, agg="token_mean",
                                  max_len=gen.max_tokens)
                loss = loss + pg.loss
            (loss * weight).backward()
        with torch.no_grad():
            lp_t = sampled_logprobs(z_t, c_ids, tau)[0]  # (n, tc) the teacher's log-prob of each sampled token
        sampled = {"distill/divergence": masked_mean(per_token.detach(), loss_mask),
                   **_teacher_metrics(mb.logp_old[sub][:, :tc], lp_t, loss_mask)}
        for k, v in sampled.items():  # each micro-batch weighed by its share of the tokens
            metrics[k] = metrics.get(k, 0.0) + weight * v
    metrics["loss/policy"] = metrics["distill/divergence"]
    return {**metrics, **pass_metrics(padded)}


class Distill(GRPO):
    """GRPO's loop and update with the teacher's per-token signal in place of the group's comparison."""
    name = "distill"

    def __init__(self, cfg: Config, log: Callable[[str], None] = print) -> None:
        self.cfg, self.log, self.teacher = cfg, log, None

    def setup(self, learner: Learner) -> tuple[list[Net], dict]:
        nets, states = super().setup(learner)
        # rank 0 first: a teacher built on first use (the tiny default's SFT checkpoint) is built once, not by
        # every rank at once into the same cache folder
        self.teacher, summary = learner.ranks.main_first(load_teacher, self.cfg, learner.model.device, log=self.log)
        if learner.ranks.main:
            self.log(summary)
        return nets, states

    def make_batch(self, learner: Learner, groups: list[Group]) -> tuple[GRPOBatch | None, dict[str, float]]:
        return distill_batch(learner, self.teacher, groups) if groups else (None, {})

    def minibatch(self, learner: Learner, batch: GRPOBatch, idx) -> dict[str, float]:
        if learner.rl.loss == "reverse_kl":
            return super().minibatch(learner, batch, idx)
        return dense_minibatch(learner, self.teacher, batch, idx)

    def live(self, learner: Learner, batch: GRPOBatch, idx):
        if learner.rl.loss == "reverse_kl":  # GRPO's update: its rows of zero advantage are left out
            return super().live(learner, batch, idx)
        return None  # the dense losses' divergence reaches every row


def train_distill(cfg: Config, log: Callable[[str], None] = print,
                  on_step: Callable[[dict], bool | None] | None = None,
                  resume: bool = False, resume_changed: bool = False):
    """Run on-policy distillation as configured (section `distill`; distill.teacher the teacher). Returns (history,
    model, tokenizer). The teacher's source and tokenizer are checked before anything loads."""
    check_teacher(cfg, load_tokenizer(cfg))
    return loop.train(cfg, Distill(cfg, log), log, on_step, resume, resume_changed)
