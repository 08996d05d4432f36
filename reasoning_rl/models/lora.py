"""Optional LoRA adapters (peft) for the trained policy, and what follows from them.

    maybe_lora(model, cfg)       the policy with adapters when model.lora.r > 0 (else the model itself)
    reference_of(model)          the frozen reference policy: with adapters, the same model with them disabled
                                 (no second copy in memory, as TRL does with a peft_config); else a frozen copy
    body_of(policy)              the transformer body (PPO's critic copies it)
    save_final(dir, model, tok)  dir/final as a plain Hugging Face model; with adapters, the merged weights
                                 there and the adapters alone in final/adapter

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
    """The base model under a peft policy: every call runs with the adapters switched off, without gradients."""

    def __init__(self, model) -> None:
        self.model = model

    def __call__(self, *args, **kwargs):
        import torch

        with self.model.disable_adapter(), torch.no_grad():
            return self.model(*args, **kwargs)

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


def save_final(output_dir: str, model, tok, name: str = "final") -> str:
    final = os.path.join(output_dir, name)
    if is_lora(model):
        model.save_pretrained(os.path.join(final, "adapter"))
        merged = copy.deepcopy(model).merge_and_unload()
        merged.save_pretrained(final)
    else:
        model.save_pretrained(final)
    tok.save_pretrained(final)
    return final
