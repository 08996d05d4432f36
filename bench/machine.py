"""Where a bench ran: the processor, its flags that matter to PyTorch's CPU kernels, the cores, torch's and
oneDNN's versions and the thread settings, in one line, so that figures from two machines can be set side by side.

    from machine import describe; print(describe())
    .venv/bin/python bench/machine.py

and `peak_rss_mib()`, the memory benches' peak: the process's own.
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repository
from reasoning_rl.models.machine import FLAGS, cpu, onednn_version  # noqa: E402


def describe() -> str:
    import torch

    name, flags = cpu()
    onednn = onednn_version()
    threads = {k: os.environ[k] for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_CORETYPE") if k in os.environ}
    return (f"machine: {name}; flags {' '.join(flags) or 'none of ' + '/'.join(FLAGS)}; {os.cpu_count()} cores "
            f"({len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else '?'} usable); torch "
            f"{torch.__version__}, oneDNN {onednn}, MKL {torch.backends.mkl.is_available()}; "
            f"{torch.get_num_threads()} torch threads" + (f"; {threads}" if threads else ""))


def peak_rss_mib() -> float:
    """This process's own peak resident memory in MiB since it started its program (VmHWM of /proc/self/status).
    Not `getrusage(...).ru_maxrss`: Linux carries the peak of the process that forked it over fork and exec, so a
    child a bench starts after training in its own process reported the parent's peak (13.8 GB for a step whose own
    peak is 7.8 GB)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    raise RuntimeError("/proc/self/status has no VmHWM line: the peak needs Linux")


if __name__ == "__main__":
    print(describe())
