"""Our losses against TRL's own code on the same tiny model and the same batch.

These drive TRL's real `GRPOTrainer._compute_loss` and `DPOTrainer.compute_loss` (not a copy),
and compute ours with `reasoning_rl.models.logprobs` + `reasoning_rl.algos.losses`. Agreement to 1e-5.
"""
import copy

import pytest
import torch
from datasets import Dataset

from reasoning_rl import config
from reasoning_rl.config.sections import Config
from reasoning_rl.models.logprobs import pad_completions, pad_prompts, sequence_logprob, token_logprobs
from reasoning_rl.algos.losses import POLICY_LOSSES, dpo_sigmoid, ppo_clip
from reasoning_rl.models.load import build_tiny

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    cfg = config.load(Config, overrides=["model.tiny.num_layers=2"])
    model, tok = build_tiny(cfg)
    path = tmp_path_factory.mktemp("tiny")
    model.save_pretrained(path)  # TRL builds its reference model from a path
    tok.save_pretrained(path)
    return model, tok, str(path)


def _batch(tok, seed=0):
    g = torch.Generator().manual_seed(seed)
    prompts = ["1+2=", "13+29=", "7*8=", "100-1="]
    completions = [[int(x) for x in torch.randint(4, 60, (n,), generator=g)] + [tok.eos_token_id]
                   for n in (3, 6, 1, 4)]
    p_ids, p_mask = pad_prompts([tok(p)["input_ids"] for p in prompts], tok.pad_token_id)
    c_ids, c_mask = pad_completions(completions, tok.pad_token_id)
    return p_ids, p_mask, c_ids, c_mask, g


@pytest.mark.parametrize("loss_type", ["grpo", "dr_grpo", "dapo", "bnpo"])
@pytest.mark.parametrize("beta,is_kl", [(0.0, True), (0.04, True), (0.04, False)])
def test_grpo_loss_equals_trl(tiny, tmp_path, loss_type, beta, is_kl):
    from trl import GRPOConfig, GRPOTrainer

    _, tok, path = tiny
    max_len = 8
    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=4,
                      max_completion_length=max_len, loss_type=loss_type, beta=beta, epsilon=0.2, epsilon_high=0.28,
                      use_bias_correction_kl=is_kl, report_to="none", use_cpu=True, bf16=False)
    trainer = GRPOTrainer(model=path, reward_funcs=lambda completions, **kw: [0.0] * len(completions), args=args,
                          train_dataset=Dataset.from_list([{"prompt": "1+1="}] * 8), processing_class=tok)
    trainer.current_gradient_accumulation_steps = 1  # set by Trainer's loop; we call the loss directly
    model = trainer.model
    model.train()
    p_ids, p_mask, c_ids, c_mask, g = _batch(tok)
    with torch.no_grad():
        logp_now = token_logprobs(model, p_ids, p_mask, c_ids, c_mask)
    # pi_old and pi_ref differ from pi_theta so that ratios leave the trust region and the KL is not zero
    logp_old = (logp_now + 0.3 * torch.randn(logp_now.shape, generator=g)) * c_mask
    logp_ref = (logp_now + 0.5 * torch.randn(logp_now.shape, generator=g)) * c_mask
    A = torch.tensor([1.2, -0.7, 0.4, -0.9])
    inputs = {"prompt_ids": p_ids, "prompt_mask": p_mask, "completion_ids": c_ids, "completion_mask": c_mask,
              "advantages": A, "old_per_token_logps": logp_old, "ref_per_token_logps": logp_ref,
              "num_items_in_batch": c_mask.sum()}
    theirs = trainer._compute_loss(model, inputs)
    (g_theirs,) = torch.autograd.grad(theirs, [model.model.embed_tokens.weight])

    logp = token_logprobs(model, p_ids, p_mask, c_ids, c_mask)
    ours = ppo_clip(logp, logp_old, A, c_mask, eps_low=0.2, eps_high=0.28, agg=POLICY_LOSSES.get(loss_type).agg,
                    max_len=max_len, logp_ref=logp_ref if beta else None, beta=beta, kl_estimator="k3",
                    kl_importance_weight=is_kl)
    (g_ours,) = torch.autograd.grad(ours.loss, [model.model.embed_tokens.weight])
    assert ours.metrics["clip_ratio/region"] > 0  # the batch really exercises the clip
    assert ours.loss.item() == pytest.approx(theirs.item(), abs=1e-5)
    assert torch.allclose(g_ours, g_theirs, atol=1e-5)


