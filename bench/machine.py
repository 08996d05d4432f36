"""Where a bench ran: the processor, its flags that matter to PyTorch's CPU kernels, the cores, torch's and
oneDNN's versions and the thread settings, in one line, so that figures from two machines can be set side by side.

    from machine import describe; print(describe())
    .venv/bin/python bench/machine.py
"""
from __future__ import annotations

import os
import platform

FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_int8", "amx_tile")


def cpu() -> tuple[str, list[str]]:
    """(the processor's model name, the FLAGS it has) from /proc/cpuinfo (platform's words elsewhere)."""
    name, flags, ids = platform.processor() or platform.machine(), set(), {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = (part.strip() for part in line.partition(":"))
                if key == "model name" and name in ("", platform.machine(), platform.processor()):
                    name = value
                elif key in ("cpu family", "model", "stepping") and key not in ids:
                    ids[key] = value
                elif key == "flags":
                    flags = set(value.split())
    except OSError:
        pass
    if ids:
        name += f" (family {ids.get('cpu family', '?')} model {ids.get('model', '?')} stepping {ids.get('stepping', '?')})"
    return name, [f for f in FLAGS if f in flags]


def onednn_version() -> str:
    """oneDNN's version as torch's build configuration names it ("v3.12.0"), or "unknown"."""
    import re

    import torch

    m = re.search(r"MKL-DNN (v[\d.]+)", torch.__config__.show())
    return m.group(1) if m else "unknown"


def describe() -> str:
    import torch

    name, flags = cpu()
    onednn = onednn_version()
    threads = {k: os.environ[k] for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_CORETYPE") if k in os.environ}
    return (f"machine: {name}; flags {' '.join(flags) or 'none of ' + '/'.join(FLAGS)}; {os.cpu_count()} cores "
            f"({len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else '?'} usable); torch "
            f"{torch.__version__}, oneDNN {onednn}, MKL {torch.backends.mkl.is_available()}; "
            f"{torch.get_num_threads()} torch threads" + (f"; {threads}" if threads else ""))


if __name__ == "__main__":
    print(describe())
