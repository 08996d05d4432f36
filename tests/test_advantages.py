"""docs/algorithms.md §grpo-advantages, §gae, §process as tests: every Property of the advantage estimators."""
import itertools
import math
import random

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from curricula.signal import p_mixed
from reasoning_rl.algos.advantages import ADVANTAGES, GroupOptions, gae, gae_reference, grpo, grpo_reference, process, rloo
from reasoning_rl.types import Group, Sample, Verdict



pytestmark = pytest.mark.usefixtures("float64")  # exact-arithmetic checks
GROUP_ESTIMATORS = ["grpo", "dr_grpo", "rloo"]


@st.composite
def reward_batches(draw, min_g=2, max_g=8):
    B = draw(st.integers(1, 4))
    G = draw(st.integers(min_g, max_g))
    R = draw(st.lists(st.lists(st.floats(-10, 10, allow_nan=False), min_size=G, max_size=G), min_size=B, max_size=B))
    valid = draw(st.lists(st.lists(st.booleans(), min_size=G, max_size=G), min_size=B, max_size=B))
    return torch.tensor(R), torch.tensor(valid)


def _est(name, R, valid, **kw):
    return ADVANTAGES.get(name)(R, valid, GroupOptions(**kw))


@pytest.mark.parametrize("name", GROUP_ESTIMATORS)
@given(batch=reward_batches())
@settings(max_examples=60, deadline=None)
def test_advantages_sum_to_zero_per_group(name, batch):
    R, valid = batch
    A = _est(name, R, valid)
    assert torch.allclose(A.sum(-1), torch.zeros(R.shape[0]), atol=1e-6)
    assert (A[~valid] == 0).all()  # masked samples get A = 0


@pytest.mark.parametrize("name", GROUP_ESTIMATORS)
@given(batch=reward_batches(), c=st.floats(-100, 100))
@settings(max_examples=60, deadline=None)
def test_shift_invariance(name, batch, c):
    R, valid = batch
    assert torch.allclose(_est(name, R, valid), _est(name, R + c, valid), atol=1e-6)


@given(batch=reward_batches(), k=st.floats(0.01, 100))
@settings(max_examples=60, deadline=None)
def test_grpo_positive_scale_invariance(batch, k):
    R, valid = batch
    assert torch.allclose(grpo(R, valid, eps=0.0), grpo(R * k, valid, eps=0.0), atol=1e-6)


@pytest.mark.parametrize("name", GROUP_ESTIMATORS)
@given(value=st.floats(-5, 5), G=st.integers(1, 8))
@settings(max_examples=30, deadline=None)
def test_uniform_group_gives_zero_advantage(name, value, G):
    R = torch.full((1, G), value)
    assert (_est(name, R, None) == 0).all()
    if name == "grpo":  # with eps = 0 too: a uniform group's sigma is 0, and A is 0, not NaN
        assert (grpo(R, None, eps=0.0) == 0).all()


@pytest.mark.parametrize("name", GROUP_ESTIMATORS)
@given(batch=reward_batches(), seed=st.integers(0, 10**6))
@settings(max_examples=40, deadline=None)
def test_permutation_equivariance(name, batch, seed):
    R, valid = batch
    perm = torch.tensor(random.Random(seed).sample(range(R.shape[1]), R.shape[1]))
    assert torch.allclose(_est(name, R, valid)[:, perm], _est(name, R[:, perm], valid[:, perm]), atol=1e-9)


def test_worked_example_plus_minus_one():
    R = torch.tensor([[1, 1, 0, 1, 0, 0, 0, 1.0]])
    A = grpo(R, eps=0.0)
    assert torch.equal(A, 2 * R - 1)  # mu = sigma = 0.5
    assert torch.allclose(grpo(R), 2 * R - 1, atol=1e-3)  # the default eps barely moves it


def test_batch_scale_uses_the_batch_std():
    R = torch.tensor([[0.0, 2.0], [0.0, 10.0]])
    A = grpo(R, scale="batch", eps=0.0)
    sigma = R.flatten().std(unbiased=False)
    assert torch.allclose(A, torch.tensor([[-1.0, 1.0], [-5.0, 5.0]]) / sigma)


