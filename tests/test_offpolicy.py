"""Properties of rollout correction, GSPO, CISPO, pass@k, soft overlong, clamped k3 and the entropy target
(docs/algorithms.md §rollout-correction, §gspo, §cispo, §pass-at-k, §overlong, §kl, §entropy)."""
import itertools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from reasoning_rl.algos.advantages import grpo, pass_at_k, soft_overlong
from reasoning_rl.algos.losses import cispo, entropy_coef_update, kl_k3, kl_k3_clamped, policy_gradient, ppo_clip
from reasoning_rl.algos.correction import CORRECTIONS, correct, mismatch_kl

MODES = [m for m in CORRECTIONS.names() if m != "none"]
SEQ_MODES = {"seq_tis", "seq_mis", "geo_mask"}


@st.composite
def batches(draw, max_b=5, max_t=7):
    B, T = draw(st.integers(1, max_b)), draw(st.integers(1, max_t))
    seed = draw(st.integers(0, 2**31 - 1))
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    mask = (torch.arange(T)[None, :] < lengths[:, None]).float()
    logp = -torch.rand(B, T, generator=g, dtype=torch.float64) * 4
    spread = draw(st.floats(0.0, 2.0))
    logp_engine = logp + spread * torch.randn(B, T, generator=g, dtype=torch.float64)
    return logp * mask, logp_engine * mask, mask.double(), g


@settings(max_examples=60, deadline=None)
@given(b=batches(), mode=st.sampled_from(MODES), c_max=st.floats(1.0, 5.0), c_min=st.floats(0.0, 1.0))
def test_on_policy_weights_are_exactly_one_and_change_nothing(b, mode, c_max, c_min):
    logp, _, mask, g = b
    w, _ = CORRECTIONS.get(mode)(logp, logp.clone(), mask, c_min=c_min, c_max=c_max)
    assert torch.equal(w, torch.ones_like(w))
    A = torch.randn(logp.shape[0], generator=g, dtype=torch.float64)
    theta = (logp + 0.1 * torch.randn(logp.shape, generator=g, dtype=torch.float64)).requires_grad_()
    plain = ppo_clip(theta, logp, A, mask)
    weighted = ppo_clip(theta, logp, A, mask, is_weight=w)
    assert weighted.loss.item() == plain.loss.item()
    (g1,) = torch.autograd.grad(plain.loss, theta)
    (g2,) = torch.autograd.grad(weighted.loss, theta)
    assert torch.equal(g1, g2)
    assert mismatch_kl(logp, logp.clone(), mask) == 0.0


@settings(max_examples=80, deadline=None)
@given(b=batches(), mode=st.sampled_from(MODES), c_max=st.floats(1.0, 5.0), c_min=st.floats(0.0, 1.0))
def test_no_weight_rises_above_its_threshold_and_masks_are_all_or_nothing(b, mode, c_max, c_min):
    logp, logp_engine, mask, _ = b
    w, metrics = CORRECTIONS.get(mode)(logp, logp_engine, mask, c_min=c_min, c_max=c_max)
    assert (w <= c_max + 1e-12).all() and (w >= 0).all()
    assert w.shape == ((logp.shape[0], 1) if mode in SEQ_MODES else logp.shape)
    r = torch.exp((logp - logp_engine) * mask)
    if mode == "token_tis":
        assert torch.allclose(w, torch.clamp(r, max=c_max))
    if mode in ("token_mis",):  # the weight itself where it is kept, 0 where it is not
        kept = (r >= c_min) & (r <= c_max)
        assert torch.equal(w[kept], r[kept]) and (w[~kept] == 0).all()
    if mode in ("icepop", "geo_mask"):
        assert set(w.unique().tolist()) <= {0.0, 1.0}
    if mode != "none":
        assert 0.0 <= metrics["rollout/is_weight_min"] <= metrics["rollout/is_weight_max"] <= c_max + 1e-12


