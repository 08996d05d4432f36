"""Which machine this is, as far as PyTorch's CPU kernels care: the processor's name and identity, the instruction
sets its kernels use (AVX2, AVX-512, AVX-512 BF16/FP16, AMX), the cores this process may use, torch's and oneDNN's
versions and torch's thread count.

    cpu() -> (name, flags)        fingerprint() -> a dict of all of it (the key kernel choices are cached under)

Read by `rollout/kernel_choice.py` (a choice measured on one machine is not reused on another) and by the benches'
`bench/machine.py` (figures say where they ran). Not here: measuring anything.
"""
from __future__ import annotations

import os
import platform
import re

FLAGS = ("avx2", "avx512f", "avx512_bf16", "avx512_fp16", "amx_bf16", "amx_int8", "amx_tile")


def cpu() -> tuple[str, list[str]]:
    """(the processor's model name with its family/model/stepping, the FLAGS it has) from /proc/cpuinfo (platform's
    words elsewhere)."""
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
    import torch

    m = re.search(r"MKL-DNN (v[\d.]+)", torch.__config__.show())
    return m.group(1) if m else "unknown"


def fingerprint() -> dict:
    """Everything above, with the usable cores and torch's threads: two processes with equal fingerprints run the
    same CPU kernels at the same width."""
    import torch

    name, flags = cpu()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu": name, "flags": flags, "cores": os.cpu_count(), "usable": usable, "torch": torch.__version__,
            "onednn": onednn_version(), "threads": torch.get_num_threads()}
