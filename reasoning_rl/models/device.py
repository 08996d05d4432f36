"""Where a model runs: `model.device` resolved ("auto" = cuda when a GPU is visible, else cpu), checked.

Its own module so that the SFT warm start and the policy loader share it without importing each other.
"""
from __future__ import annotations

from ..errors import UserError


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


def resolve_threads(num_threads: int, model_name: str) -> int:
    """num_threads: as given when > 0; 0 = what measured fastest here: 1 for the embedded tiny model (its steps are
    too small to split; more threads also change its float reductions, and so its cached warm start), every core
    this process may run on for any other model."""
    import os

    if num_threads:
        return num_threads
    return 1 if model_name == "tiny" else len(os.sched_getaffinity(0))
