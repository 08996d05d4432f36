"""Advantage estimators as pure functions (docs/algorithms.md §grpo-advantages, §gae, §process).

Group estimators take rewards `R` of shape (B, G) -- B prompts, G samples each -- and a
validity mask `valid` (B, G): False where the sample's verdict was masked (ABSTAIN,
TIMEOUT, ERROR). Masked samples are left out of every statistic and get A = 0. They
return A of shape (B, G). `ADVANTAGES` holds them by the name `grpo.advantage` takes, each behind one call
`(R, valid, GroupOptions) -> A` (`GroupEstimator`); the token-level ones below take other inputs and are called
by name.

    grpo     A_i = (R_i - mu) / (sigma + eps)   sigma: population std of the group,
             or of the whole batch (scale="batch"), or 1 (scale="none")
             Shao et al. 2024, DeepSeekMath (arXiv:2402.03300)
    dr_grpo  A_i = R_i - mu                      Liu et al. 2025, Dr. GRPO (arXiv:2503.20783)
    rloo     A_i = R_i - mean_{j != i} R_j       Ahmadian et al. 2024 (arXiv:2402.14740)
    pass_at_k  the group's reward is pass@k over its k-subsets; each sample gets its share of it
             (analytically, docs/algorithms.md §pass-at-k); Chen et al. 2025 (arXiv:2508.10751)

Several reward terms (grpo.reward_normalization=per_term, `per_term`): each term through the estimator within its
group, then weighted and summed, then normalised over the batch: GDPO, Liu et al. 2026 (arXiv:2601.05242).

Reward shaping, (B, G) lengths -> (B, G) rewards added before the advantage (SHAPING):

    soft_overlong  DAPO's linear penalty over the last `buffer` tokens before max_len (Yu et al. 2025, eq. 13)

Token-level estimators:

    gae      delta_t = r_t + gamma V(s_{t+1}) - V(s_t),  A_t = sum_l (gamma lam)^l delta_{t+l}
             Schulman et al. 2016 (arXiv:1506.02438); a blocked discounted reverse cumsum (matmuls),
             vectorised over B and T.
    process  step rewards normalised over the group's steps, A_{i,t} = sum_{k: t <= t_{i,k}} r~_{i,k}
             (DeepSeekMath, section 4.1.3)

Not here: losses (algos/losses.py) or anything that touches a model.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from ..registry import Registry

ADVANTAGES: Registry["GroupEstimator"] = Registry("advantage estimator")
SHAPING: Registry[Callable[..., torch.Tensor]] = Registry("reward shaping")


def _check(R: torch.Tensor, valid: torch.Tensor | None) -> torch.Tensor:
    if R.dim() != 2:
        raise ValueError(f"rewards must have shape (B, G), got {tuple(R.shape)}")
    if valid is None:
        valid = torch.ones_like(R, dtype=torch.bool)
    if valid.shape != R.shape:
        raise ValueError(f"valid mask shape {tuple(valid.shape)} != rewards shape {tuple(R.shape)}")
    valid = valid.bool()
    if not torch.isfinite(R[valid]).all():
        raise ValueError("rewards of valid samples must be finite (mask the others)")
    return valid


def _uniform(R: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """(B, 1) True where every valid reward of the group is the same number: such a group has A = 0 exactly
    (no rounding noise in the mean may be blown up by a tiny std into +-1 advantages)."""
    hi = torch.where(valid, R, -torch.inf).amax(-1, keepdim=True)
    lo = torch.where(valid, R, torch.inf).amin(-1, keepdim=True)
    return (hi == lo) | ~valid.any(-1, keepdim=True)


def _pop_std(centred: torch.Tensor, n: torch.Tensor, dim: int) -> torch.Tensor:
    """sqrt(sum(centred^2) / n), scaled by max|centred| first so tiny rewards do not underflow to sigma = 0."""
    s = centred.abs().amax(dim, keepdim=True)
    s_safe = torch.where(s > 0, s, torch.ones_like(s))
    return s * ((centred / s_safe).pow(2).sum(dim, keepdim=True) / n.clamp(min=1)).sqrt()


def _group_mean(R: torch.Tensor, valid: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """mu (B, 1) over valid samples, and n (B, 1) the number of valid samples."""
    w = valid.to(R.dtype)
    n = w.sum(-1, keepdim=True)
    mu = (torch.where(valid, R, 0.0)).sum(-1, keepdim=True) / n.clamp(min=1)
    return mu, n


def grpo(R: torch.Tensor, valid: torch.Tensor | None = None, *, scale: str = "group",
         eps: float = 1e-4) -> torch.Tensor:
    """A = (R - mu_group) / (sigma + eps); sigma by `scale` in {"group", "batch", "none"}. (B, G) -> (B, G)."""
    valid = _check(R, valid)
    mu, n = _group_mean(R, valid)  # (B, 1)
    centred = torch.where(valid & ~_uniform(R, valid), R - mu, 0.0)  # (B, G)
    if scale == "group":
        sigma = _pop_std(centred, n, dim=-1)  # population std of each group, (B, 1)
    elif scale == "batch":
        flat = R[valid]
        sigma = _pop_std(flat - flat.mean(), flat.new_tensor(float(flat.numel())), dim=0) if flat.numel() else \
            R.new_tensor(0.0)
    elif scale == "none":
        return centred
    else:
        raise ValueError(f"grpo: scale must be 'group', 'batch' or 'none', got {scale!r}")
    denom = sigma + eps
    return centred / torch.where(denom > 0, denom, torch.ones_like(denom))  # uniform group, eps=0: A = 0, not NaN


def dr_grpo(R: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
    """A = R - mu (no std scaling). (B, G) -> (B, G)."""
    return grpo(R, valid, scale="none")


def rloo(R: torch.Tensor, valid: torch.Tensor | None = None) -> torch.Tensor:
    """A_i = R_i - b_{-i}, b_{-i} the mean of the other valid rewards; 0 if fewer than 2 valid. (B, G) -> (B, G)."""
    valid = _check(R, valid)
    Rv = torch.where(valid, R, 0.0)
    total = Rv.sum(-1, keepdim=True)  # (B, 1)
    n = valid.to(R.dtype).sum(-1, keepdim=True)
    b = (total - Rv) / (n - 1).clamp(min=1)  # leave-one-out baseline, (B, G)
    A = torch.where(valid & (n >= 2) & ~_uniform(R, valid), R - b, 0.0)
    return A


def _comb(n: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """C(n, k) elementwise in float64 through lgamma; 0 where k > n or k < 0."""
    n, k = n.double(), k.double()
    ok = (k >= 0) & (k <= n)
    val = torch.exp(torch.lgamma(n + 1) - torch.lgamma(k + 1) - torch.lgamma((n - k).clamp(min=0) + 1))
    return torch.where(ok, val, torch.zeros_like(val))


def pass_at_k(R: torch.Tensor, valid: torch.Tensor | None = None, *, k: int = 1, eps: float = 1e-4) -> torch.Tensor:
    """Pass@k advantages for binary rewards (docs/algorithms.md §pass-at-k). With N valid samples, c of them
    passing: the group's reward Rbar = 1 - C(N-c, k) / C(N, k) (the chance that a k-subset holds a pass),
    sigma = sqrt(Rbar (1 - Rbar)), and
        A_pass = (1 - Rbar) / (sigma + eps),   A_fail = (1 - Rbar - C(N-c-1, k-1) / C(N-1, k-1)) / (sigma + eps),
    a failing sample's share being the subsets it sits in that hold no pass. k = 1 is `grpo` (population std).
    k larger than N is taken as N. (B, G) -> (B, G)"""
    valid = _check(R, valid)
    if k < 1:
        raise ValueError(f"pass_at_k: k must be >= 1, got {k}")
    Rv = R[valid]
    if not ((Rv == 0) | (Rv == 1)).all():
        raise ValueError("pass_at_k: rewards must be 0 or 1 (the outcome's pass/fail)")
    n = valid.sum(-1, keepdim=True)  # (B, 1)
    c = torch.where(valid, R, 0.0).sum(-1, keepdim=True).round().long()
    kk = torch.clamp(n, max=k).clamp(min=1)
    total = _comb(n, kk)
    rbar = 1 - _comb(n - c, kk) / torch.where(total > 0, total, torch.ones_like(total))  # (B, 1)
    sigma = (rbar * (1 - rbar)).clamp(min=0).sqrt()
    share = _comb(n - c - 1, kk - 1) / _comb(n - 1, kk - 1).clamp(min=1e-300)
    a_pass, a_fail = 1 - rbar, 1 - rbar - share
    A = torch.where(R > 0.5, a_pass, a_fail) / (sigma + eps)
    uniform = (c == 0) | (c == n)
    return torch.where(valid & ~uniform, A, 0.0).to(R.dtype)


@dataclass(frozen=True)
class GroupOptions:
    """What a run's config says to a group estimator; each estimator reads the fields it names."""
    scale: str = "group"  # grpo: sigma over the group, the batch, or none (grpo.scale_rewards)
    k: int = 1  # pass_at_k: the k of pass@k (grpo.pass_k)


