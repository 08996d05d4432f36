"""The C allocator under CPU tensors (models/allocator.py): with cpu_allocator=reuse a step's large tensors come back
from memory the process already holds, with no page faults; glibc's defaults fault every one in again."""
import json
import subprocess
import sys

import pytest

from reasoning_rl.models.allocator import configure

CHILD = r"""
import json, resource, sys
import torch
from reasoning_rl.models.allocator import configure
line = configure(sys.argv[1])
def step():  # a training step's pattern: large tensors made, written, freed
    x = torch.empty(64 * 2**20 // 4)  # 64 MB, above glibc's largest mmap threshold
    x.fill_(1.0)
    y = x * 2
    return float(y[-1])
for _ in range(10):  # the heap grows to the step's peak over the first few
    step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    step()
print(json.dumps({"line": line, "faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before}))
"""


def _faults(choice: str) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, choice], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_reuse_serves_a_steps_large_tensors_without_page_faults_where_the_default_faults_them_in():
    reuse, system = _faults("reuse"), _faults("system")
    assert reuse["line"].startswith("cpu allocator: freed memory kept for reuse"), reuse["line"]
    assert system["line"] == "cpu allocator: glibc's defaults (cpu_allocator=system)"
    # five steps of two 64 MB tensors: 2 x 5 x 16,384 pages of 4 KiB faulted in afresh under glibc's defaults
    assert system["faults"] > 100_000, system
    assert reuse["faults"] < system["faults"] / 10, (reuse, system)


def test_an_unknown_choice_is_refused_in_one_line():
    with pytest.raises(ValueError, match="cpu_allocator: value 'jemalloc' is not reuse or system"):
        configure("jemalloc")
