"""LoRA adapters (peft) on a real model: only the adapters train, the reference is the base model with them
disabled (no second copy), and the final model is saved merged, with the adapters beside it."""
import dataclasses

import pytest
import torch

from reasoning_rl import config
from reasoning_rl.config.sections import Config
from reasoning_rl.models.lora import AdapterDisabled, maybe_lora, reference_of
from reasoning_rl.models.load import load_policy

# a tiny model built in code, an untrained start: a length reward (DAPO's soft penalty on characters) varies from
# sample to sample, so every group carries a signal
SMALL = ["model.sft_warm_start=false", "model.tiny.num_layers=1", "model.lora.r=4", "model.lora.alpha=8",
         "grpo.steps=2", "grpo.prompts_per_step=4", "grpo.group_size=4", "grpo.filter_mixed=false", "grpo.lr=1e-2",
         "grpo.beta=0.1", "eval.size=4", "grpo.train_prompts=16", "generation.max_tokens=8", "grpo.verifier_workers=1",
         "grpo.checkpoint_every=0",
         "tasks.reward=[{verifier: math, weight: 1.0}, "
         "{verifier: soft_length, weight: 1.0, options: {max_length: 8, cache_length: 7}}]"]


def _logits(model, ids):
    with torch.no_grad():
        return model(input_ids=ids).logits


@pytest.mark.timeout(600)
def test_grpo_with_lora_trains_the_adapters_alone_against_the_base_model(tmp_path):
    from transformers import AutoModelForCausalLM

    from reasoning_rl.trainers.grpo import train_grpo

    cfg = config.load(Config, overrides=SMALL + [f"output_dir={tmp_path}"])
    base, tok = load_policy(cfg)
    ids = tok(["12+7=", "3*4="], return_tensors="pt", padding=True)["input_ids"]
    before = _logits(base, ids)
    base_state = {k: v.clone() for k, v in base.state_dict().items()}

    history, model, _ = train_grpo(cfg, log=lambda *_: None)
    assert any(h["train/samples"] for h in history if "train/samples" in h)
    trained = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trained and all("lora_" in n for n in trained)  # only the adapters are trainable
    lora_b = [p for n, p in model.named_parameters() if "lora_B" in n]
    assert any(p.abs().sum() > 0 for p in lora_b)  # B starts at zero: it moved
    for k, v in model.get_base_model().state_dict().items():  # the base weights are untouched
        key = k.replace(".base_layer", "")
        if "lora_" not in k and key in base_state:
            assert torch.equal(v, base_state[key]), k
    ref = reference_of(model)
    assert isinstance(ref, AdapterDisabled)
    assert torch.allclose(_logits(ref, ids), before, atol=1e-6)  # the reference is the base model
    after = _logits(model, ids)
    assert not torch.allclose(after, before, atol=1e-4)  # the policy is not
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "final")
    assert torch.allclose(_logits(merged, ids), after, atol=1e-4)  # final/ is the merged policy
    assert (tmp_path / "final" / "adapter" / "adapter_config.json").is_file()


def test_without_lora_the_reference_is_a_frozen_copy():
    cfg = config.load(Config, overrides=["model.sft_warm_start=false", "model.tiny.num_layers=1"])
    model, _ = load_policy(cfg)
    assert maybe_lora(model, cfg) is model
    ref = reference_of(model)
    assert ref is not model and not any(p.requires_grad for p in ref.parameters())
    on = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, lora=dataclasses.replace(cfg.model.lora, r=2)))
    peft_model = maybe_lora(model, on)
    n_train = sum(p.numel() for p in peft_model.parameters() if p.requires_grad)
    assert 0 < n_train < 0.1 * sum(p.numel() for p in peft_model.parameters())