def test_the_sequence_weight_is_the_product_of_the_token_ratios():
    logp = torch.tensor([[-1.0, -2.0, 0.0], [-0.5, -0.5, -0.5]])
    engine = torch.tensor([[-1.2, -1.9, 0.0], [-0.5, -0.7, -0.4]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]])
    w, _ = CORRECTIONS.get("seq_tis")(logp, engine, mask, c_max=10.0)
    assert torch.allclose(w.squeeze(-1), torch.exp(torch.tensor([0.2 - 0.1, 0.0 + 0.2 - 0.1])))
    geo, _ = CORRECTIONS.get("geo_mask")(logp, engine, mask, c_min=0.99, c_max=1.01)
    assert geo.squeeze(-1).tolist() == [0.0, 0.0]  # exp(0.05) and exp(0.033) are outside [0.99, 1.01]
    w, m = correct("token_tis", logp, engine, mask, 0.0, 1.05)
    assert m["rollout/is_truncated"] == pytest.approx(2 / 5)  # 0.2 and 0.2 give r = e^0.2 > 1.05
    assert m["rollout/mismatch_kl"] > 0


@settings(max_examples=60, deadline=None)
@given(b=batches(), agg=st.sampled_from(["token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"]),
       scale=st.floats(0.05, 0.5))
def test_gspo_equals_token_grpo_when_every_token_ratio_of_a_sequence_is_equal(b, agg, scale):
    logp, _, mask, g = b
    B, T = logp.shape
    delta = scale * torch.randn(B, 1, generator=g, dtype=torch.float64)  # one log-ratio per sequence
    A = torch.randn(B, generator=g, dtype=torch.float64)
    theta = logp.clone().requires_grad_()
    old = (logp - delta) * mask
    kw = dict(eps_low=0.2, eps_high=0.28, agg=agg, max_len=T)
    tok = ppo_clip(theta, old, A, mask, **kw)
    seq = ppo_clip(theta, old, A, mask, ratio_level="sequence", **kw)
    assert seq.loss.item() == pytest.approx(tok.loss.item(), rel=1e-9, abs=1e-12)
    (g_tok,) = torch.autograd.grad(tok.loss, theta)
    (g_seq,) = torch.autograd.grad(seq.loss, theta)
    assert torch.allclose(g_tok * mask, g_seq * mask, atol=1e-12)


def test_cispo_at_ratio_one_is_the_policy_gradient_and_keeps_clipped_tokens_gradients():
    g = torch.Generator().manual_seed(0)
    logp = (-torch.rand(3, 4, generator=g, dtype=torch.float64)).requires_grad_()
    mask = torch.ones(3, 4, dtype=torch.float64)
    A = torch.tensor([1.0, -0.5, 2.0], dtype=torch.float64)
    c = cispo(logp, logp.detach(), A, mask, eps_high=5.0)
    pg = policy_gradient(logp, A, mask)
    assert c.loss.item() == pytest.approx(pg.loss.item())
    assert torch.allclose(torch.autograd.grad(c.loss, logp)[0], torch.autograd.grad(pg.loss, logp)[0])
    far = (logp.detach() - 3.0)  # every ratio e^3, far outside PPO's trust region
    (g_ppo,) = torch.autograd.grad(ppo_clip(logp, far, A.abs(), mask).loss, logp)
    (g_cis,) = torch.autograd.grad(cispo(logp, far, A.abs(), mask, eps_high=5.0).loss, logp)
    assert (g_ppo == 0).all() and (g_cis != 0).all()  # PPO drops them; CISPO bounds them at eps_high


def _brute_pass_at_k(rewards: list[int], k: int) -> list[float]:
    """Each sample's mean over the k-subsets containing it of (the subset holds a pass) minus the group mean."""
    n = len(rewards)
    subsets = list(itertools.combinations(range(n), k))
    hold = {s: float(any(rewards[i] for i in s)) for s in subsets}
    rbar = sum(hold.values()) / len(subsets)
    sigma = math.sqrt(rbar * (1 - rbar))
    out = []
    for i in range(n):
        if rewards[i]:
            out.append((1 - rbar) / (sigma + 1e-4))
        else:
            mine = [hold[s] for s in subsets if i in s]
            # the share of i's subsets with no pass: 1 - mean(hold over them)
            out.append((1 - rbar - (1 - sum(mine) / len(mine))) / (sigma + 1e-4))
    return out if 0 < rbar < 1 else [0.0] * n