@given(batch=reward_batches())
@settings(max_examples=40, deadline=None)
def test_vectorised_grpo_equals_the_loop(batch):
    R, valid = batch
    ref = torch.tensor(grpo_reference(R.tolist(), valid.tolist(), eps=1e-4))
    assert torch.allclose(grpo(R, valid), ref, atol=1e-6)


def test_rloo_baseline_is_mean_of_others():
    R = torch.tensor([[1.0, 0.0, 0.0, 3.0]])
    assert torch.allclose(rloo(R), torch.tensor([[1 - 1.0, 0 - 4 / 3, 0 - 4 / 3, 3 - 1 / 3]]))
    # a masked sample is out of everyone's baseline, and a lone valid sample gets 0
    assert torch.allclose(rloo(R, torch.tensor([[True, True, False, False]])), torch.tensor([[1.0, -1.0, 0, 0]]))
    assert (rloo(R, torch.tensor([[True, False, False, False]])) == 0).all()


def test_masked_samples_are_out_of_the_statistics():
    """A TIMEOUT sample's (absent) reward must not pull the mean: compare with the group without it."""
    R = torch.tensor([[1.0, 0.0, 123.0, 1.0]])
    valid = torch.tensor([[True, True, False, True]])
    A = grpo(R, valid, eps=0.0)
    A_small = grpo(torch.tensor([[1.0, 0.0, 1.0]]), eps=0.0)
    assert torch.allclose(A[0, [0, 1, 3]], A_small[0]) and A[0, 2] == 0


# ---------------------------------------------------------------- bias of mean-centering, exactly
def _exact_expected_gradient(estimator: str, G: int):
    """Exact E[(1/G) sum_i grad log pi(a_i) A_i] by enumerating all K^G outcomes of a categorical policy."""
    theta = torch.tensor([0.3, -0.2, 0.5])
    r = torch.tensor([1.0, 0.0, 2.5])
    pi = torch.softmax(theta, 0)
    K = len(theta)
    grad_logpi = torch.eye(K) - pi  # row a: d log pi(a) / d theta
    true_grad = (pi[:, None] * r[:, None] * grad_logpi).sum(0)  # grad J = sum_a pi(a) r(a) grad log pi(a)
    tuples = torch.tensor(list(itertools.product(range(K), repeat=G)))  # (K^G, G)
    prob = pi[tuples].prod(-1)  # (K^G,)
    R = r[tuples]  # (K^G, G): one "group" per outcome
    A = ADVANTAGES.get(estimator)(R, None)
    g = (grad_logpi[tuples] * A[..., None]).mean(1)  # (K^G, K)
    return (prob[:, None] * g).sum(0), true_grad


@pytest.mark.parametrize("G", [2, 3, 4])
def test_mean_centering_is_biased_by_g_minus_one_over_g(G):
    expected, true_grad = _exact_expected_gradient("dr_grpo", G)
    assert torch.allclose(expected, (G - 1) / G * true_grad, atol=1e-10)
    assert not torch.allclose(expected, true_grad, atol=1e-3)


@pytest.mark.parametrize("G", [2, 3, 4])
def test_leave_one_out_is_unbiased(G):
    expected, true_grad = _exact_expected_gradient("rloo", G)
    assert torch.allclose(expected, true_grad, atol=1e-10)


@pytest.mark.parametrize("p,G", [(0.1, 4), (0.5, 8), (0.8, 16), (0.95, 8)])
def test_p_mixed_matches_simulation(p, G):
    rng = np.random.default_rng(0)
    n = 20000
    outcomes = rng.random((n, G)) < p
    mixed = 0
    for row in outcomes[:2000]:  # through the real Group.is_mixed for a slice ...
        samples = [Sample("x", verdicts={"o": Verdict.correct() if o else Verdict.incorrect()}) for o in row]
        mixed += Group("p", "q", {}, samples).is_mixed("o")
    fast = (outcomes.any(1) & ~outcomes.all(1))  # ... and vectorised for the rest
    assert mixed == int(fast[:2000].sum())
    est = fast.mean()
    se = math.sqrt(p_mixed(p, G) * (1 - p_mixed(p, G)) / n)
    assert abs(est - p_mixed(p, G)) < 4 * se + 1e-9
    with pytest.raises(ValueError):
        p_mixed(1.5, G)


