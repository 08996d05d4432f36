"""Distillation from a teacher: the student's sampled tokens scored against the teacher's distribution
(docs/algorithms.md §distill).

Shapes: B sequences, T completion tokens, V the vocabulary (shared by student and teacher). Log-probabilities are
at the rollout's temperature tau on both sides: log p(.) = log_softmax(logits / tau), the distribution the tokens
were drawn from (scoring the teacher at another temperature than the sampler's biases every advantage).

On-policy, sampled (`reverse_kl_advantage`): the student sampled y ~ p_S; each sampled token gets the advantage

    A_t = log p_T(y_t | y_<t) - log p_S(y_t | y_<t)          (B, T), 0 off the mask

the negative of the single-sample estimate of the per-token reverse KL, KL(p_S || p_T) at position t. Climbed with
a policy gradient (the clipped surrogate, no baseline needed: its expectation under p_S is -KL <= 0, zero exactly
when p_S = p_T there). One teacher forward pass scores every sampled token: the signal is dense (one number a token)
where a verifier's is one bit a sample. Agarwal et al. 2024 (GKD, arXiv:2306.13649); Thinking Machines, "On-Policy
Distillation" (2025), whose advantage this is.

Dense, over the whole vocabulary at each sampled position (the student's own samples, so still on-policy):

    generalized JSD (beta):  beta = 0: KL(p_T || p_S) (forward);  beta = 1: KL(p_S || p_T) (reverse); else
                             beta KL(p_T || m) + (1 - beta) KL(p_S || m),  m = beta p_T + (1 - beta) p_S
                             (TRL DistillationTrainer's `beta` and mixture; Agarwal et al. 2024)
    top-k forward KL (k):    sum over the teacher's k most likely tokens of q_T log(q_T / p_S), q_T the teacher's
                             probabilities renormalised over those k (a dense signal at a fraction of the teacher's
                             vocabulary, as logit-distillation servers ship it)

Not here: the teacher's forward pass, batching or the optimiser (reasoning_rl/trainers/distill.py).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch

from ..registry import Registry
from .vocab_blocks import generalized_jsd_from_logits, log_probs_at

__all__ = ["reverse_kl_advantage", "DivergenceOptions", "DIVERGENCES", "generalized_jsd", "topk_forward_kl",
           "log_probs_at"]


def reverse_kl_advantage(logp_student: torch.Tensor, logp_teacher: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """A_t = (log p_T(y_t) - log p_S(y_t)) on masked-in tokens, 0 elsewhere: the sampled token's negative reverse KL.
    logp_student (B, T): the sampler's log-probs of its own tokens (pi_old); logp_teacher (B, T): the teacher's of the
    same tokens, at the same temperature; mask (B, T). -> (B, T)"""
    if logp_student.shape != logp_teacher.shape:
        raise ValueError(f"reverse_kl_advantage: student {tuple(logp_student.shape)} vs teacher "
                         f"{tuple(logp_teacher.shape)}")
    return torch.where(mask.bool(), logp_teacher - logp_student, 0.0)


@dataclass(frozen=True)
class DivergenceOptions:
    """What a run's config says to a dense divergence; each reads the fields it names (distill.jsd_beta, top_k)."""
    beta: float = 1.0  # generalized JSD: 0 forward KL, 1 reverse KL
    k: int = 16  # top-k forward KL: the teacher's k most likely tokens


# distill.loss (dense ones) -> per-token divergence from the logits, the student's differentiable:
# (z_s (B, T, V), z_t (B, T, V), opts, temperature) -> (B, T)
DIVERGENCES: Registry[Callable[[torch.Tensor, torch.Tensor, DivergenceOptions, float], torch.Tensor]] = \
    Registry("distillation divergence")


def generalized_jsd(log_ps: torch.Tensor, log_pt: torch.Tensor, opts: DivergenceOptions = DivergenceOptions()
                    ) -> torch.Tensor:
    """Per-token generalized JSD between the student's and the teacher's distributions (module docstring), as TRL's
    DistillationTrainer defines it: beta 0 the forward KL(p_T || p_S), 1 the reverse KL(p_S || p_T), in between
    beta KL(p_T || m) + (1 - beta) KL(p_S || m) with m = beta p_T + (1 - beta) p_S. (B, T, V) x 2 -> (B, T)"""
    beta = opts.beta
    if not 0.0 <= beta <= 1.0:
        raise ValueError(f"generalized_jsd: beta must be in [0, 1], got {beta}")
    ps, pt = log_ps.exp(), log_pt.exp()
    if beta == 0.0:
        return (pt * (log_pt - log_ps)).sum(-1)
    if beta == 1.0:
        return (ps * (log_ps - log_pt)).sum(-1)
    log_m = torch.logaddexp(log_ps + math.log(1 - beta), log_pt + math.log(beta))
    return (beta * pt * (log_pt - log_m) + (1 - beta) * ps * (log_ps - log_m)).sum(-1)


def topk_forward_kl(log_ps: torch.Tensor, log_pt: torch.Tensor, opts: DivergenceOptions = DivergenceOptions()
                    ) -> torch.Tensor:
    """Forward KL on the teacher's top-k tokens: sum_{v in top-k(p_T)} q_T(v) (log q_T(v) - log p_S(v)), q_T the
    teacher's probabilities renormalised over those k (k >= V: the full forward KL). (B, T, V) x 2 -> (B, T)"""
    k = min(opts.k, log_pt.shape[-1])
    if k < 1:
        raise ValueError(f"topk_forward_kl: k must be >= 1, got {opts.k}")
    top_t, idx = log_pt.topk(k, dim=-1)  # (B, T, k)
    log_q = top_t - torch.logsumexp(top_t, dim=-1, keepdim=True)
    return (log_q.exp() * (log_q - log_ps.gather(-1, idx))).sum(-1)


@DIVERGENCES.register("jsd")
def jsd_of_logits(z_s: torch.Tensor, z_t: torch.Tensor, opts: DivergenceOptions, temperature: float = 1.0
                  ) -> torch.Tensor:
    """`generalized_jsd` of the two models' logits at `temperature`, computed block by block over the vocabulary
    with its gradient in closed form (algos/vocab_blocks.py: the same values, about half the time, and none of
    the (B, T, V) intermediates). (B, T, V) x 2 -> (B, T)"""
    return generalized_jsd_from_logits(z_s, z_t, opts.beta, temperature)


@DIVERGENCES.register("topk_forward_kl")
def topk_forward_kl_of_logits(z_s: torch.Tensor, z_t: torch.Tensor, opts: DivergenceOptions,
                              temperature: float = 1.0) -> torch.Tensor:
    """`topk_forward_kl` of the two models' log-probabilities at `temperature`. (B, T, V) x 2 -> (B, T)"""
    return topk_forward_kl(log_probs_at(z_s, temperature), log_probs_at(z_t, temperature), opts)