def test_dpo_sigmoid_loss_equals_trl(tiny, tmp_path):
    from trl import DPOConfig, DPOTrainer

    model, tok, _ = tiny
    model = copy.deepcopy(model)
    ref = copy.deepcopy(model)
    rows = [{"prompt": "1+2=", "chosen": "3", "rejected": "4"},
            {"prompt": "10+20=", "chosen": "30", "rejected": "301"},
            {"prompt": "7*8=", "chosen": "56", "rejected": "54"},
            {"prompt": "9-12=", "chosen": "-3", "rejected": "3"}]
    beta = 0.1
    args = DPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, beta=beta, loss_type=["sigmoid"],
                     report_to="none", use_cpu=True, bf16=False)
    trainer = DPOTrainer(model=model, ref_model=ref, args=args, train_dataset=Dataset.from_list(rows),
                         processing_class=tok)
    with torch.no_grad():  # move the policy away from the reference so the margins are not zero
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    model.train()
    batch = next(iter(trainer.get_train_dataloader()))
    theirs = trainer.compute_loss(model, batch)

    # ours, on the same token ids, split back into prompt and completion with our own layout
    prompts, completions = [], []
    for ids, attn, cm in zip(batch["input_ids"], batch["attention_mask"], batch["completion_mask"]):
        prompts.append(ids[(attn == 1) & (cm == 0)].tolist())
        completions.append(ids[cm == 1].tolist())
    p_ids, p_mask = pad_prompts(prompts, tok.pad_token_id)
    c_ids, c_mask = pad_completions(completions, tok.pad_token_id)
    logps = sequence_logprob(token_logprobs(model, p_ids, p_mask, c_ids, c_mask), c_mask)
    with torch.no_grad():
        ref_logps = sequence_logprob(token_logprobs(ref, p_ids, p_mask, c_ids, c_mask), c_mask)
    n = len(rows)
    ours = dpo_sigmoid(logps[:n], logps[n:], ref_logps[:n], ref_logps[n:], beta=beta)
    assert abs(ours.metrics["rewards/margins"]) > 1e-4
    assert ours.loss.item() == pytest.approx(theirs.item(), abs=1e-5)


def _trl_grpo(tiny, tmp_path, **kw):
    from trl import GRPOConfig, GRPOTrainer

    _, tok, path = tiny
    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=4, num_generations=4,
                      max_completion_length=8, report_to="none", use_cpu=True, bf16=False, **kw)
    trainer = GRPOTrainer(model=path, reward_funcs=lambda completions, **k: [0.0] * len(completions), args=args,
                          train_dataset=Dataset.from_list([{"prompt": "1+1="}] * 8), processing_class=tok)
    trainer.current_gradient_accumulation_steps = 1
    trainer.model.train()
    return trainer


def _inputs(trainer, tok, spread=0.3):
    p_ids, p_mask, c_ids, c_mask, g = _batch(tok)
    with torch.no_grad():
        logp_now = token_logprobs(trainer.model, p_ids, p_mask, c_ids, c_mask)
    logp_old = (logp_now + spread * torch.randn(logp_now.shape, generator=g)) * c_mask
    logp_ref = (logp_now + 0.5 * torch.randn(logp_now.shape, generator=g)) * c_mask
    A = torch.tensor([1.2, -0.7, 0.4, -0.9])
    return {"prompt_ids": p_ids, "prompt_mask": p_mask, "completion_ids": c_ids, "completion_mask": c_mask,
            "advantages": A, "old_per_token_logps": logp_old, "ref_per_token_logps": logp_ref,
            "num_items_in_batch": c_mask.sum()}, g


def _both(trainer, inputs, ours_fn):
    model = trainer.model
    theirs = trainer._compute_loss(model, inputs)
    (g_theirs,) = torch.autograd.grad(theirs, [model.model.embed_tokens.weight])
    logp = token_logprobs(model, inputs["prompt_ids"], inputs["prompt_mask"], inputs["completion_ids"],
                          inputs["completion_mask"])
    ours = ours_fn(logp)
    (g_ours,) = torch.autograd.grad(ours.loss, [model.model.embed_tokens.weight])
    assert ours.loss.item() == pytest.approx(theirs.item(), abs=1e-5)
    assert torch.allclose(g_ours, g_theirs, atol=1e-5)
    return ours


@pytest.mark.parametrize("beta", [0.0, 0.04])
def test_gspo_equals_trl_sequence_level_importance_sampling(tiny, tmp_path, beta):
    trainer = _trl_grpo(tiny, tmp_path, loss_type="grpo", importance_sampling_level="sequence", beta=beta,
                        epsilon=1e-2, epsilon_high=1.5e-2)
    inputs, _ = _inputs(trainer, tiny[1], spread=0.05)
    c = inputs["completion_mask"]
    ours = _both(trainer, inputs, lambda logp: ppo_clip(
        logp, inputs["old_per_token_logps"], inputs["advantages"], c, eps_low=1e-2, eps_high=1.5e-2,
        agg="seq_mean_token_mean", logp_ref=inputs["ref_per_token_logps"] if beta else None, beta=beta,
        ratio_level="sequence"))
    assert 0 < ours.metrics["clip_ratio/region"] < 1  # some sequences in the trust region, some out


