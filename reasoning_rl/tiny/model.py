"""The embedded default policy: a tiny Llama-architecture causal LM built in code.

About a million parameters. Two attention heads of width 64 (vLLM's CPU build needs
head_dim >= 64). Tied embeddings keep the parameter count small. It is an ordinary
`transformers.LlamaForCausalLM`, so everything that takes an HF model takes it.

Not here: training (see `sft.py`), and any pretrained weights: it starts random.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..config import knob


@dataclass(frozen=True)
class TinyModelConfig:
    hidden_size: int = knob(128, "width of the residual stream", min=16)
    num_layers: int = knob(4, "transformer blocks", min=1, max=64)
    num_heads: int = knob(2, "attention heads (head_dim = hidden_size / num_heads; vLLM CPU wants >= 64)", min=1)
    intermediate_size: int = knob(512, "MLP width", min=16)
    max_position_embeddings: int = knob(256, "longest prompt + completion in tokens", min=16)


def build_tiny_model(cfg: TinyModelConfig, tokenizer, seed: int = 0):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    if cfg.hidden_size % cfg.num_heads:
        raise ValueError(f"model.tiny.hidden_size ({cfg.hidden_size}) must be divisible by "
                         f"model.tiny.num_heads ({cfg.num_heads})")
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_heads,
        head_dim=cfg.hidden_size // cfg.num_heads,
        max_position_embeddings=cfg.max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        rms_norm_eps=1e-5,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    return model
