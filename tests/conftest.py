"""Shared test set-up: one torch thread (with two threads and the other core busy, torch
runs many times slower on these machines), and the repository root for subprocess tests."""
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

try:
    import torch

    torch.set_num_threads(1)
except ImportError:  # pragma: no cover - torch is a hard dependency
    pass


@pytest.fixture
def root() -> Path:
    return ROOT


def run_env(**extra: str) -> dict:
    """Environment for `python -m reasoning_rl ...` subprocesses."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    env.update(extra)
    return env


PY = sys.executable


@pytest.fixture
def float64():
    """Run a test with float64 as torch's default dtype, and restore the default after."""
    import torch

    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)