# ---------------------------------------------------------------- GAE (docs/algorithms.md §gae)
@st.composite
def token_batches(draw):
    B = draw(st.integers(1, 4))
    T = draw(st.integers(1, 12))
    lengths = draw(st.lists(st.integers(1, T), min_size=B, max_size=B))
    f = st.floats(-3, 3, allow_nan=False)
    rewards = torch.tensor(draw(st.lists(st.lists(f, min_size=T, max_size=T), min_size=B, max_size=B)))
    values = torch.tensor(draw(st.lists(st.lists(f, min_size=T, max_size=T), min_size=B, max_size=B)))
    mask = torch.tensor([[1.0] * L + [0.0] * (T - L) for L in lengths])
    return rewards * mask, values, mask  # padding rewards are zero; padding values are junk on purpose


@given(batch=token_batches(), gamma=st.floats(0, 1), lam=st.floats(0, 1))
@settings(max_examples=80, deadline=None)
def test_gae_scan_equals_plain_loop_with_padding(batch, gamma, lam):
    r, v, m = batch
    A, ret = gae(r, v, m, gamma=gamma, lam=lam)
    ref = torch.tensor(gae_reference(r.tolist(), v.tolist(), m.tolist(), gamma, lam))
    assert torch.allclose(A, ref, atol=1e-8)
    assert torch.allclose(ret, (ref + v) * m, atol=1e-8)
    assert (A[m == 0] == 0).all()


@given(batch=token_batches(), gamma=st.floats(0, 1))
@settings(max_examples=40, deadline=None)
def test_gae_lambda_zero_is_td_error(batch, gamma):
    r, v, m = batch
    A, _ = gae(r, v, m, gamma=gamma, lam=0.0)
    v_next = torch.cat([v[:, 1:] * m[:, 1:], torch.zeros(v.shape[0], 1)], 1)
    delta = (r + gamma * v_next - v) * m
    assert torch.allclose(A, delta, atol=1e-9)


@given(batch=token_batches())
@settings(max_examples=40, deadline=None)
def test_gae_gamma_lambda_one_is_return_minus_value(batch):
    r, v, m = batch
    A, _ = gae(r, v, m, gamma=1.0, lam=1.0)
    to_go = r.flip(-1).cumsum(-1).flip(-1)  # sum_{k >= t} r_k (padding rewards are 0)
    assert torch.allclose(A, (to_go - v) * m, atol=1e-8)


@pytest.mark.parametrize("success,expected", [(1.0, 0.65), (0.0, -0.35)])
def test_gae_worked_example(success, expected):
    T = 5
    r = torch.zeros(1, T)
    r[0, -1] = success  # terminal reward only
    v = torch.tensor([[0.35, 0.4, 0.5, 0.6, 0.7]])
    A, _ = gae(r, v, torch.ones(1, T), gamma=1.0, lam=1.0)
    assert A[0, 0].item() == pytest.approx(expected)


def test_gae_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="shapes differ"):
        gae(torch.zeros(2, 3), torch.zeros(2, 4), torch.ones(2, 3))


# ---------------------------------------------------------------- process supervision (docs/algorithms.md §process)
def test_process_advantages_worked_example():
    # one group of 2 samples; sample 0 has steps ending at tokens 1 and 3, sample 1 one step ending at 2
    step_rewards = torch.tensor([[[1.0, 0.0], [0.5, 0.0]]])
    step_ends = torch.tensor([[[1, 3], [2, 0]]])
    step_mask = torch.tensor([[[1, 1], [1, 0]]])
    A = process(step_rewards, step_ends, step_mask, T=5, eps=0.0)
    vals = torch.tensor([1.0, 0.0, 0.5])
    z = (vals - vals.mean()) / vals.std(unbiased=False)
    expect0 = [z[0] + z[1], z[0] + z[1], z[1], z[1], 0.0]
    expect1 = [z[2], z[2], z[2], 0.0, 0.0]
    assert torch.allclose(A[0, 0], torch.tensor(expect0))
    assert torch.allclose(A[0, 1], torch.tensor(expect1))
    # the normalised step rewards of a group sum to zero, so the group's first-token advantages do too
    assert A[0, :, 0].sum().abs() < 1e-6
    with pytest.raises(ValueError, match="outside"):
        process(step_rewards, step_ends + 10, step_mask, T=5)


@given(B=st.integers(1, 3), T=st.integers(1, 40), chunk=st.integers(1, 17), c=st.floats(0, 1),
       seed=st.integers(0, 10**6))
