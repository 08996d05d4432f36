"""Shared test set-up: one torch thread (with two threads and the other core busy, torch
runs many times slower on these machines), and the repository root for subprocess tests."""
import os
import signal
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

try:
    import torch

    torch.set_num_threads(1)
except ImportError:  # pragma: no cover - torch is a hard dependency
    pass


# Under pytest-xdist each worker runs tests on a core of its own; a test's subprocess that runs the real model takes
# its torch threads as the project's share of the cores (num_threads=0: `device.share_of_cores`), which counts the
# project's processes that asked for one. The workers ask too, so such a subprocess takes its worker's share instead
# of every core while the other worker runs: two real-model runs with two threads each on two cores each ran over
# 1,100 s where one alone takes under 200. (On more cores than workers this is cautious: the waiting worker counts.)
if os.environ.get("PYTEST_XDIST_WORKER"):
    from reasoning_rl.models.device import share_of_cores

    share_of_cores()

# The suite run as another machine would (tests/machine_as/as_machine.py: forced kernels, threads, allocator)
from tests.machine_as.as_machine import VAR as _AS_VAR, apply as _as_machine

_AS = _as_machine()
if _AS:  # the processes this one spawns (a generation worker) start under the same settings
    os.environ["PYTHONPATH"] = os.pathsep.join([str(ROOT / "tests" / "machine_as")] + [
        p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])

# A shell starts a background job (`make test &`) with SIGINT ignored, and Python then installs no Ctrl-C handler
# of its own; the interrupt tests simulate Ctrl-C with `_thread.interrupt_main`, which does nothing then. The
# suite runs as it does in the foreground: with Python's handler.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def unforced(monkeypatch):
    """A test of the machine's own choice (auto's kernels) runs it as it is, not as REASONING_RL_TEST_AS forces it."""
    from tests.machine_as.as_machine import ORIGINAL

    for module, name, value in ORIGINAL:
        monkeypatch.setattr(module, name, value)


def pytest_report_header(config):
    return f"as another machine ({_AS_VAR}): {_AS}" if _AS else None


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture(autouse=True)
def _ctrl_c_handler_kept(request):
    """Python's Ctrl-C handler put back after a test that left it changed, with a warning naming the test: later
    tests simulate Ctrl-C with `_thread.interrupt_main`, which does nothing under another handler. (The first test
    of a suite started in the background was named here until the suite began by installing the handler, above:
    the shell had set SIG_IGN before any test ran.)"""
    yield
    handler = signal.getsignal(signal.SIGINT)
    if handler is not signal.default_int_handler:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        warnings.warn(f"{request.node.nodeid} left the SIGINT handler as {handler!r}; put back")


def run_env(**extra: str) -> dict:
    """Environment for `python -m reasoning_rl ...` subprocesses."""
    env = {**os.environ, **extra}
    site = [str(ROOT / "tests" / "machine_as")] if env.get(_AS_VAR) else []  # its sitecustomize applies them
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *site] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                                             if p])
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