@pytest.mark.parametrize("beta", [0.0, 0.04])
def test_cispo_equals_trl(tiny, tmp_path, beta):
    from reasoning_rl.algos.losses import cispo

    trainer = _trl_grpo(tiny, tmp_path, loss_type="cispo", beta=beta, epsilon_high=1.2)
    inputs, _ = _inputs(trainer, tiny[1])
    c = inputs["completion_mask"]
    ours = _both(trainer, inputs, lambda logp: cispo(
        logp, inputs["old_per_token_logps"], inputs["advantages"], c, eps_high=1.2, agg="token_mean",
        logp_ref=inputs["ref_per_token_logps"] if beta else None, beta=beta))
    assert ours.metrics["clip_ratio/high"] > 0  # the cap bites on some tokens


@pytest.mark.parametrize("mode,trl_mode", [("token_tis", "token_truncate"), ("seq_tis", "sequence_truncate"),
                                           ("token_mis", "token_mask"), ("seq_mis", "sequence_mask")])
def test_the_rollout_corrected_loss_equals_trls(tiny, tmp_path, mode, trl_mode):
    """Our weights from (pi_old, pi_engine), multiplied into the clipped loss, against TRL's loss with the same
    correction: its ratio is also against the trainer's pi_old, and its IS ratio multiplies the per-token loss.
    TRL computes the ratio inside its generation step, so it is given ours, computed by its own formula here."""
    from reasoning_rl.algos.correction import CORRECTIONS

    trainer = _trl_grpo(tiny, tmp_path, loss_type="dapo", beta=0.04, epsilon=0.2, epsilon_high=0.28,
                        vllm_importance_sampling_mode=trl_mode, vllm_importance_sampling_clip_max=1.3,
                        vllm_importance_sampling_clip_min=0.8 if "mask" in trl_mode else None)
    trainer.use_vllm = True  # _compute_loss applies the correction only for a vLLM-sampled batch
    inputs, g = _inputs(trainer, tiny[1])
    c = inputs["completion_mask"]
    logp_engine = (inputs["old_per_token_logps"] + 0.15 * torch.randn(c.shape, generator=g)) * c
    w, _ = CORRECTIONS.get(mode)(inputs["old_per_token_logps"], logp_engine, c, c_min=0.8, c_max=1.3)
    # TRL's own formula for the same mode (grpo_trainer._generate_and_score_completions)
    diff = (inputs["old_per_token_logps"] - logp_engine) * c
    r = torch.exp(diff.sum(-1, keepdim=True) if trl_mode.startswith("sequence") else diff)
    trl_w = torch.clamp(r, max=1.3) if "truncate" in trl_mode else r.masked_fill((r < 0.8) | (r > 1.3), 0.0)
    assert torch.allclose(w * (c if w.shape == c.shape else 1), trl_w * (c if trl_w.shape == c.shape else 1))
    assert not torch.allclose(w, torch.ones_like(w))  # the correction really changes weights
    inputs["importance_sampling_ratio"] = trl_w
    _both(trainer, inputs, lambda logp: ppo_clip(
        logp, inputs["old_per_token_logps"], inputs["advantages"], c, eps_low=0.2, eps_high=0.28, agg="token_mean",
        logp_ref=inputs["ref_per_token_logps"], beta=0.04, is_weight=w))


def test_per_term_advantages_equal_trls_normalize_then_sum(tiny, tmp_path):
    """grpo.reward_normalization=per_term against TRL's own `_generate_and_score_completions` with
    multi_objective_aggregation=normalize_then_sum on the same two reward terms (TRL generates; each term's value of a
    row is given, so both sides normalise the same numbers). TRL's stds carry Bessel's correction and ours do not:
    after the batch normalisation the two differ by the constant sqrt((N-1)/N), N the batch's samples."""
    from trl import GRPOConfig, GRPOTrainer

    from reasoning_rl.algos.advantages import ADVANTAGES, per_term

    _, tok, path = tiny
    G, prompts = 4, ["1+2=", "13+29=", "7*8="]
    g = torch.Generator().manual_seed(3)
    r1 = torch.randint(0, 2, (len(prompts), G)).float()  # an outcome: pass or fail
    r2 = torch.rand((len(prompts), G), generator=g) * 5  # a wide format score
    rows = [{"prompt": p, "r1": float(r1[b, i]), "r2": float(r2[b, i])} for b, p in enumerate(prompts) for i in range(G)]

    def term1(completions, r1, **kw):
        return list(r1)

    def term2(completions, r2, **kw):
        return list(r2)

    args = GRPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=len(rows), num_generations=G,
                      max_completion_length=4, reward_weights=[1.0, 0.2], report_to="none", use_cpu=True, bf16=False,
                      multi_objective_aggregation="normalize_then_sum")
    trainer = GRPOTrainer(model=path, reward_funcs=[term1, term2], args=args, processing_class=tok,
                          train_dataset=Dataset.from_list(rows))
    theirs = trainer._generate_and_score_completions(rows)["advantages"].view(len(prompts), G)
    R = torch.stack([r1, r2], -1)
    ours, _ = per_term(R, torch.ones_like(R, dtype=torch.bool), torch.tensor([1.0, 0.2]), ADVANTAGES.get("grpo"))
    N = R.shape[0] * G
    assert torch.allclose(theirs, ours * ((N - 1) / N) ** 0.5, atol=2e-3), (theirs, ours)
