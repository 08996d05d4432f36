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
    """num_threads: as given when > 0; 0 = 1 for the embedded tiny model (its steps are too small to split; more
    threads also change its float reductions, and so its cached warm start), and for any other model this process's
    share of the cores it may run on: divided evenly among this project's processes running on this machine now
    (`share_of_cores`), since two processes on every core each ran 10-15x slower, not 2x."""
    if num_threads:
        return num_threads
    return 1 if model_name == "tiny" else share_of_cores()


def configure_process(cfg) -> str:
    """This process's CPU settings from the config: torch's intra-op threads (num_threads, `resolve_threads`) and the
    C allocator (cpu_allocator, models/allocator.py). Returns the allocator's line for a log."""
    import torch

    from .allocator import configure

    torch.set_num_threads(resolve_threads(cfg.num_threads, cfg.model.name_or_path))
    return configure(cfg.cpu_allocator)


def machine_load(load=None) -> tuple[float, int]:
    """(the 1-minute load average, this process's usable cores); `load` replaces the reading (tests). A load above
    the cores means other processes share them."""
    import os

    return (load or (lambda: os.getloadavg()[0]))(), len(os.sched_getaffinity(0))


def _registry() -> str:
    import os
    import tempfile

    return os.path.join(tempfile.gettempdir(), f"reasoning-rl-processes-{os.getuid()}")


def _started(pid: int) -> str | None:
    """A process's start time (field 22 of /proc/PID/stat), which tells it apart from a later process given the same
    pid; None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def share_of_cores() -> int:
    """The cores this process may use (its affinity) divided by the number of this project's processes that asked
    for their share and still run (this one included), at least 1. The process registers itself once (a file named
    by its pid under the temporary directory, removed when it exits); files of processes that are gone are ignored
    and removed."""
    import atexit
    import os

    cores = len(os.sched_getaffinity(0))
    folder, me = _registry(), os.getpid()
    os.makedirs(folder, exist_ok=True)
    mine = os.path.join(folder, str(me))
    if not os.path.exists(mine):
        with open(mine, "w") as f:
            f.write(_started(me) or "")
        atexit.register(lambda: os.path.exists(mine) and os.remove(mine))
    live = 0
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        try:
            with open(path) as f:
                stamp = f.read().strip()
        except OSError:
            continue
        if name.isdigit() and (_started(int(name)) or "") == stamp and stamp:
            live += 1
        else:
            try:
                os.remove(path)  # a process that is gone (or whose pid is another process's now)
            except OSError:
                pass
    return max(1, cores // max(1, live))
