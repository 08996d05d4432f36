"""Per-token quantities over the whole vocabulary, computed block by block with their gradients in closed form.

A (B, T, V) tensor of logits, V the vocabulary (49,152 for SmolLM2: 400 MB in float32 at 32 x 64 tokens), reduced
to one number a token:

    sampled_logprobs(z, y, tau)         log p(y_t) = z_y / tau - logsumexp(z / tau)         (B, T)
                                        and, if asked, the entropy H_t = logsumexp - sum_v p_v z_v / tau
    sampled_logprobs(z, y, tau, floor)  the same over each token's kept set K_t = {v : z_v / tau >= floor_t} + {y_t}
                                        (top-p / top-k sampling: docs/algorithms.md §kept-set), log p_K(y_t) =
                                        z_y / tau - logsumexp_{v in K_t}(z_v / tau); the entropy stays the whole one's
    generalized_jsd_from_logits(z_s, z_t, beta, tau)
                                        algos/distill.generalized_jsd of log_softmax(z_s / tau) and of
                                        log_softmax(z_t / tau) (the teacher's, no gradient)  (B, T)

Written with torch's operators, each of these makes and keeps several (B, T, V) intermediates (the log-softmax, the
probabilities, their products) and autograd walks each of them back: a dozen passes over memory that does not fit
in any cache. Here the forward pass works on blocks of about 2 M entries (8 MB, within a server core's L2 + L3
share) and keeps only its input and a number or two a token; the backward pass recomputes the block's softmax and
writes the gradient once, from its closed form (p the student's probabilities):

    d log p(y) / dz_v = (1[v = y] - p_v) / tau         (over a kept set: p_K,v, 0 outside K)
    d H / dz_v        = -p_v (log p_v + H) / tau
    d JSD / dz_v      = p_v (q_v - sum_u p_u q_u) / tau,   q_v = dJSD/dp_v:
                        (1 - beta) log(p_v / m_v) (0 < beta < 1), log(p_v / p_T,v) (beta = 1)
                        and for beta = 0 (the forward KL) d/dz_v = (p_v - p_T,v) / tau

The same values as the operator-by-operator formulas up to float rounding (tests/test_vocab_blocks.py checks values
and gradients against autograd in float64), in about half their time on a 2-core CPU (the figures:
docs/results.md). No double backward (nothing here needs one). On a GPU the blocks are 32 times larger, so a
long batch is tens of launches; that path has not run on a device here.

Not here: the logits themselves (a model's forward pass, models/logprobs.py), any aggregation over tokens
(losses.py).
"""
from __future__ import annotations

import math
from typing import Iterator

import torch

__all__ = ["sampled_logprobs", "generalized_jsd_from_logits", "log_probs_at"]

BLOCK = 1 << 21  # entries of (B, T, V) a block holds on a CPU: 8 MB of float32
BLOCK_ACCELERATOR = 1 << 26  # on a GPU: 256 MB, so that a long batch is tens of blocks, not thousands of launches


