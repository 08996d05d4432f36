"""Load the policy: the embedded tiny model (built or from its SFT cache) or any HF causal LM.

One config value, `model.name_or_path`, switches between them. Nothing is downloaded
for the tiny model; a hub name is passed to `from_pretrained` as is (it needs network
or a local HF cache, which is the user's business).
"""
from __future__ import annotations

from .configs import Config


def build_tiny(cfg: Config):
    """A freshly initialised tiny model and its tokenizer (no SFT)."""
    from .tiny.model import build_tiny_model
    from .tiny.tokenizer import build_char_tokenizer

    tok = build_char_tokenizer()
    return build_tiny_model(cfg.model.tiny, tok, seed=cfg.seed), tok


def load_policy(cfg: Config, log=print):
    """(model, tokenizer) as the config asks, in eval mode."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    name = cfg.model.name_or_path
    if name == "tiny":
        if not cfg.model.sft_warm_start:
            model, tok = build_tiny(cfg)
            return model.eval(), tok
        from .sft import build_sft_checkpoint

        name = build_sft_checkpoint(cfg, log=log)
    tok = AutoTokenizer.from_pretrained(name)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(name)
    return model.eval(), tok


def autocast(enabled: bool, model=None):
    """A context that runs forward passes in bfloat16 where `enabled` (autocast on the model's device type:
    cuda, or cpu with oneDNN), else a no-op. Log-probs and losses are upcast to float32 by their callers."""
    import contextlib

    import torch

    if not enabled:
        return contextlib.nullcontext()
    device = model.device.type if model is not None and hasattr(model, "device") else (
        "cuda" if torch.cuda.is_available() else "cpu")
    return torch.autocast(device, dtype=torch.bfloat16)
