"""docs/algorithms.md §ppo-clip, §kl, §aggregation, §dpo as tests: PPO clip, KL estimators, aggregation, DPO."""
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import example, given, settings
from hypothesis import strategies as st

from reasoning_rl.algos.losses import (AGGREGATIONS, KL_ESTIMATORS, bradley_terry, dpo_sigmoid, entropy_bonus,
                                       entropy_from_logits, ipo, kl_in_reward, kl_k1, kl_k3, policy_gradient, ppo_clip,
                                       value_loss)



pytestmark = pytest.mark.usefixtures("float64")  # exact-arithmetic checks


# ---------------------------------------------------------------- PPO clip (docs/algorithms.md §ppo-clip)
@given(B=st.integers(1, 4), T=st.integers(1, 6), seed=st.integers(0, 10**6))
@settings(max_examples=40, deadline=None)
def test_gradient_at_ratio_one_is_plain_policy_gradient(B, T, seed):
    g = torch.Generator().manual_seed(seed)
    logp = (-torch.rand(B, T, generator=g) * 3).requires_grad_()
    A = torch.randn(B, generator=g)
    mask = (torch.rand(B, T, generator=g) > 0.3).double()
    mask[:, 0] = 1
    for agg in ("token_mean", "seq_mean_token_mean"):
        (g1,) = torch.autograd.grad(ppo_clip(logp, logp.detach(), A, mask, agg=agg).loss, logp)
        (g2,) = torch.autograd.grad(policy_gradient(logp, A, mask, agg=agg).loss, logp)
        assert torch.allclose(g1, g2, atol=1e-12)


# (A, log rho, eps_low, eps_high, gradient is zero?) -- the clipped regions
CLIP_TABLE = [
    (1.0, math.log(1.3), 0.2, 0.2, True),  # A > 0, rho > 1 + eps_high: clipped
    (1.0, math.log(1.1), 0.2, 0.2, False),  # inside the trust region
    (1.0, math.log(0.5), 0.2, 0.2, False),  # A > 0 and rho small: not clipped (min picks the unclipped term)
    (-1.0, math.log(0.7), 0.2, 0.2, True),  # A < 0, rho < 1 - eps_low: clipped
    (-1.0, math.log(1.5), 0.2, 0.2, False),  # A < 0 and rho large: pessimistic bound keeps the gradient
    (1.0, math.log(1.25), 0.2, 0.28, False),  # DAPO clip-higher: 1.25 < 1.28
    (1.0, math.log(1.30), 0.2, 0.28, True),
]


@pytest.mark.parametrize("A,log_rho,eps_low,eps_high,zero", CLIP_TABLE)
def test_zero_gradient_in_clipped_regions(A, log_rho, eps_low, eps_high, zero):
    logp_old = torch.tensor([[-1.0]])
    logp = (logp_old + log_rho).requires_grad_()
    out = ppo_clip(logp, logp_old, torch.tensor([A]), torch.ones(1, 1), eps_low=eps_low, eps_high=eps_high)
    (grad,) = torch.autograd.grad(out.loss, logp)
    assert (grad.abs().item() == 0.0) is zero
    assert out.metrics["clip_ratio/region"] == (1.0 if zero else 0.0)


@given(A=st.floats(0.01, 5), excess=st.floats(0.001, 3), eps=st.floats(0.05, 0.5))
@settings(max_examples=50, deadline=None)
def test_positive_advantage_above_the_clip_has_no_gradient(A, excess, eps):
    logp_old = torch.tensor([[-2.0]])
    logp = (logp_old + math.log(1 + eps + excess)).requires_grad_()
    (grad,) = torch.autograd.grad(ppo_clip(logp, logp_old, torch.tensor([A]), torch.ones(1, 1), eps_low=eps).loss, logp)
    assert grad.item() == 0.0


def test_clip_metrics_count_tokens_and_report_kl():
    logp_old = torch.zeros(1, 4)
    logp = torch.log(torch.tensor([[1.5, 1.0, 0.5, 1.1]]))
    A = torch.tensor([[1.0, 1.0, -1.0, -1.0]])
    out = ppo_clip(logp, logp_old, A, torch.ones(1, 4), eps_low=0.2)
    assert out.metrics["clip_ratio/high"] == 0.25 and out.metrics["clip_ratio/low"] == 0.25
    assert out.metrics["clip_ratio/region"] == 0.5
    lr = logp - logp_old
    assert out.metrics["approx_kl"] == pytest.approx((torch.exp(-lr) + lr - 1).mean().item())
    assert out.metrics["ratio/max"] == pytest.approx(1.5)


