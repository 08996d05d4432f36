"""Rollout engines: `generate(prompts, n, sampling) -> list[Group]` with token ids and pi_old log-probs."""
from .base import PromptRow, RolloutEngine, SamplingConfig, as_rows, logprob_mismatch
from .hf import HFEngine
from .openai import OpenAIEngine, RolloutError

__all__ = ["PromptRow", "RolloutEngine", "SamplingConfig", "as_rows", "logprob_mismatch", "HFEngine", "OpenAIEngine", "RolloutError"]