@dataclass(frozen=True)
class GroupEstimator:
    """A group estimator as the registry holds it: one call, `(R, valid, opts) -> A` (B, G), for every entry.
    `scores`: what R must hold, the composite reward ("reward") or the outcome verifier's pass/fail ("outcome")."""
    fn: Callable[[torch.Tensor, torch.Tensor | None, GroupOptions], torch.Tensor]
    scores: str = "reward"

    def __call__(self, R: torch.Tensor, valid: torch.Tensor | None = None,
                 opts: GroupOptions = GroupOptions()) -> torch.Tensor:
        return self.fn(R, valid, opts)


def per_term(R: torch.Tensor, valid: torch.Tensor, weights: torch.Tensor, estimator: GroupEstimator,
             opts: GroupOptions = GroupOptions(), *, sample_valid: torch.Tensor | None = None, batch_norm: bool = True,
             eps: float = 1e-4) -> tuple[torch.Tensor, torch.Tensor]:
    """Reward terms normalised each within its group, then weighted and summed (GDPO, Liu et al. 2026,
    arXiv:2601.05242; docs/algorithms.md §per-term):

        A^k = estimator(R^k, valid^k)   (B, G) for each term k, on the samples term k scored
        A   = sum_k w_k A^k              then, with batch_norm, (A - mean) / (std + eps) over the batch's samples

    A term with a larger spread (a format bonus next to a rare pass) no longer drowns the others in one group std.
    R, valid (B, G, K): each term's score and whether it scored the sample (a masked verdict of one term is out of
    that term's statistics only); weights (K,); sample_valid (B, G): the samples in the loss (default: every term
    valid), the others get A = 0. Returns A (B, G) and the weighted terms w_k A^k (B, G, K)."""
    if R.dim() != 3 or valid.shape != R.shape or weights.shape != R.shape[-1:]:
        raise ValueError(f"per_term: R and valid (B, G, K) and weights (K,), got {tuple(R.shape)}, "
                         f"{tuple(valid.shape)}, {tuple(weights.shape)}")
    valid = valid.bool()
    sample_valid = valid.all(-1) if sample_valid is None else sample_valid.bool()
    terms = torch.stack([estimator(R[..., k], valid[..., k] & sample_valid, opts) for k in range(R.shape[-1])], -1)
    terms = terms * weights.to(terms.dtype)  # (B, G, K): each term's weighted share, 0 where it did not score
    A = torch.where(sample_valid, terms.sum(-1), 0.0)  # (B, G)
    if batch_norm and sample_valid.any():
        flat = A[sample_valid]
        mu = flat.mean()
        sigma = _pop_std((flat - mu).unsqueeze(0), flat.new_tensor([[float(flat.numel())]]), dim=-1).squeeze()
        A = torch.where(sample_valid, (A - mu) / (sigma + eps), 0.0)
    return A, terms