@settings(max_examples=60, deadline=None)
def test_blocked_discounted_cumsum_equals_the_sum(B, T, chunk, c, seed):
    from reasoning_rl.algos.advantages import discounted_reverse_cumsum

    x = torch.randn(B, T, generator=torch.Generator().manual_seed(seed))
    y = discounted_reverse_cumsum(x, c, chunk=chunk)
    ref = torch.tensor([[sum(c ** (k - t) * x[b, k].item() for k in range(t, T)) for t in range(T)] for b in range(B)])
    assert torch.allclose(y, ref, atol=1e-9)


@given(batch=token_batches(), gamma=st.floats(0, 1), lam=st.floats(0, 1), holes=st.lists(st.integers(0, 8), max_size=4),
       junk=st.floats(-5, 5))
@settings(max_examples=60, deadline=None)
def test_gae_skips_the_holes_of_a_multi_turn_mask(batch, gamma, lam, holes, junk):
    """Observation tokens (0s inside a response) are not steps: the advantages and returns on the policy's tokens
    equal those of the same rows with the observation columns taken out, and are 0 on the holes."""
    r, v, m = batch
    keep = list(range(r.shape[1]))
    for h in sorted(holes):  # insert a hole column (junk reward and value) before column h of the original
        keep.insert(min(h, len(keep)), -1)
    cols = [k for k in keep]
    R = torch.stack([r[:, k] if k >= 0 else torch.full((r.shape[0],), junk) for k in cols], 1)
    V = torch.stack([v[:, k] if k >= 0 else torch.full((r.shape[0],), -junk) for k in cols], 1)
    M = torch.stack([m[:, k] if k >= 0 else torch.zeros(r.shape[0]) for k in cols], 1)
    A, G = gae(R, V, M, gamma=gamma, lam=lam)
    A0, G0 = gae(r, v, m, gamma=gamma, lam=lam)
    real = torch.tensor([k >= 0 for k in cols])
    assert torch.allclose(A[:, real], A0, atol=1e-8) and torch.allclose(G[:, real], G0, atol=1e-8)
    assert (A[:, ~real] == 0).all() and (G[:, ~real] == 0).all()


def test_gae_across_an_observation_worked_example():
    # turn 1 (2 tokens), an observation (1 token, its value ignored), turn 2 (2 tokens); reward 1 at the end
    r, v = torch.tensor([[0.0, 0.0, 0.0, 0.0, 1.0]]), torch.tensor([[0.1, 0.2, 9.0, 0.3, 0.4]])
    A, _ = gae(r, v, torch.tensor([[1.0, 1.0, 0.0, 1.0, 1.0]]), gamma=1.0, lam=1.0)
    assert torch.allclose(A, torch.tensor([[0.9, 0.8, 0.0, 0.7, 0.6]]))


@settings(max_examples=40, deadline=None)
@given(B=st.integers(1, 4), T=st.integers(2, 8), seed=st.integers(0, 10**6))
def test_whitened_advantages_have_mean_zero_and_unit_std_on_the_mask(B, T, seed):
    from reasoning_rl.algos.advantages import whiten

    g = torch.Generator().manual_seed(seed)
    A = torch.randn(B, T, generator=g, dtype=torch.float64) * 3 + 1
    mask = torch.rand(B, T, generator=g) < 0.7
    mask[0, :2] = True
    W = whiten(A, mask)
    on = W[mask]
    assert abs(on.mean().item()) < 1e-9
    sd = A[mask].std(unbiased=False).item()  # population std 1, less what eps takes off: sd / (sd + eps)
    assert abs(on.pow(2).mean().sqrt().item() - sd / (sd + 1e-8)) < 1e-9
    assert (W[~mask] == 0).all()


# ---------------------------------------------------------------- the group maths under filters and masks
@st.composite
def mixed_groups_with_masked(draw):
    """One group: binary outcomes with at least one pass and one fail among the scored samples, plus masked samples
    (a verifier's TIMEOUT / ERROR) whose reward slot holds anything."""
    outcomes = draw(st.lists(st.booleans(), min_size=2, max_size=10).filter(lambda o: any(o) and not all(o)))
    masked = draw(st.lists(st.floats(-5, 5, allow_nan=False), min_size=0, max_size=4))
    order = draw(st.permutations(range(len(outcomes) + len(masked))))
    slots = [(float(o), True) for o in outcomes] + [(x, False) for x in masked]
    slots = [slots[i] for i in order]
    return torch.tensor([[r for r, _ in slots]]), torch.tensor([[v for _, v in slots]])


