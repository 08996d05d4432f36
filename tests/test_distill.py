"""On-policy distillation: the maths (docs/algorithms.md §distill) as properties, the dense loss against TRL's
DistillationTrainer on the same batch, and `train distill` on the tiny models (teacher = the SFT warm start), the
teacher equal to the student (every advantage 0), and the one-line refusals of a bad teacher."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from reasoning_rl.algos.distill import (DIVERGENCES, DivergenceOptions, generalized_jsd, log_probs_at,
                                        reverse_kl_advantage, topk_forward_kl)
from reasoning_rl.algos.losses import token_mean


@st.composite
def two_distributions(draw, max_v=8):
    """(student logits, teacher logits), each (1, 1, V), and a temperature."""
    V = draw(st.integers(2, max_v))
    xs = draw(st.lists(st.floats(-6, 6, allow_nan=False), min_size=2 * V, max_size=2 * V))
    t = draw(st.sampled_from([0.5, 0.7, 1.0, 1.3]))
    return torch.tensor(xs[:V]).view(1, 1, V), torch.tensor(xs[V:]).view(1, 1, V), t


@given(two_distributions())
@settings(max_examples=80, deadline=None)
def test_the_reverse_kl_advantage_is_zero_when_teacher_equals_student_and_off_the_mask(d):
    s, _, t = d
    lp = log_probs_at(s, t)[..., 0].expand(2, 3)  # any per-token log-probs (B, T)
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    assert (reverse_kl_advantage(lp, lp, mask) == 0).all()
    other = lp - 0.3
    A = reverse_kl_advantage(lp, other, mask)
    assert (A[mask == 0] == 0).all() and torch.allclose(A[mask == 1], torch.tensor(-0.3))


@given(two_distributions())
@settings(max_examples=80, deadline=None)
def test_the_advantages_expected_policy_gradient_is_minus_the_reverse_kls_gradient(d):
    """One position, every token enumerated: E_{y ~ p_S}[A(y) grad log p_S(y)] = -grad KL(p_S || p_T), exactly. (Over
    a sequence, the per-token advantage gives each position's KL at the prefixes sampled: §distill.)"""
    s, te, t = d
    theta = s.view(-1).clone().requires_grad_(True)
    log_ps = torch.log_softmax(theta / t, -1)
    log_pt = torch.log_softmax(te.view(-1) / t, -1)
    kl = (log_ps.exp() * (log_ps - log_pt)).sum()
    (grad_kl,) = torch.autograd.grad(kl, theta)
    pg = torch.zeros_like(theta)
    for y in range(theta.numel()):
        (g,) = torch.autograd.grad(torch.log_softmax(theta / t, -1)[y], theta)
        A = reverse_kl_advantage(log_ps[y].detach().view(1, 1), log_pt[y].view(1, 1), torch.ones(1, 1))[0, 0]
        pg += log_ps[y].exp().detach() * A * g
    assert torch.allclose(pg, -grad_kl, atol=1e-5)


@given(two_distributions(), st.floats(0.05, 0.95))
@settings(max_examples=80, deadline=None)
def test_the_generalized_jsd_spans_forward_and_reverse_kl_and_is_symmetric_in_its_mixture(d, beta):
    s, te, t = d
    ps, pt = log_probs_at(s, t), log_probs_at(te, t)
    forward = (pt.exp() * (pt - ps)).sum(-1)
    reverse = (ps.exp() * (ps - pt)).sum(-1)
    assert torch.allclose(generalized_jsd(ps, pt, DivergenceOptions(beta=0.0)), forward, atol=1e-6)
    assert torch.allclose(generalized_jsd(ps, pt, DivergenceOptions(beta=1.0)), reverse, atol=1e-6)
    mid = generalized_jsd(ps, pt, DivergenceOptions(beta=beta))
    assert torch.allclose(mid, generalized_jsd(pt, ps, DivergenceOptions(beta=1 - beta)), atol=1e-6)
    assert (mid >= -1e-7).all() and (mid <= math.log(2) + 1e-6).all()  # a JSD is at most log 2
    assert torch.allclose(generalized_jsd(ps, ps, DivergenceOptions(beta=beta)), torch.zeros(1, 1), atol=1e-6)


@given(two_distributions())
@settings(max_examples=60, deadline=None)
def test_topk_forward_kl_with_k_the_vocabulary_is_the_forward_kl_and_never_negative(d):
    s, te, t = d
    ps, pt = log_probs_at(s, t), log_probs_at(te, t)
    V = ps.shape[-1]
    full = topk_forward_kl(ps, pt, DivergenceOptions(k=V))
    assert torch.allclose(full, generalized_jsd(ps, pt, DivergenceOptions(beta=0.0)), atol=1e-6)
    # on the top-k the teacher's renormalised mass against the student's (unrenormalised) log-probs: >= 0
    assert (topk_forward_kl(ps, pt, DivergenceOptions(k=1)) >= -1e-6).all()


# ------------------------------------------------------------------ against TRL's DistillationTrainer
def _two_tiny_models():
    from reasoning_rl import config
    from reasoning_rl.config import Config
    from reasoning_rl.models.load import build_tiny

    cfg = config.load(Config, overrides=["model.tiny.num_layers=1"])
    torch.manual_seed(0)
    student, tok = build_tiny(cfg)
    torch.manual_seed(1)
    teacher, _ = build_tiny(cfg)
    return student.eval(), teacher.eval(), tok


@pytest.mark.parametrize("beta, temperature", [(1.0, 1.0), (0.0, 1.0), (0.5, 1.0), (0.5, 0.7), (1.0, 1.3)])
def test_the_dense_loss_equals_trls_distillation_trainer_on_the_same_batch(beta, temperature):
    """Our per-token generalized JSD, token-mean over the completion mask, against TRL's `_chunked_divergence_loss`
    (what DistillationTrainer.compute_loss calls) on the same two models, ids and mask: loss and the gradient on the
    student's output layer to 1e-5."""
    from trl.trainer.distillation_trainer import _chunked_divergence_loss

    from reasoning_rl.models.logprobs import completion_logits

    student, teacher, tok = _two_tiny_models()
    gen = torch.Generator().manual_seed(3)
    B, Tp, Tc = 3, 5, 7
    p_ids = torch.randint(5, 60, (B, Tp), generator=gen)
    c_ids = torch.randint(5, 60, (B, Tc), generator=gen)
    p_mask = torch.ones_like(p_ids)
    c_mask = torch.ones_like(c_ids)
    c_mask[1, 5:] = 0  # a shorter completion: padding the loss must not see
    c_mask[2, 3:] = 0
    loss_mask = c_mask.clone()

    logits_s = completion_logits(student, p_ids, p_mask, c_ids, c_mask)
    with torch.no_grad():
        logits_t = completion_logits(teacher, p_ids, p_mask, c_ids, c_mask)
    ours = token_mean(generalized_jsd(log_probs_at(logits_s, temperature), log_probs_at(logits_t, temperature),
                                      DivergenceOptions(beta=beta)), loss_mask)
    (g_ours,) = torch.autograd.grad(ours, student.lm_head.weight, retain_graph=True)
    # what the trainer runs: the same divergence from the logits, block by block (algos/vocab_blocks.py)
    fast = token_mean(DIVERGENCES.get("jsd")(logits_s, logits_t, DivergenceOptions(beta=beta), temperature), loss_mask)
    (g_fast,) = torch.autograd.grad(fast, student.lm_head.weight)

    ids, attn = torch.cat([p_ids, c_ids], 1), torch.cat([p_mask, c_mask], 1)
    h_s = student.model(input_ids=ids, attention_mask=attn).last_hidden_state[:, :-1][:, -Tc:]
    with torch.no_grad():
        h_t = teacher.model(input_ids=ids, attention_mask=attn).last_hidden_state[:, :-1][:, -Tc:]
    theirs, _, n = _chunked_divergence_loss(h_s, h_t, student.lm_head.weight, teacher.lm_head.weight, loss_mask, beta,
                                            temperature=temperature)
    (g_theirs,) = torch.autograd.grad(theirs, student.lm_head.weight)
    assert int(n) == int(loss_mask.sum())
    assert ours.item() == pytest.approx(theirs.item(), abs=1e-5)
    assert fast.item() == pytest.approx(theirs.item(), abs=1e-5)
    torch.testing.assert_close(g_ours, g_theirs, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(g_fast, g_theirs, atol=1e-5, rtol=1e-4)


# ------------------------------------------------------------------ the trainer on the tiny models
RUN = ["model.sft_warm_start=false", "model.tiny.num_layers=1", "distill.teacher=tiny", "distill.steps=2",
       "distill.prompts_per_step=4", "distill.group_size=4", "eval.size=8", "distill.eval_every=0",
       "distill.checkpoint_every=0", "distill.verifier_workers=1", "generation.max_tokens=8"]


@pytest.mark.parametrize("extra", [[], ["distill.loss=jsd", "distill.jsd_beta=0.5", "distill.reward_weight=1.0"],
                                   ["distill.loss=topk_forward_kl", "distill.top_k=4"],
                                   ["distill.loss=jsd", "distill.micro_batch_tokens=48"]])
def test_train_distill_runs_on_the_tiny_models_and_documents_its_metrics(tmp_path, extra):
    from reasoning_rl import config
    from reasoning_rl.config import Config
    from reasoning_rl.trainers.distill import train_distill
    from reasoning_rl.trainers.metric_docs import undocumented

    lines = []
    cfg = config.load(Config, overrides=RUN + extra + [f"output_dir={tmp_path}"])
    history, _, _ = train_distill(cfg, log=lines.append)
    assert len(history) == 2 and all(h["train/samples"] == 16 for h in history)  # every sample: no mixed filter
    assert all(h["distill/reverse_kl"] > 0.1 for h in history)  # a random student, a trained teacher
    assert any(line.startswith("teacher tiny: ") for line in lines)
    assert undocumented(k for h in history for k in h) == []
    assert (tmp_path / "archive.jsonl").read_text().count("\n") == 32 and (tmp_path / "final").is_dir()
    if "distill.loss=jsd" in extra:
        assert all(h["loss/policy"] == pytest.approx(h["distill/divergence"]) for h in history)
    if "distill.micro_batch_tokens=48" in extra:  # the dense loss's passes within the budget
        assert all(h["train/passes"] > 1 and h["train/largest_pass"] <= 48 for h in history), history


def test_a_teacher_equal_to_the_student_gives_every_token_a_zero_advantage(tmp_path):
    """The plumbing, not learning: the tiny warm start as both student and teacher, scored at the rollout's
    temperature, gives A = 0 on every token of the first round up to float noise (the engine's log-prob against the
    teacher's recomputation). (Later rounds differ: AdamW turns even a noise-sized gradient into a step of size lr.)"""
    from reasoning_rl import config
    from reasoning_rl.config import Config
    from reasoning_rl.trainers import loop
    from reasoning_rl.trainers.distill import Distill

    cfg = config.load(Config, overrides=[o for o in RUN if not o.startswith("model.")] +
                      [f"output_dir={tmp_path}", "generation.temperature=0.7"])
    algo = Distill(cfg, log=lambda *_: None)
    seen = []
    real = algo.make_batch

    def spy(learner, groups):
        batch, m = real(learner, groups)
        seen.append((batch.A.clone(), batch.tokens.loss_mask.clone(), m))
        return batch, m

    algo.make_batch = spy
    history, _, _ = loop.train(cfg, algo, log=lambda *_: None)
    A, mask, m = seen[0]
    assert mask.sum() > 20 and A[mask.bool()].abs().max() < 1e-4 and abs(m["distill/reverse_kl"]) < 1e-5
    assert abs(history[0]["loss/policy"]) < 1e-4


# ------------------------------------------------------------------ a bad teacher: one line, nothing loaded
def test_a_teacher_that_does_not_exist_or_tokenizes_otherwise_is_one_line_before_anything_loads(tmp_path):
    from reasoning_rl import config
    from reasoning_rl.config import Config
    from reasoning_rl.errors import UserError
    from reasoning_rl.models.load import load_tokenizer
    from reasoning_rl.models.teacher import check_teacher
    from tests.helpers.hf_model import build_hf_model

    cfg = config.load(Config, overrides=["distill.teacher=/no/such/teacher"])
    with pytest.raises(UserError, match=r"^distill.teacher: '/no/such/teacher' is not a directory"):
        check_teacher(cfg, load_tokenizer(cfg))
    with pytest.raises(UserError, match=r"^distill.teacher: empty"):
        check_teacher(config.load(Config), load_tokenizer(cfg))
    other = build_hf_model(tmp_path / "bpe", ["a small corpus of words for a tokenizer"] * 20, vocab_size=300)
    cfg = config.load(Config, overrides=[f"distill.teacher={other}"])
    with pytest.raises(UserError) as e:
        check_teacher(cfg, load_tokenizer(cfg))
    msg = str(e.value)
    assert msg.startswith(f"distill.teacher: {str(other)!r} tokenizes with another vocabulary than the student 'tiny'")
    assert "\n" not in msg


def test_an_episodes_observation_tokens_carry_no_distillation_signal(tmp_path):
    """With an environment (the calculator), the tool's output joins the sequence with loss mask 0: its tokens get
    no advantage, whatever the teacher thinks of them; and without the reward term a group of one is a batch."""
    from reasoning_rl import config
    from reasoning_rl.config import Config
    from reasoning_rl.trainers import loop
    from reasoning_rl.trainers.distill import Distill

    from .helpers.turns import EveryTurnIsACall
    from reasoning_rl.rollout.environments import ENVIRONMENTS

    ENVIRONMENTS.add("every-turn-distill", EveryTurnIsACall, "tests")
    try:
        cfg = config.load(Config, overrides=RUN + [f"output_dir={tmp_path}", "distill.group_size=1",
                                                   "distill.prompts_per_step=6", "distill.steps=1",
                                                   "distill.environment=every-turn-distill", "distill.max_turns=3",
                                                   "distill.max_tool_calls=2", "distill.max_episode_tokens=40"])
        algo = Distill(cfg, log=lambda *_: None)
        seen = []
        real = algo.make_batch
        algo.make_batch = lambda learner, groups: seen.append(real(learner, groups)) or seen[-1]
        history, _, _ = loop.train(cfg, algo, log=lambda *_: None)
    finally:
        ENVIRONMENTS.remove("every-turn-distill")
    batch, _ = seen[0]
    obs = batch.tokens.c_mask.bool() & ~batch.tokens.loss_mask.bool()
    assert obs.any() and (batch.A[obs] == 0).all() and (batch.A[batch.tokens.loss_mask.bool()] != 0).any()
    assert history[0]["tools/calls_per_sample"] > 0 and history[0]["train/samples"] == 6