def _blocks(B: int, T: int, V: int, device: torch.device) -> Iterator[tuple[slice, slice]]:
    """(rows, positions) slices that tile (B, T): whole rows together while a row fits the device's block, else a
    row's positions in runs of block // V."""
    budget = BLOCK if device.type == "cpu" else BLOCK_ACCELERATOR
    if T * V <= budget:
        nb = max(1, budget // max(1, T * V))
        for b in range(0, B, nb):
            yield slice(b, b + nb), slice(0, T)
        return
    ct = max(1, budget // V)
    for b in range(B):
        for t in range(0, T, ct):
            yield slice(b, b + 1), slice(t, t + ct)


def _scaled(z: torch.Tensor, tau: float) -> torch.Tensor:
    """One block of logits in float32 at temperature tau (a copy when either changes it)."""
    z = z.float()
    return z / tau if tau != 1.0 else z


def _lse_entropy(zc: torch.Tensor, with_entropy: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """One block's logsumexp (b, t) and, if asked, its entropy logsumexp - sum_v p_v z_v (b, t), from one
    exponential of the block."""
    m = zc.amax(-1, keepdim=True)
    e = torch.exp(zc - m)  # the block's one exponential
    s = e.sum(-1, keepdim=True)
    l_c = (m + s.log()).squeeze(-1)
    return l_c, (l_c - (e * zc).sum(-1) / s.squeeze(-1)) if with_entropy else None


def _kept_for_backward(ctx, saved: tuple, tau: float, with_entropy: bool, logp: torch.Tensor, H: torch.Tensor):
    """A log-prob Function's forward end: what its backward reads kept, H (the last saved) marked as having no
    gradient when it was not asked for; returns (logp, H)."""
    ctx.save_for_backward(*saved)
    ctx.tau, ctx.with_entropy = tau, with_entropy
    if not with_entropy:
        ctx.mark_non_differentiable(H)
    return logp, H


class _SampledLogprobs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, z, y, tau, with_entropy):  # z (B, T, V), y (B, T) -> logp (B, T), H (B, T) or empty
        B, T, V = z.shape
        lse = torch.empty(B, T, device=z.device)
        logp = torch.empty(B, T, device=z.device)
        H = torch.empty(B, T, device=z.device) if with_entropy else torch.empty(0, device=z.device)
        for rows, pos in _blocks(B, T, V, z.device):
            zc = _scaled(z[rows, pos], tau)
            l_c, h = _lse_entropy(zc, with_entropy)
            lse[rows, pos] = l_c
            logp[rows, pos] = zc.gather(-1, y[rows, pos].unsqueeze(-1)).squeeze(-1) - l_c
            if with_entropy:
                H[rows, pos] = h
        return _kept_for_backward(ctx, (z, y, lse, H), tau, with_entropy, logp, H)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g_logp, g_H):
        z, y, lse, H = ctx.saved_tensors
        tau = ctx.tau
        if g_logp is None:  # only the entropy reached a loss
            g_logp = torch.zeros_like(lse)
        grad = torch.empty_like(z)
        B, T, V = z.shape
        with_h = ctx.with_entropy and g_H is not None
        for rows, pos in _blocks(B, T, V, z.device):
            log_p = _scaled(z[rows, pos], tau) - lse[rows, pos].unsqueeze(-1)  # (b, t, V) log-softmax
            g = g_logp[rows, pos].unsqueeze(-1)
            coef = -g if not with_h else -g - g_H[rows, pos].unsqueeze(-1) * (log_p + H[rows, pos].unsqueeze(-1))
            out = log_p.exp_().mul_(coef)  # p * coefficient, in the block's own buffer
            out.scatter_add_(-1, y[rows, pos].unsqueeze(-1), g)
            if tau != 1.0:
                out.div_(tau)
            grad[rows, pos] = out
        return grad, None, None, None


class _KeptLogprobs(torch.autograd.Function):
    """`_SampledLogprobs` with each token's log-prob renormalised over its kept set (z / tau >= the token's floor,
    the sampled token always in it); the entropy is the whole distribution's."""

    @staticmethod
    def forward(ctx, z, y, floor, tau, with_entropy):  # floor (B, T)
        B, T, V = z.shape
        lse_k, lse, logp = (torch.empty(B, T, device=z.device) for _ in range(3))
        low = torch.empty(B, T, device=z.device)  # the effective floor: min(floor, z_y / tau)
        H = torch.empty(B, T, device=z.device) if with_entropy else torch.empty(0, device=z.device)
        for rows, pos in _blocks(B, T, V, z.device):
            zc = _scaled(z[rows, pos], tau)
            zy = zc.gather(-1, y[rows, pos].unsqueeze(-1))  # (b, t, 1)
            f = torch.minimum(floor[rows, pos].unsqueeze(-1).to(zc.dtype), zy)  # a recomputed logit a hair below
            low[rows, pos] = f.squeeze(-1)  # the engine's floor still keeps the token that was drawn
            zk = zc.masked_fill(zc < f, float("-inf"))
            m = zk.amax(-1, keepdim=True)
            l_k = (m + torch.exp(zk - m).sum(-1, keepdim=True).log()).squeeze(-1)
            lse_k[rows, pos] = l_k
            logp[rows, pos] = zy.squeeze(-1) - l_k
            if with_entropy:
                lse[rows, pos], H[rows, pos] = _lse_entropy(zc, True)
        return _kept_for_backward(ctx, (z, y, low, lse_k, lse, H), tau, with_entropy, logp, H)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g_logp, g_H):
        z, y, low, lse_k, lse, H = ctx.saved_tensors
        tau = ctx.tau
        if g_logp is None:
            g_logp = torch.zeros_like(lse_k)
        grad = torch.empty_like(z)
        B, T, V = z.shape
        with_h = ctx.with_entropy and g_H is not None
        for rows, pos in _blocks(B, T, V, z.device):
            zc = _scaled(z[rows, pos], tau)
            g = g_logp[rows, pos].unsqueeze(-1)
            out = (zc - lse_k[rows, pos].unsqueeze(-1)).exp_().masked_fill_(zc < low[rows, pos].unsqueeze(-1), 0.0)
            out.mul_(-g)  # -g p_K,v: the kept set's softmax, 0 outside it
            out.scatter_add_(-1, y[rows, pos].unsqueeze(-1), g)
            if with_h:
                log_p = zc - lse[rows, pos].unsqueeze(-1)
                coef = -g_H[rows, pos].unsqueeze(-1) * (log_p + H[rows, pos].unsqueeze(-1))
                out.add_(log_p.exp_().mul_(coef))
            if tau != 1.0:
                out.div_(tau)
            grad[rows, pos] = out
        return grad, None, None, None, None


