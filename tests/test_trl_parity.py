"""Our losses against TRL's own code on the same tiny model and the same batch.

These drive TRL's real `GRPOTrainer._compute_loss` and `DPOTrainer.compute_loss` (not a copy),
and compute ours with `reasoning_rl.logprobs` + `reasoning_rl.losses`. Agreement to 1e-5.
"""
import copy

import pytest
import torch
from datasets import Dataset

from reasoning_rl import config
from reasoning_rl.configs import Config
from reasoning_rl.logprobs import pad_completions, pad_prompts, sequence_logprob, token_logprobs
from reasoning_rl.losses import GRPO_LOSS_AGGREGATION, dpo_sigmoid, ppo_clip
from reasoning_rl.models import build_tiny

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
    ours = ppo_clip(logp, logp_old, A, c_mask, eps_low=0.2, eps_high=0.28, agg=GRPO_LOSS_AGGREGATION[loss_type],
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
