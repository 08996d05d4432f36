"""Configuration: every knob declared once, with its help text, and the loading of YAML/TOML files and `--set`.

    knobs.py          knob(), load(), from_dict(), apply_overrides(), describe(): the machinery (no section in it)
    sections.py       Config and its sections (model, tasks, generation, eval, sft, dpo, monitor, recipe, ...)
    rl.py             RLConfig and the grpo / ppo sections built on it
    prompt_format.py  the prompt format a trained model keeps beside it (final/prompt_format.json) and its adoption

The lowest row of `reasoning_rl` (docs/architecture.md): it imports nothing of the package but the shared types and
errors, so every other folder can read a config.
"""
from .knobs import ConfigError, apply_overrides, describe, from_dict, given_keys, knob, load, redefault, to_dict
from .rl import DistillConfig, GRPOConfig, PPOConfig, RLConfig
from .sections import (Config, DPOConfig, EvalConfig, GenerationConfig, LoRAConfig, ModelConfig, MonitorConfig,
                       PRMTrainConfig, RecipeConfig, RewardTermConfig, SFTConfig, TaskConfig, TinyModelConfig)

__all__ = ["ConfigError", "apply_overrides", "describe", "from_dict", "given_keys", "knob", "load", "redefault",
           "to_dict", "Config", "DPOConfig", "EvalConfig", "GenerationConfig", "LoRAConfig", "ModelConfig",
           "MonitorConfig", "PRMTrainConfig", "RecipeConfig", "RewardTermConfig", "SFTConfig", "TaskConfig",
           "TinyModelConfig", "GRPOConfig", "PPOConfig", "RLConfig", "DistillConfig"]