@pytest.mark.timeout(600)
def test_ppo_and_dpo_with_lora_train_the_adapters(tmp_path):
    from reasoning_rl.trainers.dpo import train_dpo_ours
    from reasoning_rl.trainers.ppo import train_ppo

    ppo = [o.replace("grpo.", "ppo.") for o in SMALL if not o.startswith("grpo.filter")]
    cfg = config.load(Config, overrides=ppo + [f"output_dir={tmp_path / 'ppo'}"])
    history, model, _ = train_ppo(cfg, log=lambda *_: None)
    assert all("loss/value" in h for h in history) and (tmp_path / "ppo" / "final" / "adapter").is_dir()
    assert all("lora_" in n for n, p in model.named_parameters() if p.requires_grad)

    cfg = config.load(Config, overrides=SMALL + ["dpo.lr=1e-2", "dpo.batch_size=8", "dpo.epochs=3"])
    base, tok = load_policy(cfg)
    model = maybe_lora(base, cfg)
    rows = [{"prompt": f"{a}+{a}=", "chosen": str(2 * a), "rejected": str(2 * a + 1)} for a in range(16)]
    m = train_dpo_ours(cfg, model, tok, rows, log=lambda *_: None)
    assert m["rewards/margins"] > 0 and m["rewards/accuracies"] > 0.5  # against the adapter-disabled base
    assert all("lora_" in n for n, p in model.named_parameters() if p.requires_grad)


@pytest.mark.timeout(600)
def test_a_lora_runs_checkpoint_and_final_hold_the_adapters_which_load_merged(tmp_path):
    """With a base model on disk (here the tiny model's SFT warm start) a LoRA run's checkpoint keeps only the
    adapters and their optimiser state, and final/ is a PEFT folder of a few hundred KB, which `load_policy` loads
    merged into its base (the trained policy's logits); model.lora.save_merged adds final/merged."""
    from reasoning_rl.trainers.grpo import train_grpo

    warm = [o for o in SMALL if not o.startswith(("model.sft_warm_start", "model.tiny.num_layers"))]
    cfg = config.load(Config, overrides=warm + [f"output_dir={tmp_path}", "grpo.checkpoint_every=1",
                                                "model.lora.save_merged=true"])
    _, model, tok = train_grpo(cfg, log=lambda *_: None)
    state = torch.load(tmp_path / "checkpoint" / "state.pt", weights_only=False)
    assert state["model"] and all("lora_" in k for k in state["model"])
    final = tmp_path / "final"
    assert (final / "adapter_config.json").is_file() and not (final / "config.json").exists()
    assert sum(p.stat().st_size for p in final.rglob("*") if p.is_file() and "merged" not in p.parts) < 2e6
    loaded, _ = load_policy(dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, name_or_path=str(final),
                                                                              lora=dataclasses.replace(cfg.model.lora,
                                                                                                       r=0))))
    ids = tok(["12+7=", "3*4="], return_tensors="pt", padding=True)["input_ids"]
    assert torch.allclose(_logits(loaded, ids), _logits(model.eval(), ids), atol=1e-4)
    assert (final / "merged" / "config.json").is_file()


def test_the_adapter_disabled_reference_reads_as_the_model_it_wraps():
    """The KV cache's helpers ask the reference what model it is: with adapters it used to be an object without a
    config (`AttributeError: 'AdapterDisabled' object has no attribute 'config'` at the first update of PPO, or of
    GRPO with beta > 0, on any model whose update shares a group's prompt pass)."""
    from reasoning_rl.models.cache import cache_argument, reusable

    cfg = config.load(Config, overrides=SMALL)
    base, tok = load_policy(cfg)
    model = maybe_lora(base, cfg)
    with torch.no_grad():
        for p in model.parameters():
            if p.requires_grad:
                p.add_(0.5)  # adapters that change the logits
    ref = reference_of(model)
    assert ref.config is model.config and reusable(ref) == reusable(model)
    assert cache_argument(ref) == cache_argument(model)
    ids = tok(["12+7="], return_tensors="pt")["input_ids"]
    off = ref(input_ids=ids).logits
    assert torch.equal(ref.forward(input_ids=ids).logits, off)  # forward, too, runs with the adapters off
    assert not torch.allclose(_logits(model, ids), off)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("algo", ["ppo", "grpo"])