def sampled_logprobs(z: torch.Tensor, y: torch.Tensor, temperature: float = 1.0, with_entropy: bool = False,
                     floor: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(log p(y_t), H_t or None) from logits z (B, T, V) at `temperature`, float32 (B, T) each, differentiable in z
    (both terms). y (B, T) int64 ids. Positions the caller masks still get a value (their gradient is whatever the
    caller's loss gives them: zero when it multiplies them by a mask). `floor` (B, T): each log-prob over its kept
    set (the module's docstring); None, or -inf everywhere (nothing cut), is the whole softmax, computed as without
    it."""
    if z.dim() != 3 or y.shape != z.shape[:2]:
        raise ValueError(f"sampled_logprobs: logits {tuple(z.shape)} and ids {tuple(y.shape)} must be (B, T, V) and "
                         "(B, T)")
    if floor is not None and floor.shape != y.shape:
        raise ValueError(f"sampled_logprobs: floor {tuple(floor.shape)} must be the ids' {tuple(y.shape)}")
    if floor is not None and bool(torch.isfinite(floor).any()):
        logp, H = _KeptLogprobs.apply(z, y, floor, float(temperature), with_entropy)
    else:
        logp, H = _SampledLogprobs.apply(z, y, float(temperature), with_entropy)
    return logp, (H if with_entropy else None)


def log_probs_at(logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """log_softmax(logits / tau) in float32, all at once (a block's, or the definitions' in algos/distill.py).
    (..., V) -> (..., V)"""
    return torch.log_softmax(_scaled(logits, temperature), -1)


def _log_softmaxes(zs: torch.Tensor, zt: torch.Tensor, tau: float) -> tuple[torch.Tensor, torch.Tensor]:
    """One block's student and teacher log-probabilities at temperature tau, float32 (b, t, V) each."""
    return log_probs_at(zs, tau), log_probs_at(zt, tau)


def _jsd_value(ls: torch.Tensor, lt: torch.Tensor, beta: float) -> torch.Tensor:
    """The generalized JSD of one block from its log-probabilities (algos/distill.generalized_jsd). -> (b, t)"""
    if beta == 0.0:  # forward KL(p_T || p_S)
        return (lt.exp() * (lt - ls)).sum(-1)
    if beta == 1.0:  # reverse KL(p_S || p_T)
        return (ls.exp() * (ls - lt)).sum(-1)
    lm = torch.logaddexp(ls + math.log(1 - beta), lt + math.log(beta))  # the mixture m, in logs
    return (beta * lt.exp() * (lt - lm) + (1 - beta) * ls.exp() * (ls - lm)).sum(-1)


def _jsd_grad(ls: torch.Tensor, lt: torch.Tensor, beta: float, tau: float) -> torch.Tensor:
    """d JSD / d z_s of one block for a unit incoming gradient (the module docstring's closed form). -> (b, t, V)"""
    ps = ls.exp()
    if beta == 0.0:
        return ps.sub_(lt.exp()).div_(tau)
    if beta == 1.0:  # q = log(p_S / p_T) (+ 1, which the softmax's Jacobian cancels)
        q = ls - lt
    else:
        q = torch.logaddexp(ls + math.log(1 - beta), lt + math.log(beta)).neg_().add_(ls).mul_(1 - beta)
    q -= (ps * q).sum(-1, keepdim=True)
    return ps.mul_(q).div_(tau)


class _JSD(torch.autograd.Function):
    @staticmethod
    def forward(ctx, zs, zt, beta, tau):
        B, T, V = zs.shape
        d = torch.empty(B, T, device=zs.device)
        for rows, pos in _blocks(B, T, V, zs.device):
            d[rows, pos] = _jsd_value(*_log_softmaxes(zs[rows, pos], zt[rows, pos], tau), beta)
        ctx.save_for_backward(zs, zt)
        ctx.beta, ctx.tau = beta, tau
        return d

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g_d):
        zs, zt = ctx.saved_tensors
        grad = torch.empty_like(zs)
        B, T, V = zs.shape
        for rows, pos in _blocks(B, T, V, zs.device):
            g = _jsd_grad(*_log_softmaxes(zs[rows, pos], zt[rows, pos], ctx.tau), ctx.beta, ctx.tau)
            grad[rows, pos] = g.mul_(g_d[rows, pos].unsqueeze(-1))
        return grad, None, None, None


def generalized_jsd_from_logits(z_s: torch.Tensor, z_t: torch.Tensor, beta: float, temperature: float = 1.0
                                ) -> torch.Tensor:
    """algos/distill.generalized_jsd (TRL DistillationTrainer's: beta 0 the forward KL, 1 the reverse KL, else the
    mixture's) of the student's logits z_s (B, T, V), differentiable, and the teacher's z_t (B, T, V, no gradient),
    both at `temperature`. -> (B, T) float32"""
    if not 0.0 <= beta <= 1.0:
        raise ValueError(f"generalized_jsd: beta must be in [0, 1], got {beta}")
    if z_s.shape != z_t.shape or z_s.dim() != 3:
        raise ValueError(f"generalized_jsd: student logits {tuple(z_s.shape)} and teacher logits {tuple(z_t.shape)} "
                         "must be the same (B, T, V)")
    return _JSD.apply(z_s, z_t.detach(), float(beta), float(temperature))
