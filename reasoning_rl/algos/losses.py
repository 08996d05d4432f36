"""Losses: pure functions over per-token tensors (docs/algorithms.md §ppo-clip, §kl, §aggregation, §entropy, §dpo).

Registries hold what a config names: `POLICY_LOSSES` (grpo.loss_type -> the objective and its aggregation, one
signature for every entry), `AGGREGATIONS`, `KL_ESTIMATORS`. The other losses are called by name.

Shapes: B sequences, T response tokens. `mask` (B, T) is 1 on response tokens and 0 on
prompt/padding. Every policy-type loss returns `LossOut(loss, metrics)`: a scalar to
*minimise* and plain floats to log.

    ppo_clip      J = E_t[min(rho A, clip(rho, 1-eps_low, 1+eps_high) A)], rho = exp(logp - logp_old);
                  optional dual clip (Ye et al. 2020, arXiv:1912.09729) for A < 0; optional KL-in-loss
                  J <- J - beta * k(logp, logp_ref).   Schulman et al. 2017 (arXiv:1707.06347);
                  DAPO eps_high (Yu et al. 2025, arXiv:2503.14476).
    cispo         -sg(min(rho, eps_high)) A log pi: the weight capped, the gradient kept (MiniMax-M1, arXiv:2506.13585)
    pg            plain policy gradient, -A logp.
    value         (V - G)^2, optionally clipped around V_old (PPO2 style), times 1/2 is NOT applied.
    entropy       -H, the bonus as a loss.
    dpo_sigmoid   -log sigma(beta m), m = (logp_w - ref_w) - (logp_l - ref_l). Rafailov et al. 2023
    ipo           (m/|y| - 1/(2 beta))^2 with per-token-averaged log-ratios. Azar et al. 2023
    bradley_terry -log sigma(r_w - r_l).

KL estimators (Schulman 2020, "Approximating KL divergence"), log r = logp - logp_ref:
    k1 = log r,  k2 = (log r)^2 / 2,  k3 = u - log u - 1 with u = pi_ref / pi_theta.

Aggregations over tokens (docs/algorithms.md §aggregation): token_mean (DAPO), seq_mean_token_mean (GRPO),
seq_mean_token_sum_norm (Dr. GRPO, divides each sequence's sum by a constant).

Not here: computing log-probs from a model (models/logprobs.py) or advantages (algos/advantages.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch
import torch.nn.functional as F

from ..registry import Registry

AGGREGATIONS: Registry[Callable[..., torch.Tensor]] = Registry("loss aggregation")
KL_ESTIMATORS: Registry[Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = Registry("KL estimator")


@dataclass
class LossOut:
    loss: torch.Tensor
    metrics: dict[str, float] = field(default_factory=dict)


# ---------------------------------------------------------------- aggregation (docs/algorithms.md §aggregation)
@AGGREGATIONS.register("token_mean")
def token_mean(x: torch.Tensor, mask: torch.Tensor, max_len: int | None = None) -> torch.Tensor:
    """sum over all response tokens of the batch / their number. (B, T) -> ()"""
    m = mask.to(x.dtype)
    return (x * m).sum() / m.sum().clamp(min=1)


@AGGREGATIONS.register("seq_mean_token_mean")
def seq_mean_token_mean(x: torch.Tensor, mask: torch.Tensor, max_len: int | None = None) -> torch.Tensor:
    """mean over each sequence's tokens, then over sequences (1/|y_i| weighting). (B, T) -> ()"""
    m = mask.to(x.dtype)
    return ((x * m).sum(-1) / m.sum(-1).clamp(min=1)).mean()


@AGGREGATIONS.register("seq_mean_token_sum_norm")
def seq_mean_token_sum_norm(x: torch.Tensor, mask: torch.Tensor, max_len: int | None = None) -> torch.Tensor:
    """sum over each sequence / max_len (a constant), then mean over sequences. (B, T) -> ()"""
    if not max_len or max_len <= 0:
        raise ValueError("seq_mean_token_sum_norm needs max_len (the max completion length) > 0")
    m = mask.to(x.dtype)
    return ((x * m).sum(-1) / max_len).mean()