def test_dual_clip_bounds_negative_advantage_loss():
    logp_old = torch.zeros(1, 1)
    logp = torch.tensor([[math.log(10.0)]], requires_grad=True)  # rho = 10, A < 0: unbounded without dual clip
    A = torch.tensor([-1.0])
    plain = ppo_clip(logp, logp_old, A, torch.ones(1, 1)).loss
    dual = ppo_clip(logp, logp_old, A, torch.ones(1, 1), dual_clip=3.0).loss
    assert plain.item() == pytest.approx(10.0) and dual.item() == pytest.approx(3.0)
    with pytest.raises(ValueError):
        ppo_clip(logp, logp_old, A, torch.ones(1, 1), dual_clip=0.5)


def test_kl_in_loss_adds_beta_times_estimator():
    logp = torch.tensor([[-1.0, -2.0]])
    ref = torch.tensor([[-1.5, -1.0]])
    base = ppo_clip(logp, logp, torch.tensor([0.0]), torch.ones(1, 2)).loss
    withkl = ppo_clip(logp, logp, torch.tensor([0.0]), torch.ones(1, 2), logp_ref=ref, beta=0.1)
    assert withkl.loss.item() == pytest.approx(base.item() + 0.1 * kl_k3(logp, ref).mean().item())  # rho = 1
    assert withkl.metrics["kl"] == pytest.approx(kl_k3(logp, ref).mean().item())
    old = logp - 0.5  # rho = e^0.5: the importance-weighted KL term scales by rho, the plain one does not
    w = ppo_clip(logp, old, torch.tensor([0.0]), torch.ones(1, 2), logp_ref=ref, beta=0.1).loss
    nw = ppo_clip(logp, old, torch.tensor([0.0]), torch.ones(1, 2), logp_ref=ref, beta=0.1,
                  kl_importance_weight=False).loss
    assert w.item() == pytest.approx(math.exp(0.5) * nw.item())


def test_kl_in_reward_shapes_with_old_vs_ref():
    r = torch.tensor([[0.0, 1.0]])
    out = kl_in_reward(r, torch.tensor([[-1.0, -1.0]]), torch.tensor([[-2.0, -0.5]]), torch.ones(1, 2), beta=0.5)
    assert torch.allclose(out, torch.tensor([[-0.5, 1.25]]))


# ---------------------------------------------------------------- value / entropy
def test_value_loss_and_clipping():
    v = torch.tensor([[1.0, 0.0]])
    G = torch.tensor([[0.0, 0.0]])
    assert value_loss(v, G, torch.ones(1, 2)).loss.item() == pytest.approx(0.5)
    # clipped: V moved from V_old=0.0 to 1.0 with c=0.2 -> clipped V=0.2, max((1-0)^2, (0.2-0)^2) = 1
    out = value_loss(v, G, torch.ones(1, 2), values_old=torch.zeros(1, 2), clip_range=0.2)
    assert out.loss.item() == pytest.approx(0.5)
    G2 = torch.tensor([[2.0, 0.0]])  # now the clipped error is larger: (0.2-2)^2 = 3.24 vs (1-2)^2 = 1
    out2 = value_loss(v, G2, torch.ones(1, 2), values_old=torch.zeros(1, 2), clip_range=0.2)
    assert out2.loss.item() == pytest.approx(3.24 / 2) and out2.metrics["value/clipfrac"] == 0.5


def test_entropy_matches_definition():
    logits = torch.randn(2, 3, 7)
    p = torch.softmax(logits, -1)
    assert torch.allclose(entropy_from_logits(logits), -(p * p.log()).sum(-1))
    out = entropy_bonus(entropy_from_logits(logits), torch.ones(2, 3))
    assert out.loss.item() == pytest.approx(-out.metrics["entropy"])


# ---------------------------------------------------------------- KL estimators (docs/algorithms.md §kl)
@given(a=st.floats(-20, 0), b=st.floats(-20, 0))
@settings(max_examples=200, deadline=None)
@example(a=-1.6475819258762353e-09, b=0.0)  # exp(x) - x - 1 gave -1.1e-16 here
def test_k3_is_nonnegative(a, b):
    assert kl_k3(torch.tensor(a), torch.tensor(b)).item() >= 0.0


