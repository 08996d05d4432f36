"""Rollout correction: importance weights for samples drawn by an engine whose log-probs are not the trainer's.

docs/algorithms.md §rollout-correction. An engine (vLLM, a remote server) samples with its own kernels, its
own precision and possibly weights a few updates old: its log-probs `logp_engine` differ from what the
trainer's model gives the same tokens at the same weights, `logp_old` (a no-grad forward before the update).
The PPO ratio is then taken against `logp_old` (decoupled PPO), and each token's loss is multiplied by a
weight correcting pi_engine -> pi_old, with r_t = exp(logp_old_t - logp_engine_t):

    token_tis   w_t = min(r_t, C_max)                                    truncated IS (Yao et al. 2025)
    seq_tis     w_i = min(prod_t r_t, C_max), for every token of i       TRL sequence_truncate
    token_mis   w_t = r_t if C_min <= r_t <= C_max, else 0               masked IS (TRL token_mask)
    seq_mis     w_i = prod_t r_t if in [C_min, C_max], else 0            TRL sequence_mask
    icepop      w_t = 1 if C_min <= r_t <= C_max, else 0                 two-sided token masking (IcePop, Ring-1T):
                                                                         a token the two sides disagree on is left
                                                                         out, the others count at weight 1
    geo_mask    w_i = 1 if C_min <= exp(mean_t log r_t) <= C_max, else 0 a geometric-mean sequence mask (OpenRLHF
                                                                         seq-mask; length-fair, unlike prod_t r_t)

Every function takes logp_old, logp_engine, mask (B, T) and returns the weights, (B, T) for token modes and
(B, 1) for sequence modes, with no gradient, and the metrics of what it did. On-policy (logp_old ==
logp_engine) every weight is exactly 1. No weight ever exceeds C_max (the masks: never above 1 or r_t <= C_max).
Not here: the losses that multiply by the weights (algos/losses.py), or computing log-probs (models/logprobs.py).
"""
from __future__ import annotations

from typing import Callable

import torch

from ..registry import Registry

CORRECTIONS: Registry[Callable[..., tuple[torch.Tensor, dict[str, float]]]] = Registry("rollout correction")


