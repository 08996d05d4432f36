"""What a model's KV cache takes: the forward argument it goes in, and whether a row's cache can be cut and batched.

    cache_argument(model) -> "cache" | "past_key_values"
    reusable(model) -> bool    every layer a plain full-attention DynamicLayer

Shared by the log-prob pass that runs a prompt once for its rows (logprobs.py) and the rollout's decode loop
(reasoning_rl/rollout/decode.py), which sits above it.
"""
from __future__ import annotations

import inspect


def cache_argument(model) -> str:
    """The forward argument a cache goes in: transformers >= 5.2x names it `cache` (`past_key_values` is
    deprecated); older ones only know the latter. A peft model passes keywords on to the model it wraps."""
    inner = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(inner.forward).parameters else "past_key_values"


def reusable(model) -> bool:
    """Whether a row's cache can be cut and batched again: every layer a plain full-attention DynamicLayer (not a
    sliding window, not a recurrent state)."""
    from transformers import DynamicCache

    layers = DynamicCache(config=model.config).layers
    return bool(layers) and all(type(x).__name__ == "DynamicLayer" for x in layers)
