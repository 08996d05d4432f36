"""Where a model runs: `model.device` resolved ("auto" = cuda when a GPU is visible, else cpu), checked.

Its own module so that the SFT warm start and the policy loader share it without importing each other.
"""
from __future__ import annotations

from .errors import UserError


def resolve_device(spec: str) -> str:
    """model.device: "auto" is cuda when a GPU is visible, else cpu; anything else as given (checked)."""
    import torch

    if spec == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if spec.startswith("cuda") and not torch.cuda.is_available():
        raise UserError(f"model.device: value {spec!r} but no CUDA device is visible (use auto or cpu)")
    if not (spec == "cpu" or spec == "cuda" or spec.startswith("cuda:") and spec[5:].isdigit() or spec == "mps"):
        raise UserError(f"model.device: value {spec!r} is not auto, cpu, cuda or cuda:N")
    return spec