@pytest.mark.parametrize("name", ["grpo", "dr_grpo", "rloo", "pass_at_k"])
@given(group=mixed_groups_with_masked(), k=st.integers(1, 3))
@settings(max_examples=80, deadline=None)
def test_a_mixed_group_gets_a_signal_and_masked_samples_shift_nothing(name, group, k):
    """Whatever the estimator: a group with a pass and a fail among its scored samples never ends with advantages
    all zero or all of one sign (each pass above each fail), a masked sample gets 0, and taking the masked samples
    out (or changing the rewards in their slots) leaves every scored sample's advantage as it was: a masked sample
    never moves its group-mates' baseline (the leave-one-out trap of NeMo RL #3469). pass@k's one exception: with
    fewer fails than k every k-subset passes, and the group rightly gets no signal."""
    R, valid = group
    opts = GroupOptions(k=min(k, int(valid.sum())))
    A = ADVANTAGES.get(name)(R, valid, opts)
    a, r = A[valid], R[valid]
    assert (A[~valid] == 0).all()
    if name == "pass_at_k" and int((r == 0).sum()) < opts.k:
        assert (a == 0).all()  # every k-subset holds a pass: pass@k is 1 whatever anyone does, no signal
        return
    assert a[r == 1].min() > a[r == 0].max()  # every pass above every fail: not all zero, not of one sign
    if name != "pass_at_k":
        assert (a > 0).any() and (a < 0).any()
    alone = ADVANTAGES.get(name)(r.unsqueeze(0), None, opts)[0]
    assert torch.allclose(a, alone, atol=1e-6)
    other = torch.where(valid, R, R + 3.0)  # other rewards in the masked slots
    assert torch.allclose(ADVANTAGES.get(name)(other, valid, opts), A, atol=1e-6)


def test_the_mixed_filter_keeps_exactly_the_groups_an_estimator_gives_a_signal():
    """Composed with curricula's filter (and so with refill, which keeps what it keeps): over every outcome pattern
    of a group of 4 with 0-2 masked samples, `is_mixed` (scored samples only) holds exactly when the advantages are not
    all zero, for each estimator."""
    import itertools

    from reasoning_rl.types import Group, Sample, Status, Verdict

    verdict = {1: Verdict.correct(), 0: Verdict.incorrect(), None: Verdict.masked_as(Status.TIMEOUT)}
    for pattern in itertools.product([1, 0, None], repeat=4):
        group = Group("p", "q", {}, [Sample(f"s{i}", verdicts={"math": verdict[o]}) for i, o in enumerate(pattern)])
        R = torch.tensor([[float(o or 0) for o in pattern]])
        valid = torch.tensor([[o is not None for o in pattern]])
        for name in ("grpo", "dr_grpo", "rloo", "pass_at_k"):
            A = ADVANTAGES.get(name)(R, valid, GroupOptions(k=1))
            assert group.is_mixed("math") == bool((A != 0).any()), (pattern, name)


# ---------------------------------------------------------------- per-term normalisation (GDPO), §per-term
@st.composite
def term_batches(draw, max_k=3):
    """(R, valid, weights): B prompts x G samples x K reward terms, some verdicts of each term masked."""
    B, G, K = draw(st.integers(1, 4)), draw(st.integers(2, 8)), draw(st.integers(1, max_k))
    floats = st.floats(-5, 5, allow_nan=False)
    R = torch.tensor(draw(st.lists(st.lists(st.lists(floats, min_size=K, max_size=K), min_size=G, max_size=G),
                                   min_size=B, max_size=B)))
    valid = torch.tensor(draw(st.lists(st.lists(st.lists(st.booleans(), min_size=K, max_size=K), min_size=G,
                                                max_size=G), min_size=B, max_size=B)))
    weights = torch.tensor(draw(st.lists(st.floats(0.1, 3), min_size=K, max_size=K)))
    return R, valid, weights


def _per_term(R, valid, weights, name="grpo", **kw):
    from reasoning_rl.algos.advantages import per_term

    return per_term(R, valid, weights, ADVANTAGES.get(name), **kw)


