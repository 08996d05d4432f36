"""AdamW as every trainer builds it: PyTorch's fused kernel where the parameters allow it, its default loop elsewhere.

The fused kernel updates every tensor in one pass, the same update to float rounding; on a CPU it took one step over
SmolLM2-135M's 134.5 M parameters from 0.41-0.55 s (the default loop over tensors) to 0.085 s (docs/results.md). It
takes plain float32 tensors on a CPU or a GPU; FSDP2's sharded parameters (DTensors, which carry a `device_mesh`)
and other dtypes keep the default loop.

Not here: learning-rate schedules (each trainer's own), which parameters train (the caller passes them).
"""
from __future__ import annotations

from typing import Iterable

import torch

__all__ = ["adamw", "fusable"]


def fusable(params: Iterable[torch.Tensor]) -> bool:
    """Whether PyTorch's fused AdamW can step every tensor of `params` (and there is at least one)."""
    params = list(params)
    return bool(params) and all(p.dtype == torch.float32 and p.device.type in ("cpu", "cuda")
                                and not hasattr(p, "device_mesh") for p in params)


def adamw(params: list[torch.Tensor] | list[dict], *, lr: float, betas: tuple[float, float] = (0.9, 0.999),
          weight_decay: float = 0.0, fused: bool = True) -> torch.optim.AdamW:
    """AdamW over `params` (tensors, or torch's parameter groups: dicts with "params" and their own settings), fused
    where `fusable` says every tensor can be and `fused` is True (False: the default loop, for a run whose published
    weights came from it)."""
    tensors = [t for g in params for t in g["params"]] if params and isinstance(params[0], dict) else params
    return torch.optim.AdamW(params, lr=lr, betas=betas, weight_decay=weight_decay,
                             fused=(fused and fusable(tensors)) or None)
