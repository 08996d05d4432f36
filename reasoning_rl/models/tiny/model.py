"""The embedded default policy: a tiny Llama-architecture causal LM built in code.

About a million parameters. Two attention heads of width 64 (vLLM's CPU build needs
head_dim >= 64). Tied embeddings keep the parameter count small. It is an ordinary
`transformers.LlamaForCausalLM`, so everything that takes an HF model takes it.

Not here: training (see `models/sft.py`), and any pretrained weights: it starts random.
"""
from __future__ import annotations


from ...config.sections import TinyModelConfig
from .tokenizer import build_char_tokenizer


def build_tiny_model(cfg: TinyModelConfig, tokenizer, seed: int = 0):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(  # (a head count that does not divide the width is refused by TinyModelConfig)
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


def build_tiny(cfg):
    """A freshly initialised tiny model and its tokenizer (no SFT). `cfg`: the root `configs.Config`."""
    tok = build_char_tokenizer()
    return build_tiny_model(cfg.model.tiny, tok, seed=cfg.seed), tok
