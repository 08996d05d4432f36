"""Rollout engines: `generate(prompts, n, sampling) -> list[Group]` with token ids and pi_old log-probs.

The names below load on first use, so that `reasoning_rl.rollout.environments` (and `reasoning_rl.environments`,
which a plugin environment imports) stays light: no torch until an engine is asked for.
"""
import importlib

_WHERE = {"PromptRow": "base", "RolloutEngine": "base", "SamplingConfig": "base", "as_rows": "base",
          "logprob_mismatch": "base", "HFEngine": "hf", "OpenAIEngine": "openai", "RolloutError": "openai"}

__all__ = list(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