def test_lora_with_a_reference_and_the_shared_prompt_pass_trains(tmp_path, algo):
    """The path a real model takes (share_prompt_pass on, a group's prompt run once) with LoRA and beta > 0: the
    reference scores through the same shared pass. It crashed at the first update before the reference read as a
    model."""
    from reasoning_rl.trainers.grpo import train_grpo
    from reasoning_rl.trainers.ppo import train_ppo

    keys = [o.replace("grpo.", f"{algo}.") for o in SMALL if not (algo == "ppo" and o.startswith("grpo.filter"))]
    cfg = config.load(Config, overrides=keys + [f"{algo}.share_prompt_pass=on", f"{algo}.beta=0.05",
                                                f"output_dir={tmp_path}"])
    history, _, _ = (train_ppo if algo == "ppo" else train_grpo)(cfg, log=lambda *_: None)
    trained = [h for h in history if h.get("train/samples")]
    assert trained and all("kl" in h for h in trained)


def test_adapters_trained_on_a_merged_model_are_saved_with_it(tmp_path):
    """Adapters loaded merged into their base (an SFT run's LoRA final/) and trained again are not adapters of that
    base: final/ holds the merged weights they were trained on (and the adapters in final/adapter), so loading it
    gives the trained policy, not the new adapters on the first base."""
    from reasoning_rl.models.lora import save_final

    warm = [o for o in SMALL if not o.startswith(("model.sft_warm_start", "model.tiny.num_layers"))]
    cfg = config.load(Config, overrides=warm)
    first = maybe_lora(load_policy(cfg)[0], cfg)
    with torch.no_grad():
        for p in first.parameters():
            if p.requires_grad:
                p.add_(0.3)
    tok = load_policy(cfg)[1]
    sft = save_final(str(tmp_path), first, tok, name="sft")
    assert (tmp_path / "sft" / "adapter_config.json").is_file()
    on_sft = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, name_or_path=sft))
    second = maybe_lora(load_policy(on_sft)[0], on_sft)
    with torch.no_grad():
        for p in second.parameters():
            if p.requires_grad:
                p.add_(-0.2)
    final = save_final(str(tmp_path), second, tok, name="grpo")
    assert (tmp_path / "grpo" / "config.json").is_file() and (tmp_path / "grpo" / "adapter").is_dir()
    loaded, _ = load_policy(dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, name_or_path=final)))
    ids = tok(["12+7=", "3*4="], return_tensors="pt", padding=True)["input_ids"]
    assert torch.allclose(_logits(loaded, ids), _logits(second.eval(), ids), atol=1e-4)


def test_merged_state_is_merge_and_unloads_model_without_a_copy():
    """What the worker engine loads with adapters: the PEFT state merged by name equals peft's own merge, tensor by
    tensor (B perturbed, so the adapters change every weight they touch)."""
    import copy

    from reasoning_rl.models.lora import merged_state, scalings

    cfg = config.load(Config, overrides=SMALL)
    base, _ = load_policy(cfg)
    model = maybe_lora(base, cfg)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.1)
    theirs = copy.deepcopy(model).merge_and_unload().state_dict()
    ours = merged_state(model.state_dict(), scalings(model))
    assert set(ours) == set(theirs) and scalings(model)
    for k in theirs:
        torch.testing.assert_close(ours[k], theirs[k], rtol=0, atol=1e-6)  # float32 products of the same operands
    plain = merged_state(model.state_dict(), {k: 0.0 for k in scalings(model)})  # the base's own weights
    assert [k for k in theirs if not torch.equal(theirs[k], plain[k])]  # the adapters moved some weights