@pytest.mark.parametrize("name", GROUP_ESTIMATORS)
@given(batch=reward_batches(), w=st.floats(0.1, 3))
@settings(max_examples=60, deadline=None)
def test_per_term_with_one_term_is_the_estimator_on_it(name, batch, w):
    """One term, no batch normalisation: w times the estimator's own advantages; with it, those divided by their
    batch std (the same ordering and signs, one scale for the batch)."""
    R, valid = batch
    A, parts = _per_term(R.unsqueeze(-1), valid.unsqueeze(-1), torch.tensor([w]), name, batch_norm=False)
    assert torch.allclose(A, w * _est(name, R, valid), atol=1e-9)
    assert torch.allclose(parts[..., 0], A, atol=1e-12)
    normed, _ = _per_term(R.unsqueeze(-1), valid.unsqueeze(-1), torch.tensor([w]), name, eps=0.0)
    plain = _est(name, R, valid)[valid]
    sd = plain.std(unbiased=False) if plain.numel() else torch.tensor(0.0)
    if sd > 1e-6:
        assert torch.allclose(normed[valid], (plain - plain.mean()) / sd, atol=1e-6)


@given(batch=reward_batches(), c=st.floats(-5, 5))
@settings(max_examples=60, deadline=None)
def test_two_terms_whose_sum_is_constant_in_a_group_give_grpos_advantages_on_the_sum(batch, c):
    """R1 + R2 = c in every group, equal weights: GRPO on the sum sees no difference (A = 0), and neither does the
    per-term sum (the two terms' normalised advantages cancel)."""
    R, valid = batch
    terms = torch.stack([R, c - R], -1)
    A, _ = _per_term(terms, torch.stack([valid, valid], -1), torch.tensor([1.0, 1.0]), batch_norm=False)
    assert torch.allclose(A, grpo(terms.sum(-1), valid), atol=1e-6)
    assert torch.allclose(A, torch.zeros_like(A), atol=1e-6)


@given(batch=term_batches(), data=st.data())
@settings(max_examples=60, deadline=None)
def test_a_masked_verdict_of_one_term_leaves_the_other_terms_statistics_alone(batch, data):
    """Masking more verdicts of term j changes no other term's weighted advantages (nor which samples are in)."""
    R, valid, weights = batch
    K = R.shape[-1]
    j = data.draw(st.integers(0, K - 1))
    more = valid.clone()
    more[..., j] &= torch.tensor(data.draw(st.lists(st.booleans(), min_size=R[..., j].numel(),
                                                    max_size=R[..., j].numel()))).view(R.shape[:-1])
    everyone = torch.ones(R.shape[:-1], dtype=torch.bool)
    _, before = _per_term(R, valid, weights, sample_valid=everyone, batch_norm=False)
    _, after = _per_term(R, more, weights, sample_valid=everyone, batch_norm=False)
    others = [k for k in range(K) if k != j]
    assert torch.equal(before[..., others], after[..., others])
    assert (after[..., j][~more[..., j]] == 0).all()  # a term adds nothing where it did not score


@given(batch=term_batches())
@settings(max_examples=60, deadline=None)
def test_per_term_gives_samples_out_of_the_loss_no_advantage_and_the_batch_zero_mean(batch):
    R, valid, weights = batch
    sample_valid = valid[..., 0]
    A, _ = _per_term(R, valid, weights, sample_valid=sample_valid)
    assert (A[~sample_valid] == 0).all()
    if sample_valid.any():
        assert abs(A[sample_valid].mean().item()) < 1e-6


def test_a_wide_term_no_longer_drowns_a_narrow_one():
    """The case GDPO names: a format term with a wide spread beside a correctness term. Summed first, a wrong answer
    in the format outranks a right one without it; per term, being right carries its full weight."""
    right = torch.tensor([[1.0, 1.0, 0.0, 0.0]])
    fmt = torch.tensor([[0.0, 10.0, 0.0, 10.0]])
    summed = grpo(right + 0.2 * fmt)
    A, _ = _per_term(torch.stack([right, fmt], -1), torch.ones(1, 4, 2, dtype=torch.bool), torch.tensor([1.0, 0.2]),
                     batch_norm=False)
    assert summed[0, 0] < 0 < summed[0, 3]  # summed: right without the format below wrong with it
    assert A[0, 3] < 0 < A[0, 0]  # per term: right above, wrong below