ADVANTAGES.add("grpo", GroupEstimator(lambda R, valid, o: grpo(R, valid, scale=o.scale)))
ADVANTAGES.add("dr_grpo", GroupEstimator(lambda R, valid, o: dr_grpo(R, valid)))
ADVANTAGES.add("rloo", GroupEstimator(lambda R, valid, o: rloo(R, valid)))
ADVANTAGES.add("pass_at_k", GroupEstimator(lambda R, valid, o: pass_at_k(R, valid, k=o.k), scores="outcome"))


@SHAPING.register("soft_overlong")
def soft_overlong(lengths: torch.Tensor, *, max_len: int, buffer: int, penalty: float = 1.0) -> torch.Tensor:
    """DAPO's soft overlong punishment (docs/algorithms.md §overlong): 0 up to max_len - buffer tokens, then
    falling linearly to -penalty at max_len, -penalty beyond. lengths (...) -> rewards (...)."""
    if not 0 < buffer <= max_len:
        raise ValueError(f"soft_overlong: need 0 < buffer <= max_len, got buffer={buffer}, max_len={max_len}")
    start = max_len - buffer
    over = (lengths.to(torch.float64) - start).clamp(min=0) / buffer
    return (-penalty * over.clamp(max=1.0)).to(torch.float32)