def aggregate(x: torch.Tensor, mask: torch.Tensor, mode: str = "token_mean", max_len: int | None = None):
    return AGGREGATIONS.get(mode)(x, mask, max_len)


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> float:
    return token_mean(x.detach(), mask).item()


# ---------------------------------------------------------------- KL estimators (docs/algorithms.md §kl)
def masked_nll(logits: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean negative log-likelihood of `target` over the masked positions (docs/algorithms.md §sft):
    L = -sum_t m_t log softmax(logits_t)[y_t] / sum_t m_t.  logits (B, T, V), target (B, T), mask (B, T) -> ()"""
    nll = F.cross_entropy(logits.reshape(-1, logits.size(-1)), target.reshape(-1), reduction="none")
    mask = mask.to(nll.dtype)
    return (nll.view_as(mask) * mask).sum() / mask.sum().clamp(min=1)


def rpo_nll(logp_chosen: torch.Tensor, n_tokens: torch.Tensor) -> torch.Tensor:
    """The RPO term (docs/algorithms.md §dpo): the chosen responses' NLL averaged over all their tokens in the
    batch, -sum_i log pi(y_w,i) / sum_i |y_w,i| (TRL's "sft" loss; not a mean of per-sequence means).
    logp_chosen (B,) sequence log-probs, n_tokens (B,) their lengths -> ()"""
    return -(logp_chosen.sum() / n_tokens.sum())


def adaptive_kl_coef(coef: float, kl: float, target: float, horizon: int, n_steps: int = 1) -> float:
    """The adaptive KL controller's next coefficient (docs/algorithms.md §kl; Ziegler et al. 2019):
    beta <- beta * (1 + clip(KL / target - 1, -0.2, 0.2) * n / horizon)."""
    err = max(-0.2, min(0.2, kl / target - 1.0))
    return coef * (1.0 + err * n_steps / horizon)


@KL_ESTIMATORS.register("k1")
def kl_k1(logp: torch.Tensor, logp_ref: torch.Tensor) -> torch.Tensor:
    """k1 = log(pi_theta / pi_ref). Unbiased for KL(pi_theta || pi_ref) under pi_theta; can be negative."""
    return logp - logp_ref


@KL_ESTIMATORS.register("k2")
def kl_k2(logp: torch.Tensor, logp_ref: torch.Tensor) -> torch.Tensor:
    """k2 = (log r)^2 / 2. Biased, low variance, >= 0."""
    return 0.5 * (logp - logp_ref).pow(2)


@KL_ESTIMATORS.register("k3")
def kl_k3(logp: torch.Tensor, logp_ref: torch.Tensor) -> torch.Tensor:
    """k3 = u - log u - 1, u = pi_ref / pi_theta. Unbiased under pi_theta and >= 0 (GRPO's estimator).
    Computed as expm1(log u) - log u: exp(x) - x - 1 rounds below 0 for |x| near 1e-9 (Hypothesis found one)."""
    log_u = logp_ref - logp
    return torch.expm1(log_u) - log_u


@KL_ESTIMATORS.register("k3_clamped")
def kl_k3_clamped(logp: torch.Tensor, logp_ref: torch.Tensor) -> torch.Tensor:
    """k3 with verl's guards (docs/algorithms.md §kl): log u clamped to [-20, 20] before the exponential, the
    estimate clamped to [-10, 10], so one token the reference finds near-impossible cannot blow the loss up.
    Equal to k3 wherever |log u| is small enough that k3 <= 10. (B, T) -> (B, T)"""
    log_u = torch.clamp(logp_ref - logp, -20.0, 20.0)
    return torch.clamp(torch.expm1(log_u) - log_u, -10.0, 10.0)


def entropy_coef_update(coef: float, entropy: float, target: float, lr: float) -> float:
    """The entropy coefficient's next value with a target (docs/algorithms.md §entropy): a step of the dual problem
    min_coef coef * (H - target), coef <- max(0, coef + lr * (target - H)). Below the target the bonus grows, above
    it shrinks to 0. target = 0 keeps coef fixed."""
    if target <= 0:
        return coef
    return max(0.0, coef + lr * (target - entropy))


def kl_in_reward(token_rewards: torch.Tensor, logp_old: torch.Tensor, logp_ref: torch.Tensor, mask: torch.Tensor,
                 beta: float) -> torch.Tensor:
    """KL as reward shaping at rollout time: r_t <- r_t - beta * log(pi_old / pi_ref). (B, T) -> (B, T).

    Use this *or* the KL term in the loss, never both for the same term.
    """
    return (token_rewards - beta * (logp_old - logp_ref)) * mask.to(token_rewards.dtype)


# ---------------------------------------------------------------- policy losses (docs/algorithms.md §ppo-clip)
def ppo_clip(logp: torch.Tensor, logp_old: torch.Tensor, A: torch.Tensor, mask: torch.Tensor, *,
             eps_low: float = 0.2, eps_high: float | None = None, dual_clip: float | None = None,
             agg: str = "token_mean", max_len: int | None = None, logp_ref: torch.Tensor | None = None,
             beta: float = 0.0, kl_estimator: str = "k3", kl_importance_weight: bool = True,
             ratio_level: str = "token", is_weight: torch.Tensor | None = None) -> LossOut:
    """Clipped surrogate (negated) with optional dual clip and KL-in-loss.

    logp, logp_old, mask: (B, T); A: (B,) per sequence or (B, T) per token.
    rho = exp(logp - logp_old); per-token loss = -min(rho A, clip(rho, 1-eps_low, 1+eps_high) A)
    [dual clip, A < 0: max(that, -c A)] [x is_weight] + beta * w * k(logp, logp_ref); then aggregated by `agg`.
    ratio_level="sequence" is GSPO (Zheng et al. 2025, arXiv:2507.18071; docs/algorithms.md §gspo): one ratio per
    sequence, s_i = exp(mean_t log rho_{i,t}), clipped and broadcast over its tokens (TRL importance_sampling_level).
    is_weight (B, T) or (B, 1): the rollout correction's weights (docs/algorithms.md §rollout-correction, no
    gradient), multiplying the clipped term as TRL does; the PPO ratio is then against the trainer's pi_old.
    w = rho when `kl_importance_weight` (tokens were drawn from pi_old, so rho * k estimates KL(pi_theta || pi_ref)
    without bias, as in DeepSeek-V3.2 and TRL's `use_bias_correction_kl`), else 1.
    Metrics: clip_ratio/low|high|region (share of tokens clipped), approx_kl (k3 estimate of KL(pi_old || pi_theta)),
    kl (to the reference, if given), ratio/mean|max.
    """
    eps_high = eps_low if eps_high is None else eps_high
    if A.dim() == 1:
        A = A.unsqueeze(1)  # (B, 1) broadcasts over T
    log_ratio = logp - logp_old
    if ratio_level == "sequence":  # GSPO: the length-normalised sequence ratio, (B, 1)
        m = mask.to(log_ratio.dtype)
        log_ratio_is = (log_ratio * m).sum(-1, keepdim=True) / m.sum(-1, keepdim=True).clamp(min=1)
    elif ratio_level == "token":
        log_ratio_is = log_ratio
    else:
        raise ValueError(f"ppo_clip: ratio_level must be 'token' or 'sequence', got {ratio_level!r}")
    rho = torch.exp(log_ratio_is)  # (B, T), or (B, 1) for GSPO
    rho_clipped = torch.clamp(rho, 1 - eps_low, 1 + eps_high)
    per_token = -torch.min(rho * A, rho_clipped * A)  # (B, T)
    if dual_clip is not None:
        if dual_clip <= 1.0:
            raise ValueError(f"dual_clip must be > 1, got {dual_clip}")
        per_token = torch.where(A < 0, torch.min(per_token, -dual_clip * A), per_token)
    if is_weight is not None:
        per_token = per_token * is_weight.detach()
    rho = rho.expand_as(logp)
    metrics: dict[str, float] = {}
    per_token = _with_kl(per_token, logp, logp_ref, rho, mask, beta, kl_estimator, kl_importance_weight, metrics)
    loss = aggregate(per_token, mask, agg, max_len)
    with torch.no_grad():
        low = ((rho < 1 - eps_low) & (A < 0)).to(logp.dtype)
        high = ((rho > 1 + eps_high) & (A > 0)).to(logp.dtype)
        _ratio_metrics(low, high, rho, log_ratio, mask, metrics)
    metrics["loss/policy"] = loss.item()
    return LossOut(loss, metrics)


def _with_kl(per_token, logp, logp_ref, rho, mask, beta, kl_estimator, kl_importance_weight, metrics):
    """per_token + beta * w * k(logp, logp_ref) (w = rho when importance-weighted, docs/algorithms.md §kl); the
    KL's mean goes to metrics["kl"]. Unchanged without a reference or with beta = 0."""
    if logp_ref is None or beta == 0.0:
        return per_token
    kl = KL_ESTIMATORS.get(kl_estimator)(logp, logp_ref)
    metrics["kl"] = masked_mean(kl, mask)
    return per_token + beta * (kl * rho if kl_importance_weight else kl)


def _ratio_metrics(low, high, rho, log_ratio, mask, metrics) -> None:
    """clip_ratio/low|high|region (shares of tokens clipped), approx_kl (k3 of KL(old || theta)), ratio/mean|max."""
    metrics["clip_ratio/low"] = masked_mean(low, mask)
    metrics["clip_ratio/high"] = masked_mean(high, mask)
    metrics["clip_ratio/region"] = masked_mean(torch.maximum(low, high), mask)
    metrics["approx_kl"] = masked_mean(torch.exp(-log_ratio) + log_ratio - 1, mask)
    m = mask.bool()
    metrics["ratio/mean"] = rho[m].mean().item() if m.any() else 1.0
    metrics["ratio/max"] = rho[m].max().item() if m.any() else 1.0


def cispo(logp: torch.Tensor, logp_old: torch.Tensor, A: torch.Tensor, mask: torch.Tensor, *, eps_low: float = 0.2,
          eps_high: float = 5.0, ratio_level: str = "token", agg: str = "token_mean", max_len: int | None = None,
          logp_ref: torch.Tensor | None = None, beta: float = 0.0, kl_estimator: str = "k3",
          kl_importance_weight: bool = True, is_weight: torch.Tensor | None = None) -> LossOut:
    """CISPO (MiniMax-M1, arXiv:2506.13585; docs/algorithms.md §cispo): clip the importance weight, not the update.
    per-token loss = -sg(min(rho, eps_high)) A log pi_theta  [x is_weight] + beta * w * k; every token keeps its
    gradient (PPO's clip zeroes it outside the trust region). TRL loss_type="cispo" (its cap is epsilon_high, as
    here; eps_low is unused: the weight is capped from above only). Token ratios only.
    logp, logp_old, mask (B, T); A (B,) or (B, T) -> ()"""
    if ratio_level != "token":
        raise ValueError(f"cispo: the weight is per token; ratio_level must be 'token', got {ratio_level!r}")
    eps_max = eps_high
    if A.dim() == 1:
        A = A.unsqueeze(1)
    log_ratio = logp - logp_old
    rho = torch.exp(log_ratio)
    weight = torch.clamp(rho, max=eps_max).detach()
    per_token = -weight * A * logp
    if is_weight is not None:
        per_token = per_token * is_weight.detach()
    metrics: dict[str, float] = {}
    per_token = _with_kl(per_token, logp, logp_ref, rho, mask, beta, kl_estimator, kl_importance_weight, metrics)
    loss = aggregate(per_token, mask, agg, max_len)
    with torch.no_grad():  # "clipped" here: the weight was capped (the gradient stays)
        _ratio_metrics(torch.zeros_like(rho), (rho > eps_max).to(logp.dtype), rho, log_ratio, mask, metrics)
    metrics["loss/policy"] = loss.item()
    return LossOut(loss, metrics)


def gspo(logp: torch.Tensor, logp_old: torch.Tensor, A: torch.Tensor, mask: torch.Tensor, **kw) -> LossOut:
    """GSPO: `ppo_clip` with one length-normalised ratio per sequence (docs/algorithms.md §gspo). (B, T) -> ()"""
    return ppo_clip(logp, logp_old, A, mask, ratio_level="sequence", **kw)


def policy_gradient(logp: torch.Tensor, A: torch.Tensor, mask: torch.Tensor, *, agg: str = "token_mean",
                    max_len: int | None = None) -> LossOut:
    """Plain policy gradient (REINFORCE with a baseline in A): loss = -A logp, aggregated. (B, T) -> ()"""
    if A.dim() == 1:
        A = A.unsqueeze(1)
    loss = aggregate(-A * logp, mask, agg, max_len)
    return LossOut(loss, {"loss/policy": loss.item()})


def value_loss(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor, *,
               values_old: torch.Tensor | None = None, clip_range: float | None = None,
               agg: str = "token_mean", max_len: int | None = None) -> LossOut:
    """Critic loss L_V = E[(V - G)^2]; clipped: E[max((V - G)^2, (V_old + clip(V - V_old, -c, c) - G)^2)]. (B, T) -> ()"""
    err = (values - returns).pow(2)
    clipfrac = 0.0
    if clip_range is not None:
        if values_old is None:
            raise ValueError("value loss: clip_range needs values_old")
        v_clipped = values_old + torch.clamp(values - values_old, -clip_range, clip_range)
        err_clipped = (v_clipped - returns).pow(2)
        clipfrac = masked_mean((err_clipped > err).to(values.dtype), mask)
        err = torch.max(err, err_clipped)
    loss = aggregate(err, mask, agg, max_len)
    return LossOut(loss, {"loss/value": loss.item(), "value/clipfrac": clipfrac,
                          "value/mean": masked_mean(values, mask)})


def upcast(x: torch.Tensor) -> torch.Tensor:
    """Half-precision logits to float32 for softmax maths; float32/float64 stay as they are."""
    return x.float() if x.dtype in (torch.float16, torch.bfloat16) else x


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """H(pi(.|s_t)) per position. (B, T, V) -> (B, T)"""
    logp = F.log_softmax(upcast(logits), dim=-1)
    return -(logp.exp() * logp).sum(-1)


def entropy_bonus(entropy: torch.Tensor, mask: torch.Tensor, *, agg: str = "token_mean",
                  max_len: int | None = None) -> LossOut:
    """The entropy bonus as a loss: -mean H. Add coef * this to the policy loss. (B, T) -> ()"""
    h = aggregate(entropy, mask, agg, max_len)
    return LossOut(-h, {"entropy": h.item()})


# ---------------------------------------------------------------- preference losses (docs/algorithms.md §dpo)
def _dpo_metrics(beta: float, chosen_logratio: torch.Tensor, rejected_logratio: torch.Tensor) -> dict[str, float]:
    r_w, r_l = beta * chosen_logratio.detach(), beta * rejected_logratio.detach()
    return {"rewards/chosen": r_w.mean().item(), "rewards/rejected": r_l.mean().item(),
            "rewards/margins": (r_w - r_l).mean().item(), "rewards/accuracies": (r_w > r_l).float().mean().item()}


def dpo_sigmoid(logp_w: torch.Tensor, logp_l: torch.Tensor, ref_w: torch.Tensor, ref_l: torch.Tensor, *,
                beta: float = 0.1, label_smoothing: float = 0.0) -> LossOut:
    """L = -log sigma(beta m), m = (logp_w - ref_w) - (logp_l - ref_l); sequence log-probs (B,) -> ().

    label_smoothing eps gives the conservative DPO loss -(1-eps) log sigma(beta m) - eps log sigma(-beta m).
    """
    chosen_logratio, rejected_logratio = logp_w - ref_w, logp_l - ref_l
    z = beta * (chosen_logratio - rejected_logratio)  # (B,)
    losses = -(1 - label_smoothing) * F.logsigmoid(z) - label_smoothing * F.logsigmoid(-z)
    loss = losses.mean()
    return LossOut(loss, {"loss/dpo": loss.item(), **_dpo_metrics(beta, chosen_logratio, rejected_logratio)})


def ipo(logp_w: torch.Tensor, logp_l: torch.Tensor, ref_w: torch.Tensor, ref_l: torch.Tensor, *,
        len_w: torch.Tensor, len_l: torch.Tensor, beta: float = 0.1) -> LossOut:
    """IPO: (m' - 1/(2 beta))^2 with m' built from per-token-averaged log-ratios (as TRL does). (B,) -> ()"""
    chosen_logratio = (logp_w - ref_w) / len_w.clamp(min=1)
    rejected_logratio = (logp_l - ref_l) / len_l.clamp(min=1)
    loss = ((chosen_logratio - rejected_logratio) - 1 / (2 * beta)).pow(2).mean()
    return LossOut(loss, {"loss/ipo": loss.item(), **_dpo_metrics(beta, chosen_logratio, rejected_logratio)})


def bradley_terry(r_w: torch.Tensor, r_l: torch.Tensor, *, margin: torch.Tensor | None = None) -> LossOut:
    """Reward-model loss -log sigma(r_w - r_l [- margin]). (B,) -> ()"""
    d = r_w - r_l if margin is None else r_w - r_l - margin
    loss = -F.logsigmoid(d).mean()
    return LossOut(loss, {"loss/rm": loss.item(), "rm/accuracy": (d.detach() > 0).float().mean().item()})


# TRL GRPOTrainer `loss_type` -> how our ppo_clip aggregates tokens (the clipped objective is the same).
# grpo: per-sequence mean then mean (DeepSeekMath); bnpo: token mean of the micro-batch; dapo: token mean of
# the whole generation batch; dr_grpo: per-sequence sum / max completion length.
@dataclass(frozen=True)
class PolicyLoss:
    """A GRPO objective as `POLICY_LOSSES` holds it: its per-token loss (one signature for every entry:
    `fn(logp, logp_old, A, mask, *, eps_low, eps_high, ratio_level, agg, max_len, logp_ref, beta, kl_estimator,
    is_weight)`) and the aggregation that names it (docs/algorithms.md §aggregation)."""
    fn: Callable[..., LossOut]
    agg: str


# grpo.loss_type -> its objective: the clipped surrogate under four aggregations (TRL's loss_type names), or CISPO
POLICY_LOSSES: Registry[PolicyLoss] = Registry("GRPO loss type")
POLICY_LOSSES.add("grpo", PolicyLoss(ppo_clip, "seq_mean_token_mean"))
POLICY_LOSSES.add("bnpo", PolicyLoss(ppo_clip, "token_mean"))
POLICY_LOSSES.add("dapo", PolicyLoss(ppo_clip, "token_mean"))
POLICY_LOSSES.add("dr_grpo", PolicyLoss(ppo_clip, "seq_mean_token_sum_norm"))
POLICY_LOSSES.add("cispo", PolicyLoss(cispo, "token_mean"))
