"""Rollout engines: `generate(prompts, n, sampling) -> list[Group]` with token ids and pi_old log-probs."""
from .base import PromptRow, RolloutEngine, SamplingConfig, as_rows, logprob_mismatch
from .hf import HFEngine

__all__ = ["PromptRow", "RolloutEngine", "SamplingConfig", "as_rows", "logprob_mismatch", "HFEngine"]