def discounted_reverse_cumsum(x: torch.Tensor, c: float, chunk: int = 256) -> torch.Tensor:
    """y_t = sum_{k >= t} c^(k-t) x_k along the last axis. (B, T) -> (B, T).

    Blocked: inside a block of `chunk` tokens it is one matmul with the (chunk, chunk) matrix
    M[k, t] = c^(k-t) (k >= t); across blocks a carry y_end decays by c^(end-t). T/chunk sequential
    steps instead of T, so it costs a few BLAS calls rather than T tiny kernel launches.
    """
    B, T = x.shape
    C = max(1, min(chunk, T))
    pad = (-T) % C
    if pad:
        x = torch.cat([x, x.new_zeros(B, pad)], dim=1)
    j = torch.arange(C, device=x.device)
    expo = j[:, None] - j[None, :]  # (C, C): k - t
    base = torch.tensor(float(c), dtype=x.dtype, device=x.device)
    M = torch.where(expo >= 0, base.pow(expo.clamp(min=0).to(x.dtype)), torch.zeros((), dtype=x.dtype))
    decay = base.pow((C - j).to(x.dtype))  # (C,): c^(C - t), from t to the first token of the next block
    out = torch.empty_like(x)
    carry = x.new_zeros(B)
    for s in reversed(range(0, x.shape[1], C)):
        y = x[:, s:s + C] @ M + carry[:, None] * decay[None, :]
        out[:, s:s + C] = y
        carry = y[:, 0]
    return out[:, :T]