@given(seed=st.integers(0, 10**6), K=st.integers(2, 8))
@settings(max_examples=50, deadline=None)
def test_k1_and_k3_expectations_equal_the_exact_kl(seed, K):
    g = torch.Generator().manual_seed(seed)
    p = torch.softmax(torch.randn(K, generator=g) * 2, 0)  # pi_theta
    q = torch.softmax(torch.randn(K, generator=g) * 2, 0)  # pi_ref
    kl = (p * (p.log() - q.log())).sum()
    for name in ("k1", "k3"):
        est = (p * KL_ESTIMATORS.get(name)(p.log(), q.log())).sum()  # E_{a ~ pi_theta}[k(a)]
        assert est.item() == pytest.approx(kl.item(), rel=1e-9, abs=1e-12)
    k2 = (p * KL_ESTIMATORS.get("k2")(p.log(), q.log())).sum()
    assert k2.item() >= 0


# ---------------------------------------------------------------- aggregation (docs/algorithms.md §aggregation)
@given(B=st.integers(1, 5), T=st.integers(1, 9), seed=st.integers(0, 10**6), extra=st.integers(0, 5))
@settings(max_examples=50, deadline=None)
def test_aggregations_agree_up_to_the_constant_with_equal_lengths(B, T, seed, extra):
    x = torch.randn(B, T + extra, generator=torch.Generator().manual_seed(seed))
    mask = torch.zeros(B, T + extra)
    mask[:, :T] = 1  # equal lengths T, padded by `extra`
    max_len = T + extra
    tm = AGGREGATIONS.get("token_mean")(x, mask)
    sm = AGGREGATIONS.get("seq_mean_token_mean")(x, mask)
    sn = AGGREGATIONS.get("seq_mean_token_sum_norm")(x, mask, max_len)
    assert torch.allclose(tm, sm) and torch.allclose(sn * max_len / T, tm)


def test_aggregations_differ_with_unequal_lengths():
    x = torch.tensor([[1.0, 1.0, 1.0, 1.0], [4.0, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1, 1, 1], [1, 0, 0, 0]])
    assert AGGREGATIONS.get("token_mean")(x, mask).item() == pytest.approx(8 / 5)
    assert AGGREGATIONS.get("seq_mean_token_mean")(x, mask).item() == pytest.approx(2.5)
    assert AGGREGATIONS.get("seq_mean_token_sum_norm")(x, mask, 4).item() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="max_len"):
        AGGREGATIONS.get("seq_mean_token_sum_norm")(x, mask)


# ---------------------------------------------------------------- DPO (docs/algorithms.md §dpo)
@given(lw=st.floats(-50, 0), ll=st.floats(-50, 0), beta=st.floats(0.01, 5))
@settings(max_examples=50, deadline=None)
def test_dpo_is_log2_when_policy_equals_reference(lw, ll, beta):
    t = lambda v: torch.tensor([v])  # noqa: E731
    out = dpo_sigmoid(t(lw), t(ll), t(lw), t(ll), beta=beta)
    assert out.loss.item() == pytest.approx(math.log(2))


@given(seed=st.integers(0, 10**6), beta=st.floats(0.05, 3))
@settings(max_examples=40, deadline=None)
def test_dpo_autograd_gradient_equals_closed_form(seed, beta):
    g = torch.Generator().manual_seed(seed)
    theta = torch.randn(6, generator=g, requires_grad=True)
    ref = torch.randn(6, generator=g)
    w, l = 1, 4
    logp = torch.log_softmax(theta, 0)
    ref_logp = torch.log_softmax(ref, 0)
    out = dpo_sigmoid(logp[w:w + 1], logp[l:l + 1], ref_logp[w:w + 1], ref_logp[l:l + 1], beta=beta)
    (grad,) = torch.autograd.grad(out.loss, theta)
    with torch.no_grad():
        pi = torch.softmax(theta, 0)
        z = beta * ((logp[w] - ref_logp[w]) - (logp[l] - ref_logp[l]))
        grad_w = torch.eye(6)[w] - pi  # grad log pi(y_w)
        grad_l = torch.eye(6)[l] - pi
        closed = -beta * torch.sigmoid(-z) * (grad_w - grad_l)
    assert torch.allclose(grad, closed, atol=1e-10)


