"""The task: a user's data (or the embedded generators) -> normalised rows, prompts, references and a reward.

    task.py       Task: both splits read and checked, rendered prompts, reward terms, `verify` (what training and
                  evaluation both call)
    sources.py    local files, `save_to_disk` folders, Hub datasets; the split by stable hash
    presets.py    the column layouts of public formats (gsm8k, math, humaneval, mbpp, ...), as data
    check.py      `reasoning-rl task check`: what a run would train on, before any model loads
    embedded/     the procedural generators of the embedded default (arithmetic, word problems, programs)

Held-out scoring lives in reasoning_rl/eval/, sampling in reasoning_rl/rollout/: a Task never generates.
"""
from .task import Task

__all__ = ["Task"]