def gae(rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, *, gamma: float = 1.0,
        lam: float = 0.95) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over right-padded responses.

    rewards, values, mask: (B, T); mask is 1 on the policy's tokens and 0 on the padding after them, and on
    the observation tokens of a multi-turn episode (holes). V(s_{T+1}) = 0 past each response's last token.
        delta_t = r_t + gamma V_{t'} - V_t            (t' the next policy token; zero on padding)
        A_t     = sum_l (gamma lam)^l delta_{t+l}     (a discounted reverse cumsum: padding deltas are 0,
                                                      so the sum stops at each response's end by itself)
    Observation tokens are not steps of the policy: each row's policy tokens are moved together (in order),
    the recursion runs over them, and the results go back to their positions (zero on the holes), so the
    last token of a turn bootstraps from the first token of the next turn.
    Returns (A, returns), both (B, T) and zero off the mask; returns = A + V is the critic's target G_t.
    """
    if not (rewards.shape == values.shape == mask.shape) or rewards.dim() != 2:
        raise ValueError(f"gae: shapes differ or are not (B, T): rewards {tuple(rewards.shape)}, "
                         f"values {tuple(values.shape)}, mask {tuple(mask.shape)}")
    m = mask.to(values.dtype)
    if (m[:, 1:] > m[:, :-1]).any():  # holes: the policy's tokens first, in their order, then run as padded rows
        order = torch.argsort((m == 0).to(torch.int8), dim=1, stable=True)  # (B, T)
        A_c, G_c = gae(rewards.gather(1, order), values.gather(1, order), m.gather(1, order), gamma=gamma, lam=lam)
        return (torch.zeros_like(A_c).scatter(1, order, A_c), torch.zeros_like(G_c).scatter(1, order, G_c))
    v_next = torch.cat([values[:, 1:] * m[:, 1:], values.new_zeros(values.shape[0], 1)], dim=1)  # (B, T)
    delta = (rewards + gamma * v_next - values) * m
    A = discounted_reverse_cumsum(delta, gamma * lam) * m
    return A, (A + values) * m


def gae_reference(rewards, values, mask, gamma: float = 1.0, lam: float = 0.95):
    """Plain-Python GAE, one sequence and one token at a time: the definition, for tests and benchmarks."""
    B, T = len(rewards), len(rewards[0])
    A = [[0.0] * T for _ in range(B)]
    for b in range(B):
        L = int(sum(mask[b]))
        for t in range(L):
            total, discount = 0.0, 1.0
            for k in range(t, L):
                v_next = float(values[b][k + 1]) if k + 1 < L else 0.0
                delta = float(rewards[b][k]) + gamma * v_next - float(values[b][k])
                total += discount * delta
                discount *= gamma * lam
            A[b][t] = total
    return A


def grpo_reference(R, valid, eps: float = 1e-4):
    """Plain-Python group-normalised advantages, one group at a time (for tests and benchmarks)."""
    out = []
    for row, ok in zip(R, valid):
        xs = [float(r) for r, v in zip(row, ok) if v]
        mu = sum(xs) / len(xs) if xs else 0.0
        sd = (sum((x - mu) ** 2 for x in xs) / len(xs)) ** 0.5 if xs else 0.0
        out.append([(float(r) - mu) / (sd + eps) if v else 0.0 for r, v in zip(row, ok)])
    return out


def whiten(A: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Advantages whitened over the masked tokens (docs/algorithms.md §gae): (A - mean) / (std + eps), 0 off the
    mask; mean and population std over the masked entries only. (B, T) -> (B, T)"""
    m = mask.to(A.dtype)
    n = m.sum().clamp(min=1)
    mu = (A * m).sum() / n
    sd = (((A - mu) ** 2 * m).sum() / n).sqrt()
    return (A - mu) / (sd + eps) * m


def process(step_rewards: torch.Tensor, step_ends: torch.Tensor, step_mask: torch.Tensor, T: int,
            eps: float = 1e-4) -> torch.Tensor:
    """Process-supervision advantages for one batch of groups (docs/algorithms.md §process).

    step_rewards, step_ends, step_mask: (B, G, K) -- K steps at most per sample, `step_ends` the index of each
    step's last response token, `step_mask` 1 for real steps. Rewards are normalised over all real steps of
    each group: r~ = (r - mean) / (std + eps). Returns A (B, G, T) with A_{i,t} = sum over steps k ending at
    or after t of r~_{i,k}.
    """
    if not (step_rewards.shape == step_ends.shape == step_mask.shape) or step_rewards.dim() != 3:
        raise ValueError("process: step_rewards, step_ends and step_mask must share a (B, G, K) shape")
    sm = step_mask.bool()
    if (step_ends[sm] >= T).any() or (step_ends[sm] < 0).any():
        raise ValueError(f"process: a step end lies outside [0, {T})")
    B, G, K = step_rewards.shape
    w = sm.to(step_rewards.dtype)
    n = w.sum((1, 2), keepdim=True).clamp(min=1)
    mu = (step_rewards * w).sum((1, 2), keepdim=True) / n
    sd = (((step_rewards - mu) * w).pow(2).sum((1, 2), keepdim=True) / n).sqrt()
    r_tilde = torch.where(sm, (step_rewards - mu) / (sd + eps), 0.0)  # (B, G, K)
    at_end = torch.zeros(B, G, T, dtype=step_rewards.dtype, device=step_rewards.device)
    at_end.scatter_add_(2, torch.where(sm, step_ends, 0).long(), r_tilde)  # r~ placed at each step's end token
    return at_end.flip(-1).cumsum(-1).flip(-1)  # reverse cumulative sum: steps ending at or after t