@settings(max_examples=80, deadline=None)
@given(rewards=st.lists(st.integers(0, 1), min_size=2, max_size=8), k=st.integers(1, 8))
def test_pass_at_k_matches_the_subsets_and_reduces_to_grpo_at_k_1(rewards, k):
    k = min(k, len(rewards))
    R = torch.tensor([rewards], dtype=torch.float64)
    assert torch.allclose(pass_at_k(R, k=k), torch.tensor([_brute_pass_at_k(rewards, k)], dtype=torch.float64),
                          atol=1e-9)
    assert torch.allclose(pass_at_k(R, k=1), grpo(R), atol=1e-9)


def test_pass_at_k_leaves_masked_samples_out_and_refuses_graded_rewards():
    R = torch.tensor([[1.0, 0.0, 0.0, 1.0]])
    valid = torch.tensor([[True, True, False, True]])
    A = pass_at_k(R, valid, k=2)
    assert A[0, 2] == 0 and torch.allclose(A[:, [0, 1, 3]], pass_at_k(R[:, [0, 1, 3]], k=2))
    with pytest.raises(ValueError, match="0 or 1"):
        pass_at_k(torch.tensor([[0.5, 1.0]]), k=1)


@given(max_len=st.integers(2, 64), data=st.data())
def test_soft_overlong_is_zero_before_the_buffer_and_falls_linearly_to_the_penalty(max_len, data):
    buffer = data.draw(st.integers(1, max_len))
    p = data.draw(st.floats(0.1, 2.0))
    lengths = torch.arange(0, max_len + 3)
    r = soft_overlong(lengths, max_len=max_len, buffer=buffer, penalty=p)
    assert (r[: max_len - buffer + 1] == 0).all()
    assert r[max_len].item() == pytest.approx(-p) and (r[max_len:] == r[max_len]).all()
    assert (r[1:] <= r[:-1] + 1e-7).all()  # never rewards a longer completion more


@given(st.floats(-30, 30), st.floats(-30, 0))
def test_k3_clamped_is_k3_where_k3_is_moderate_and_bounded_everywhere(delta, logp):
    a, b = torch.tensor([logp], dtype=torch.float64), torch.tensor([logp + delta], dtype=torch.float64)
    k3, kc = kl_k3(a, b).item(), kl_k3_clamped(a, b).item()
    assert -10 <= kc <= 10
    if abs(delta) <= 20 and k3 <= 10:
        assert kc == pytest.approx(k3)


@given(coef=st.floats(0, 1), h=st.floats(0, 5), target=st.floats(0.01, 5), lr=st.floats(0, 1))
def test_the_entropy_coefficient_rises_below_the_target_and_never_goes_negative(coef, h, target, lr):
    new = entropy_coef_update(coef, h, target, lr)
    assert new >= 0
    assert (new >= coef) if h < target else (new <= coef)
    assert entropy_coef_update(coef, h, 0.0, lr) == coef


RUN = ["model.sft_warm_start=false", "model.tiny.num_layers=1", "grpo.steps=2", "grpo.prompts_per_step=4",
       "grpo.group_size=4", "grpo.filter_mixed=false", "eval.size=4", "grpo.train_prompts=16",
       "generation.max_tokens=6", "grpo.verifier_workers=1", "grpo.checkpoint_every=0", "grpo.eval_every=100",
       "tasks.reward=[{verifier: math, weight: 1.0}, {verifier: soft_length, weight: 1.0, "
       "options: {max_length: 6, cache_length: 5}}]"]


class NoisyEngine:
    """The hf engine, reporting log-probs off by N(0, 0.5) per token: an engine that is not the trainer."""

    def __init__(self, inner):
        self.inner, self.g = inner, torch.Generator().manual_seed(0)

    def generate(self, rows, n, sampling):
        import dataclasses

        def off(s):
            noise = 0.5 * torch.randn(len(s.logprobs), generator=self.g)
            return dataclasses.replace(s, logprobs=tuple((torch.tensor(s.logprobs) + noise).tolist()))

        return [dataclasses.replace(grp, samples=[off(s) for s in grp.samples])
                for grp in self.inner.generate(rows, n, sampling)]

    def update_weights(self, model):
        self.inner.update_weights(model)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("algo", ["grpo", "ppo"])
