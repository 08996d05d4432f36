"""Optional LoRA adapters (peft) for the trained policy, and what follows from them.

    maybe_lora(model, cfg)       the policy with adapters when model.lora.r > 0 (else the model itself)
    reference_of(model)          the frozen reference policy: with adapters, the same model with them disabled
                                 (no second copy in memory, as TRL does with a peft_config); else a frozen copy
    body_of(policy)              the transformer body (PPO's critic copies it)
    save_final(dir, model, tok)  dir/final: a plain Hugging Face model; with adapters, the adapters alone as a PEFT
                                 folder (a few MB; `load_pretrained` merges them into their base), and the merged
                                 model in final/merged only when asked (model.lora.save_merged); a base built in code
                                 (no folder to merge into later): merged in final/, the adapters in final/adapter
    trained_state(model) / load_trained_state(model, state)   what a checkpoint holds: with adapters, only them
    scalings(model), merged_state(state, scale)    a PEFT model's state as its base model's, the adapters merged
                                 in (what an engine with a full model of its own loads: the worker engine)

Not here: which parameters an optimiser steps (those with requires_grad: peft freezes the base).
"""
from __future__ import annotations

import copy
import os

from ..config.sections import Config


def is_lora(model) -> bool:
    return hasattr(model, "disable_adapter") and hasattr(model, "peft_config")


def maybe_lora(model, cfg: Config):
    lc = cfg.model.lora
    if lc.r == 0:
        return model
    from peft import LoraConfig, get_peft_model

    target = list(lc.target_modules) or "all-linear"
    model = get_peft_model(model, LoraConfig(r=lc.r, lora_alpha=lc.alpha, lora_dropout=lc.dropout,
                                             target_modules=target, task_type="CAUSAL_LM"))
    if cfg.model.gradient_checkpointing:
        model.enable_input_require_grads()  # frozen embeddings: checkpointed blocks still need a grad path
    return model


class AdapterDisabled:
    """The base model under a peft policy: every call runs with the adapters switched off, without gradients. It
    reads as the model it wraps (`config`, `get_base_model`, `dtype`, ...: the helpers that ask what kind of model
    they run, such as the KV cache's, work on it as on the policy); `forward` is the call, adapters off too."""

    def __init__(self, model) -> None:
        self.model = model

    def __call__(self, *args, **kwargs):
        import torch

        with self.model.disable_adapter(), torch.no_grad():
            return self.model(*args, **kwargs)

    forward = __call__

    def __getattr__(self, name: str):
        if name == "model":  # not set yet (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.model, name)

    @property
    def device(self):
        return self.model.device

    def eval(self) -> "AdapterDisabled":
        return self


def reference_of(model):
    if is_lora(model):
        return AdapterDisabled(model)
    ref = copy.deepcopy(model).eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref


def body_of(policy):
    base = policy.get_base_model() if is_lora(policy) else policy
    return base.model


def save_final(output_dir: str, model, tok, name: str = "final", merged: bool = False, cfg: Config | None = None
               ) -> str:
    """The trained model in output_dir/name with its tokenizer: the whole model, or with adapters the adapters alone
    (a PEFT folder naming its base) and, with `merged`, the merged model in name/merged too. With the run's `cfg`,
    also the prompt format it trained with (prompt_format.json: what later commands prompt the model with)."""
    final = os.path.join(output_dir, name)
    _save_weights(final, model, tok, merged)
    if cfg is not None:
        from ..config import prompt_format

        prompt_format.write(final, cfg)
        if merged and is_lora(model):
            prompt_format.write(os.path.join(final, "merged"), cfg)
    return final


def _save_weights(final: str, model, tok, merged: bool) -> None:
    if is_lora(model) and not _base_name(model):  # a base built in code (the tiny model without its warm start): no
        model.save_pretrained(os.path.join(final, "adapter"))  # folder to merge into later, so final/ is merged
        copy.deepcopy(model).merge_and_unload().save_pretrained(final)
    elif is_lora(model):
        model.save_pretrained(final)
        if merged:
            copy.deepcopy(model).merge_and_unload().save_pretrained(os.path.join(final, "merged"))
            tok.save_pretrained(os.path.join(final, "merged"))
    else:
        model.save_pretrained(final)
    tok.save_pretrained(final)


def _base_name(model) -> str:
    """The folder or Hub name the adapters' base model was loaded from ("" for a model built in code)."""
    return next(iter(model.peft_config.values())).base_model_name_or_path or ""


def scalings(model) -> dict[str, float]:
    """Each adapted layer's LoRA scale (alpha / r; alpha / sqrt(r) with rsLoRA), by the layer's name in the PEFT
    model's state dict; empty for a model without adapters."""
    return {name: float(m.scaling["default"]) for name, m in model.named_modules()
            if isinstance(getattr(m, "scaling", None), dict) and "default" in m.scaling}


def merged_state(state: dict, scale: dict[str, float]) -> dict:
    """A PEFT model's state dict (`state`: a live model's or a snapshot's) as its base model's, each adapted weight
    merged: W' = W + scale * B @ A, W (out, in), B (out, r), A (r, in); the adapter tensors left out and the base
    model's names restored (no base_model.model. prefix, no .base_layer). What merge_and_unload's model holds,
    without copying the model."""
    prefix, out = "base_model.model.", {}
    for key, t in state.items():
        if ".lora_" in key:
            continue
        name = key.removeprefix(prefix)
        if ".base_layer." in key:
            layer = key.split(".base_layer.")[0]
            name = name.replace(".base_layer.", ".")
            if key.endswith(".base_layer.weight"):
                delta = state[f"{layer}.lora_B.default.weight"].float() @ state[f"{layer}.lora_A.default.weight"].float()
                if delta.shape != t.shape:  # a layer that stores its weight transposed (fan_in_fan_out)
                    raise ValueError(f"merged_state: {layer}: B @ A is {tuple(delta.shape)}, the weight "
                                     f"{tuple(t.shape)}")
                t = (t.float() + scale[layer] * delta).to(t.dtype)
        out[name] = t
    return out


def trained_state(model) -> dict:
    """What a checkpoint keeps of the policy: its whole state, or with adapters only the trained ones (the base is
    the base model's, reloaded on resume)."""
    state = model.state_dict()
    if not is_lora(model):
        return state
    trained = {n for n, p in model.named_parameters() if p.requires_grad}
    return {k: v for k, v in state.items() if k in trained}


def load_trained_state(model, state: dict) -> None:
    """Put `trained_state` back: the whole state, or the adapters (every trained parameter must be in it)."""
    if not is_lora(model):
        model.load_state_dict(state)
        return
    trained = {n for n, p in model.named_parameters() if p.requires_grad}
    missing = sorted(trained - set(state))
    if missing:
        raise ValueError(f"--resume: the checkpoint holds none of {missing[:3]}... (a checkpoint of another model?)")
    model.load_state_dict(state, strict=False)


def adapter_base(folder: str) -> str | None:
    """The base model a PEFT adapter folder names (adapter_config.json), or None for any other folder."""
    import json

    path = os.path.join(folder, "adapter_config.json")
    if not os.path.isfile(path) or os.path.isfile(os.path.join(folder, "config.json")):
        return None
    with open(path) as f:
        return json.load(f).get("base_model_name_or_path") or None