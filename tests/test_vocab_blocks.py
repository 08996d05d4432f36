"""Vocabulary reductions block by block (algos/vocab_blocks.py): the same values and gradients as torch's operators
and autograd, the reference taken in float64 on the same inputs, for shapes that fit one block, several rows a
block, and rows split across blocks."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from reasoning_rl.algos import vocab_blocks
from reasoning_rl.algos.distill import DivergenceOptions, generalized_jsd, log_probs_at
from reasoning_rl.algos.vocab_blocks import generalized_jsd_from_logits, sampled_logprobs


def _reference_logprobs(z, y, tau):
    """log p(y) and the entropy with torch's operators, in float64. (B, T, V), (B, T) -> (B, T) x 2"""
    lp = torch.log_softmax(z.double() / tau, -1)
    return lp.gather(-1, y.unsqueeze(-1)).squeeze(-1), -(lp.exp() * lp).sum(-1)


# (B, T, V, block budget): one block; rows packed several to a block; each row's positions split across blocks
SHAPES = [(2, 3, 11, 1 << 21), (5, 4, 7, 60), (3, 9, 13, 30)]


@pytest.mark.parametrize("B,T,V,budget", SHAPES)
@pytest.mark.parametrize("tau", [1.0, 0.7])
def test_sampled_logprobs_and_entropy_equal_autograds_values_and_gradients(monkeypatch, B, T, V, budget, tau):
    monkeypatch.setattr(vocab_blocks, "BLOCK", budget)
    gen = torch.Generator().manual_seed(B * 100 + T)
    z = (3 * torch.randn(B, T, V, generator=gen)).requires_grad_()
    y = torch.randint(0, V, (B, T), generator=gen)
    g_lp, g_h = torch.randn(B, T, generator=gen), torch.randn(B, T, generator=gen)
    logp, H = sampled_logprobs(z, y, tau, with_entropy=True)
    (grad,) = torch.autograd.grad((logp * g_lp).sum() + (H * g_h).sum(), z)
    z64 = z.detach().double().requires_grad_()
    ref_lp, ref_h = _reference_logprobs(z64, y, tau)
    (ref_grad,) = torch.autograd.grad((ref_lp * g_lp.double()).sum() + (ref_h * g_h.double()).sum(), z64)
    torch.testing.assert_close(logp.double(), ref_lp, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(H.double(), ref_h, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(grad.double(), ref_grad, atol=1e-5, rtol=1e-4)
    lp_only, none = sampled_logprobs(z, y, tau)  # without the entropy: the log-prob's gradient alone
    (grad_lp,) = torch.autograd.grad((lp_only * g_lp).sum(), z)
    (ref_grad_lp,) = torch.autograd.grad((_reference_logprobs(z64, y, tau)[0] * g_lp.double()).sum(), z64)
    assert none is None
    torch.testing.assert_close(grad_lp.double(), ref_grad_lp, atol=1e-5, rtol=1e-4)
    (grad_h,) = torch.autograd.grad((sampled_logprobs(z, y, tau, with_entropy=True)[1] * g_h).sum(), z)  # H alone
    (ref_grad_h,) = torch.autograd.grad((_reference_logprobs(z64, y, tau)[1] * g_h.double()).sum(), z64)
    torch.testing.assert_close(grad_h.double(), ref_grad_h, atol=1e-5, rtol=1e-4)


# (beta, temperature): the forward KL, the mixture, the reverse KL (TRL's beta 0, 0 < beta < 1, 1)
@pytest.mark.parametrize("beta", [0.0, 0.3, 0.5, 1.0])
@pytest.mark.parametrize("tau", [1.0, 0.7])
@pytest.mark.parametrize("B,T,V,budget", SHAPES)
def test_the_generalized_jsd_from_logits_equals_its_definition_and_autograd(monkeypatch, beta, tau, B, T, V, budget):
    monkeypatch.setattr(vocab_blocks, "BLOCK", budget)
    gen = torch.Generator().manual_seed(T * 10 + V)
    z_s = (2 * torch.randn(B, T, V, generator=gen)).requires_grad_()
    z_t = 2 * torch.randn(B, T, V, generator=gen)
    g = torch.randn(B, T, generator=gen)
    d = generalized_jsd_from_logits(z_s, z_t, beta, tau)
    (grad,) = torch.autograd.grad((d * g).sum(), z_s)
    z64 = z_s.detach().double().requires_grad_()
    ref = generalized_jsd(log_probs_at(z64, tau).double(), torch.log_softmax(z_t.double() / tau, -1),
                          DivergenceOptions(beta=beta))
    (ref_grad,) = torch.autograd.grad((ref * g.double()).sum(), z64)
    torch.testing.assert_close(d.double(), ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(grad.double(), ref_grad, atol=1e-5, rtol=1e-4)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 4), st.integers(1, 6), st.integers(2, 20), st.floats(0.0, 1.0), st.integers(0, 2**16))
def test_the_jsd_is_zero_with_a_zero_gradient_where_teacher_and_student_agree(B, T, V, beta, seed):
    """At p_S = p_T every generalized JSD is at its minimum: 0, and so is its gradient (any shape, any beta)."""
    z = (3 * torch.randn(B, T, V, generator=torch.Generator().manual_seed(seed))).requires_grad_()
    d = generalized_jsd_from_logits(z, z.detach() + 1.5, beta)  # a constant shift: the same distribution
    (grad,) = torch.autograd.grad(d.sum(), z)
    assert d.abs().max() < 1e-5 and grad.abs().max() < 1e-5


def test_bfloat16_logits_are_reduced_in_float32_and_get_a_bfloat16_gradient():
    gen = torch.Generator().manual_seed(0)
    z = (3 * torch.randn(2, 4, 50, generator=gen)).bfloat16().requires_grad_()
    y = torch.randint(0, 50, (2, 4), generator=gen)
    logp, _ = sampled_logprobs(z, y)
    (grad,) = torch.autograd.grad(logp.sum(), z)
    assert logp.dtype == torch.float32 and grad.dtype == torch.bfloat16
    torch.testing.assert_close(logp.double(), _reference_logprobs(z.detach().float(), y, 1.0)[0], atol=1e-5, rtol=0)


def test_bad_shapes_and_beta_are_refused_in_one_line():
    z = torch.zeros(2, 3, 5)
    with pytest.raises(ValueError, match=r"logits \(2, 3, 5\) and ids \(2, 4\)"):
        sampled_logprobs(z, torch.zeros(2, 4, dtype=torch.long))
    with pytest.raises(ValueError, match="beta must be in"):
        generalized_jsd_from_logits(z, z, 1.5)
    with pytest.raises(ValueError, match=r"student logits \(2, 3, 5\) and teacher logits \(2, 3, 6\)"):
        generalized_jsd_from_logits(z, torch.zeros(2, 3, 6), 0.5)


def _reference_kept(z, y, tau, floor):
    """log p_K(y) over K = {v : z_v / tau >= min(floor, z_y / tau)}, with torch's operators in float64 (membership
    decided in float32, as the floor was written: a float64 z / tau may fall a rounding under its own float32)."""
    z32 = z.detach().float() / tau
    out = z32 < torch.minimum(floor, z32.gather(-1, y.unsqueeze(-1)).squeeze(-1)).unsqueeze(-1)
    zt = z.double() / tau
    return torch.log_softmax(zt.masked_fill(out, float("-inf")), -1).gather(-1, y.unsqueeze(-1)).squeeze(-1)


@pytest.mark.parametrize("B,T,V,budget", SHAPES)
@pytest.mark.parametrize("tau", [1.0, 0.7])
def test_kept_set_logprobs_equal_the_truncated_softmax_and_its_gradient(monkeypatch, B, T, V, budget, tau):
    """Each token's log-prob over its kept set (the floor a random kept logit, some floors above the token drawn: a
    recomputed logit a hair under the engine's floor still counts the token in) equals log_softmax of the masked
    logits in float64, values and gradients; the entropy is the whole distribution's, as without a floor."""
    monkeypatch.setattr(vocab_blocks, "BLOCK", budget)
    gen = torch.Generator().manual_seed(B * 7 + V)
    z = (3 * torch.randn(B, T, V, generator=gen)).requires_grad_()
    y = torch.randint(0, V, (B, T), generator=gen)
    floor = (z.detach() / tau).gather(-1, torch.randint(0, V, (B, T, 1), generator=gen)).squeeze(-1)
    floor[0, 0] = float("-inf")  # a token whose distribution nothing cut
    g_lp, g_h = torch.randn(B, T, generator=gen), torch.randn(B, T, generator=gen)
    logp, H = sampled_logprobs(z, y, tau, with_entropy=True, floor=floor)
    (grad,) = torch.autograd.grad((logp * g_lp).sum() + (H * g_h).sum(), z)
    z64 = z.detach().double().requires_grad_()
    ref_lp, ref_h = _reference_kept(z64, y, tau, floor), _reference_logprobs(z64, y, tau)[1]
    (ref_grad,) = torch.autograd.grad((ref_lp * g_lp.double()).sum() + (ref_h * g_h.double()).sum(), z64)
    torch.testing.assert_close(logp.double(), ref_lp, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(H.double(), ref_h, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(grad.double(), ref_grad, atol=1e-5, rtol=1e-4)
    full = sampled_logprobs(z, y, tau)[0]
    assert bool((logp >= full - 1e-6).all())  # renormalised over fewer tokens: never below the whole softmax's


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 40), st.floats(0.3, 2.0), st.integers(0, 2**31 - 1))
def test_kept_set_properties(V, tau, seed):
    """docs/algorithms.md §kept-set: log p_K(y) = log p(y) - log p(K) (the kept mass), so it is never below the
    whole softmax's, equals it when the floor keeps every token, and the kept set's probabilities sum to 1."""
    gen = torch.Generator().manual_seed(seed)
    z = 2 * torch.randn(1, V, V, generator=gen)  # V positions, each a distribution over V
    y = torch.arange(V).unsqueeze(0)  # every token drawn once
    floor = (z / tau).gather(-1, torch.randint(0, V, (1, V, 1), generator=gen)).squeeze(-1)
    kept, _ = sampled_logprobs(z, y, tau, floor=floor)
    full, _ = sampled_logprobs(z, y, tau)
    zt = z / tau
    in_k = zt >= torch.minimum(floor, zt.gather(-1, y.unsqueeze(-1)).squeeze(-1)).unsqueeze(-1)
    mass = (torch.softmax(zt.double(), -1) * in_k).sum(-1)  # p(K) of each position's kept set
    torch.testing.assert_close(kept.double(), (full.double() - mass.log()), atol=1e-5, rtol=1e-5)
    everything = sampled_logprobs(z, y, tau, floor=zt.amin(-1))[0]
    torch.testing.assert_close(everything, full, atol=1e-6, rtol=1e-6)
    for pos in range(min(V, 4)):  # the kept set's probabilities, each token of it drawn in turn, sum to 1
        members = (zt[0, pos] >= floor[0, pos]).nonzero().squeeze(-1)  # the set the engine drew from
        zz = z[:, pos:pos + 1].expand(1, len(members), V)
        lp = sampled_logprobs(zz, members.unsqueeze(0), tau, floor=floor[:, pos:pos + 1].expand(1, len(members)))[0]
        assert abs(float(lp.exp().sum()) - 1.0) < 1e-5


def test_an_all_minus_infinity_floor_is_the_whole_softmax_bit_for_bit():
    gen = torch.Generator().manual_seed(3)
    z, y = torch.randn(2, 5, 17, generator=gen), torch.randint(0, 17, (2, 5), generator=gen)
    a = sampled_logprobs(z, y, 0.7, with_entropy=True)
    b = sampled_logprobs(z, y, 0.7, with_entropy=True, floor=torch.full((2, 5), float("-inf")))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