def test_kl_regularised_optimum_beats_random_points():
    g = torch.Generator().manual_seed(0)
    K, beta = 5, 0.7
    ref = torch.softmax(torch.randn(K, generator=g), 0)
    r = torch.randn(K, generator=g)

    def J(pi):
        return (pi * r).sum() - beta * (pi * (pi.log() - ref.log())).sum()

    pi_star = ref * torch.exp(r / beta)
    pi_star = pi_star / pi_star.sum()
    best = J(pi_star)
    for _ in range(2000):
        x = torch.distributions.Dirichlet(torch.ones(K)).sample()
        x = x.clamp(min=1e-12) / x.clamp(min=1e-12).sum()
        assert J(x) <= best + 1e-12


def test_dpo_metrics_and_label_smoothing():
    t = torch.tensor
    out = dpo_sigmoid(t([-1.0, -2.0]), t([-3.0, -1.0]), t([-2.0, -2.0]), t([-2.0, -2.0]), beta=0.5)
    # chosen logratios 1, 0; rejected -1, 1 -> margins 0.5*2=1, 0.5*-1=-0.5
    assert out.metrics["rewards/margins"] == pytest.approx(0.25)
    assert out.metrics["rewards/accuracies"] == 0.5
    z = torch.tensor([1.0, -0.5])
    assert out.loss.item() == pytest.approx((-F.logsigmoid(z)).mean().item())
    ls = dpo_sigmoid(t([-1.0]), t([-3.0]), t([-2.0]), t([-2.0]), beta=0.5, label_smoothing=0.1)
    assert ls.loss.item() == pytest.approx((-0.9 * F.logsigmoid(t(1.0)) - 0.1 * F.logsigmoid(t(-1.0))).item())


def test_ipo_and_bradley_terry():
    t = torch.tensor
    out = ipo(t([-2.0]), t([-4.0]), t([-2.0]), t([-2.0]), len_w=t([2.0]), len_l=t([4.0]), beta=0.5)
    # logratios per token: 0/2 = 0 and -2/4 = -0.5 -> m' = 0.5; (0.5 - 1)^2
    assert out.loss.item() == pytest.approx(0.25)
    bt = bradley_terry(t([2.0, 0.0]), t([1.0, 1.0]))
    assert bt.loss.item() == pytest.approx((-F.logsigmoid(t([1.0, -1.0]))).mean().item())
    assert bt.metrics["rm/accuracy"] == 0.5


def test_kl_k1_sign():
    assert kl_k1(torch.tensor(-1.0), torch.tensor(-2.0)).item() == 1.0


# --- the formulas that used to live in the trainers (docs/algorithms.md §sft, §dpo, §kl)
@settings(max_examples=40, deadline=None)
@given(B=st.integers(1, 4), T=st.integers(1, 6), V=st.integers(2, 7), seed=st.integers(0, 10**6))
def test_masked_nll_is_cross_entropy_over_the_masked_positions_alone(B, T, V, seed):
    from reasoning_rl.algos.losses import masked_nll

    g = torch.Generator().manual_seed(seed)
    logits, target = torch.randn(B, T, V, generator=g), torch.randint(0, V, (B, T), generator=g)
    mask = torch.rand(B, T, generator=g) < 0.6
    mask[0, 0] = True
    want = F.cross_entropy(logits[mask], target[mask])  # only the masked positions, unpadded
    assert torch.allclose(masked_nll(logits, target, mask), want, atol=1e-6)


def test_rpo_nll_weighs_tokens_not_sequences():
    from reasoning_rl.algos.losses import rpo_nll

    logp, n = torch.tensor([-2.0, -20.0]), torch.tensor([2.0, 20.0])  # 1 nat per token in both
    assert rpo_nll(logp, n).item() == pytest.approx(22.0 / 22.0)
    logp2 = torch.tensor([-4.0, -20.0])  # 2 nats/token on a short one: a mean of means would say 1.5
    assert rpo_nll(logp2, n).item() == pytest.approx(24.0 / 22.0)


@given(coef=st.floats(1e-3, 10), kl=st.floats(0, 10), target=st.floats(1e-3, 1), horizon=st.integers(1, 10**4),
       n=st.integers(1, 64))
def test_adaptive_kl_step_is_bounded_and_moves_toward_the_target(coef, kl, target, horizon, n):
    from reasoning_rl.algos.losses import adaptive_kl_coef

    new = adaptive_kl_coef(coef, kl, target, horizon, n)
    assert abs(new / coef - 1) <= 0.2 * n / horizon + 1e-12
    if kl > target * 1.001:
        assert new > coef
    elif kl < target * 0.999:
        assert new < coef
    assert adaptive_kl_coef(coef, target, target, horizon, n) == pytest.approx(coef)