def test_a_mismatched_engine_is_measured_and_weighed_back(tmp_path, monkeypatch, algo):
    from reasoning_rl import config
    from reasoning_rl.config.sections import Config
    from reasoning_rl.trainers import loop
    from reasoning_rl.trainers.grpo import train_grpo
    from reasoning_rl.trainers.ppo import train_ppo

    run = [o.replace("grpo.", f"{algo}.") for o in RUN if not (algo == "ppo" and "filter_mixed" in o)]
    train = train_grpo if algo == "grpo" else train_ppo
    faithful = config.load(Config, overrides=run + [f"{algo}.rollout_correction=token_tis", f"{algo}.is_max=1.5",
                                                    f"output_dir={tmp_path / 'a'}"])
    h = [m for m in train(faithful, log=lambda *_: None)[0] if "rollout/mismatch_kl" in m]
    assert h and all(m["rollout/mismatch_kl"] < 1e-6 and m["rollout/is_truncated"] == 0 for m in h)
    assert all(abs(m["rollout/is_weight_max"] - 1) < 1e-3 for m in h)  # the hf engine is the trainer

    real = loop.make_engine
    monkeypatch.setattr(loop, "make_engine", lambda *a: NoisyEngine(real(*a)))
    noisy = config.load(Config, overrides=run + [f"{algo}.rollout_correction=token_tis", f"{algo}.is_max=1.5",
                                                 f"output_dir={tmp_path / 'b'}"])
    h = [m for m in train(noisy, log=lambda *_: None)[0] if "rollout/mismatch_kl" in m]
    assert h and all(m["rollout/mismatch_kl"] > 0.01 and m["rollout/is_truncated"] > 0 for m in h)
    assert all(m["rollout/is_weight_max"] <= 1.5 + 1e-9 for m in h)
    off = config.load(Config, overrides=run + [f"output_dir={tmp_path / 'c'}"])  # auto: none for the hf engine
    assert all("rollout/mismatch_kl" not in m for m in train(off, log=lambda *_: None)[0])


def test_the_demo_plot_shows_the_mismatch_when_a_run_has_it(tmp_path):
    from PIL import Image

    from reasoning_rl.cli.demo import plot

    h = [{"step": i, "reward/mean": 0.1 * i, "groups/pct_mixed": 0.5, "approx_kl": 0.01} for i in range(1, 5)]
    plot(h, str(tmp_path / "plain.png"), 0.5)
    plot([dict(x, **{"rollout/mismatch_kl": 0.01, "rollout/is_weight_max": 1.5}) for x in h],
         str(tmp_path / "engine.png"), 0.5)
    w_plain, w_engine = Image.open(tmp_path / "plain.png").size[0], Image.open(tmp_path / "engine.png").size[0]
    assert w_engine > 1.4 * w_plain  # a third column of panels: mismatch KL and the largest weight


@settings(max_examples=60, deadline=None)
@given(b=batches(), low=st.floats(0.5, 1.0), high=st.floats(1.0, 2.0))
def test_the_share_outside_the_ratio_band_counts_tokens_a_loop_would(b, low, high):
    """rollout/ratio_outside is the share of response tokens whose pi_old / pi_engine leaves [low, high], padding
    never counted; on-policy it is 0."""
    from reasoning_rl.algos.correction import ratio_outside

    logp, logp_engine, mask, _ = b
    out, n = ratio_outside(logp, logp_engine, mask, low, high)
    r = torch.exp(logp - logp_engine)
    want = sum(1 for i in range(mask.shape[0]) for t in range(mask.shape[1])
               if mask[i, t] and not low <= r[i, t].item() <= high)
    assert (out, n) == (want, int(mask.sum()))
    assert ratio_outside(logp, logp, mask, low, high)[0] == 0
    _, m = correct("token_tis", logp, logp_engine, mask, 0.5, 2.0, (low, high))
    assert m["rollout/ratio_outside"] == pytest.approx(out / max(1, n)) and m["rollout/ratio_tokens"] == n
