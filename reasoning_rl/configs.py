"""The run configuration: every knob, its help text and recommended value, in one place.

Sections map to `--set section.key=value`. Later trainers add their sections here.
The machinery (loading, overrides, validation) is in `config.py`.
"""
from __future__ import annotations

from dataclasses import dataclass

from .config import knob
from .tiny.model import TinyModelConfig
from .tiny.tasks import TaskConfig


@dataclass(frozen=True)
class ModelConfig:
    name_or_path: str = knob("tiny", "'tiny' = the embedded default built in code; otherwise any HF causal LM name or path")
    tiny: TinyModelConfig = knob(default_factory=TinyModelConfig, help="shape of the embedded tiny model")
    sft_warm_start: bool = knob(True, "for 'tiny': start from the cached SFT checkpoint (built on first use)")


@dataclass(frozen=True)
class SFTConfig:
    steps: int = knob(1200, "optimiser steps; 1200 reaches ~40% held-out on the default tasks", min=1)
    batch_size: int = knob(64, "sequences per step", min=1)
    lr: float = knob(3e-3, "peak AdamW learning rate", min=0.0)
    warmup_steps: int = knob(50, "linear warm-up steps, then cosine decay to 10%", min=0)
    weight_decay: float = knob(0.0, "AdamW weight decay", min=0.0)
    grad_clip: float = knob(1.0, "max gradient norm (0 = off)", min=0.0)
    eval_size: int = knob(400, "held-out prompts scored at the end", min=1)
    log_every: int = knob(100, "print the loss every N steps", min=1)


@dataclass(frozen=True)
class Config:
    seed: int = knob(0, "seed for torch, python and numpy")
    output_dir: str = knob("runs/default", "where checkpoints, metrics and plots go")
    num_threads: int = knob(1, "torch intra-op threads (1 is fastest on a busy 2-core machine)", min=1)
    model: ModelConfig = knob(default_factory=ModelConfig, help="the policy model")
    tasks: TaskConfig = knob(default_factory=TaskConfig, help="the procedural tasks")
    sft: SFTConfig = knob(default_factory=SFTConfig, help="supervised warm start")
