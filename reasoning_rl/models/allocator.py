"""The C allocator under torch's CPU tensors: keep freed memory for the next step instead of handing it back.

glibc's malloc serves every block above its mmap threshold (at most 32 MB) with a fresh `mmap` and unmaps it on
free. A training step on a CPU allocates and frees the same large tensors every time (the logits alone are 400 MB at
32 x 64 tokens of SmolLM2's 49,152-word vocabulary), so every step faults in, and the kernel zeroes, gigabytes of
new pages (about a million minor page faults a step of a real-model update: docs/results.md). With
`cpu_allocator=reuse` (the default) big blocks come from the heap and freed memory stays there
(`mallopt(M_MMAP_MAX, 0)`, `mallopt(M_TRIM_THRESHOLD, the largest value)`): from the third step on the same update
takes no page faults. The price: the process keeps its peak memory until it exits, as a GPU caching
allocator does. `system` leaves glibc as it is. On a C library that is not glibc nothing changes (and it is said).

Not here: torch's own allocators, any setting a process must have before it starts (LD_PRELOAD of jemalloc or
tcmalloc would also do; none of them is installed with this project).
"""
from __future__ import annotations

import ctypes
import ctypes.util

__all__ = ["configure"]

M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4  # glibc's malloc.h
_LARGEST = 2**31 - 1  # mallopt takes an int


def configure(choice: str) -> str:
    """Apply cpu_allocator `choice` ("reuse" or "system") to this process. Returns what it did, in one line."""
    if choice == "system":
        return "cpu allocator: glibc's defaults (cpu_allocator=system)"
    if choice != "reuse":
        raise ValueError(f"cpu_allocator: value {choice!r} is not reuse or system")
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
        libc.gnu_get_libc_version  # glibc's own symbol: musl and others have no mallopt of this meaning
    except (OSError, AttributeError, TypeError):
        return f"cpu allocator: left as it is ({name or 'no C library found'} is not glibc)"
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    if mallopt(M_MMAP_MAX, 0) != 1 or mallopt(M_TRIM_THRESHOLD, _LARGEST) != 1:
        return "cpu allocator: glibc refused mallopt; left as it is"
    return "cpu allocator: freed memory kept for reuse (cpu_allocator=reuse: no mmap, no trim)"