def _log_r(logp_old: torch.Tensor, logp_engine: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """log r_t = logp_old - logp_engine on response tokens, 0 elsewhere (so padding never moves a weight). (B, T)"""
    d = torch.nan_to_num(logp_old.detach() - logp_engine.detach(), nan=0.0)  # an engine log-prob it did not give
    return torch.where(mask.bool(), d, torch.zeros_like(d))


def _metrics(w: torch.Tensor, mask: torch.Tensor, changed: torch.Tensor, what: str) -> dict[str, float]:
    """Weights' mean/min/max over the tokens (token modes) or sequences (sequence modes) they apply to."""
    if w.shape[-1] == 1:  # per sequence
        keep = mask.bool().any(-1, keepdim=True)
    else:
        keep = mask.bool()
    vals, hit = w[keep], changed[keep]
    n = max(1, vals.numel())
    return {f"rollout/is_{what}": hit.float().sum().item() / n,
            "rollout/is_weight_mean": vals.mean().item() if vals.numel() else 1.0,
            "rollout/is_weight_min": vals.min().item() if vals.numel() else 1.0,
            "rollout/is_weight_max": vals.max().item() if vals.numel() else 1.0}


@CORRECTIONS.register("none")
def no_correction(logp_old, logp_engine, mask, *, c_min: float = 0.0, c_max: float = 1.0):
    """w = 1 everywhere (the sampler is the trainer: the `hf` engine)."""
    w = torch.ones_like(mask, dtype=logp_old.dtype)
    return w, {}


@CORRECTIONS.register("token_tis")
def token_tis(logp_old, logp_engine, mask, *, c_min: float = 0.0, c_max: float = 2.0):
    """w_t = min(r_t, C_max). (B, T) -> (B, T)"""
    r = torch.exp(_log_r(logp_old, logp_engine, mask))
    w = torch.clamp(r, max=c_max)
    return w, _metrics(w, mask, r > c_max, "truncated")


@CORRECTIONS.register("seq_tis")
def seq_tis(logp_old, logp_engine, mask, *, c_min: float = 0.0, c_max: float = 2.0):
    """w_i = min(exp(sum_t log r_t), C_max). (B, T) -> (B, 1)"""
    r = torch.exp(_log_r(logp_old, logp_engine, mask).sum(-1, keepdim=True))
    w = torch.clamp(r, max=c_max)
    return w, _metrics(w, mask, r > c_max, "truncated")


@CORRECTIONS.register("token_mis")
def token_mis(logp_old, logp_engine, mask, *, c_min: float = 0.0, c_max: float = 2.0):
    """w_t = r_t inside [C_min, C_max], else 0. (B, T) -> (B, T)"""
    r = torch.exp(_log_r(logp_old, logp_engine, mask))
    out = (r < c_min) | (r > c_max)
    w = torch.where(out, torch.zeros_like(r), r)
    return w, _metrics(w, mask, out, "masked")


@CORRECTIONS.register("seq_mis")
def seq_mis(logp_old, logp_engine, mask, *, c_min: float = 0.0, c_max: float = 2.0):
    """w_i = exp(sum_t log r_t) inside [C_min, C_max], else 0. (B, T) -> (B, 1)"""
    r = torch.exp(_log_r(logp_old, logp_engine, mask).sum(-1, keepdim=True))
    out = (r < c_min) | (r > c_max)
    w = torch.where(out, torch.zeros_like(r), r)
    return w, _metrics(w, mask, out, "masked")


@CORRECTIONS.register("icepop")
def icepop(logp_old, logp_engine, mask, *, c_min: float = 0.5, c_max: float = 2.0):
    """w_t = 1[C_min <= r_t <= C_max]: tokens outside the band leave the loss. (B, T) -> (B, T)"""
    r = torch.exp(_log_r(logp_old, logp_engine, mask))
    out = (r < c_min) | (r > c_max)
    w = (~out).to(logp_old.dtype)
    return w, _metrics(w, mask, out, "masked")


@CORRECTIONS.register("geo_mask")
def geo_mask(logp_old, logp_engine, mask, *, c_min: float = 0.5, c_max: float = 2.0):
    """w_i = 1[C_min <= exp(mean_t log r_t) <= C_max], the same for every token of sequence i. (B, T) -> (B, 1)"""
    m = mask.to(logp_old.dtype)
    g = torch.exp(_log_r(logp_old, logp_engine, mask).sum(-1, keepdim=True) / m.sum(-1, keepdim=True).clamp(min=1))
    out = (g < c_min) | (g > c_max)
    w = (~out).to(logp_old.dtype)
    return w, _metrics(w, mask, out, "masked")


def mismatch_kl(logp_old: torch.Tensor, logp_engine: torch.Tensor, mask: torch.Tensor) -> float:
    """k3 estimate of KL(pi_engine || pi_old) per token over samples the engine drew: mean(u - log u - 1) with
    u = pi_old / pi_engine (docs/algorithms.md §kl, §rollout-correction). 0 when the two agree."""
    log_u = _log_r(logp_old, logp_engine, mask).double()  # float64: k3 >= 0 holds to the last digit
    m = mask.to(log_u.dtype)
    return ((torch.exp(log_u) - log_u - 1) * m).sum().item() / max(1.0, m.sum().item())


def ratio_outside(logp_old: torch.Tensor, logp_engine: torch.Tensor, mask: torch.Tensor, low: float = 0.9,
                  high: float = 1.1) -> tuple[int, int]:
    """(tokens whose ratio r_t = pi_old / pi_engine lies outside [low, high], tokens compared): how many tokens a
    correction would touch, which the mean KL hides (a few tokens far off and many close read the same)."""
    r = torch.exp(_log_r(logp_old, logp_engine, mask))
    m = mask.bool()
    return int(((r < low) | (r > high))[m].sum().item()), int(m.sum().item())


def correct(mode: str, logp_old: torch.Tensor, logp_engine: torch.Tensor, mask: torch.Tensor, c_min: float,
            c_max: float, band: tuple[float, float] = (0.9, 1.1)) -> tuple[torch.Tensor, dict[str, float]]:
    """The weights of `mode` and every metric of the mismatch: rollout/mismatch_kl, and the share of tokens whose
    ratio lies outside `band` (rollout/ratio_outside, with rollout/ratio_tokens the tokens compared)."""
    with torch.no_grad():
        w, metrics = CORRECTIONS.get(mode)(logp_old, logp_engine, mask, c_min=c_min, c_max=c_max)
        metrics["rollout/mismatch_kl"] = mismatch_kl(logp_old, logp_engine, mask)
        out, n = ratio_outside(logp_old, logp_engine, mask, *band)
        metrics["rollout/ratio_outside"], metrics["rollout/ratio_tokens"] = out / max(1, n), float(n)
    return w, metrics
