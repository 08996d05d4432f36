"""The train/held-out split of the procedural tasks, shared by the arithmetic and the code families.

A prompt's split is decided by a stable hash of its text, so a prompt is held out in every run and
never trained on. Not here: the families themselves (task/embedded/arithmetic.py, task/embedded/programs.py).
"""
from __future__ import annotations

import hashlib
import random
from typing import Callable

from ...config.knobs import ConfigError
from ..sources import stable_hash


def _is_heldout(prompt: str, percent: int) -> bool:
    return stable_hash(prompt) % 100 < percent


def split_rows(draw: Callable[[random.Random], tuple[str, str, dict]], cfg, what: str) -> tuple[list[dict], list[dict]]:
    """Draw (family, prompt, fields) until both splits are full: distinct prompts, each in the split its
    stable hash decides. Shared by the arithmetic and the code tasks."""
    rng = random.Random(cfg.seed)
    train: list[dict] = []
    test: list[dict] = []
    seen: set[str] = set()
    budget = 200 * (cfg.num_train + cfg.num_test)
    while (len(train) < cfg.num_train or len(test) < cfg.num_test) and budget > 0:
        budget -= 1
        name, prompt, fields = draw(rng)
        if prompt in seen:
            continue
        held = _is_heldout(prompt, cfg.heldout_percent)
        bucket, want = (test, cfg.num_test) if held else (train, cfg.num_train)
        if len(bucket) >= want:
            continue
        seen.add(prompt)
        pid = f"{name}-{hashlib.sha256(prompt.encode()).hexdigest()[:12]}"
        bucket.append({"prompt_id": pid, "task": name, "prompt": prompt, **fields})
    if len(train) < cfg.num_train or len(test) < cfg.num_test:
        raise ConfigError(f"tasks: only {len(train)} train / {len(test)} held-out distinct prompts exist for "
                         f"{what}; lower tasks.num_train/num_test")
    return train, test
