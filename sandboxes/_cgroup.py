"""Per-run control groups (cgroup v1): memory (+swap) and process-count limits, CPU accounting.

A run's groups nest under the zygote's own groups for each controller, so limits set on the
caller's group (a CI job, a test's safety net) bind every run too. `destroy` kills whatever is
left, waits for the groups to empty and removes them, and returns how many it found: the proof
that nothing outlives a run. Standard library only; loaded by the zygote.
"""
from __future__ import annotations

import os
import signal
import time

CGROOT = "/sys/fs/cgroup"
CONTROLLERS = ("memory", "pids", "cpuacct")
GROUP = "reasoning-rl-sandbox"


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _put(path: str, value) -> None:
    with open(path, "w") as f:
        f.write(str(value))


def remove_dir(path: str, tries: int = 200, delay: float = 0.005) -> bool:
    """rmdir a cgroup, retrying while the kernel still holds it (busy right after its last task exits)."""
    for _ in range(tries):
        try:
            os.rmdir(path)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            time.sleep(delay)
    return False


def _own_cgroups() -> dict:
    """This process's cgroup-v1 path per controller: runs nest under it, so limits set on the
    caller's group (a CI job, a test's safety net) bind every run too."""
    own = {}
    for line in _read("/proc/self/cgroup").splitlines():
        _, names, path = line.split(":", 2)
        for c in names.split(","):
            own[c] = path
    return {c: os.path.join(CGROOT, c, own.get(c, "/").lstrip("/"), GROUP) for c in CONTROLLERS}


BASES = _own_cgroups()


class Cgroup:
    """One run's cgroup-v1 groups: memory (+swap) and process-count limits, CPU accounting."""

    def __init__(self, name: str) -> None:
        self.paths = {c: os.path.join(BASES[c], name) for c in CONTROLLERS}

    def create(self, memory_bytes: int, processes: int) -> None:
        for path in self.paths.values():
            os.makedirs(path, exist_ok=True)
        mem = self.paths["memory"]
        _put(os.path.join(mem, "memory.limit_in_bytes"), memory_bytes)
        if os.path.exists(os.path.join(mem, "memory.memsw.limit_in_bytes")):
            _put(os.path.join(mem, "memory.memsw.limit_in_bytes"), memory_bytes)
        _put(os.path.join(self.paths["pids"], "pids.max"), processes)

    def add(self, pid: int) -> None:
        for path in self.paths.values():
            _put(os.path.join(path, "cgroup.procs"), pid)

    def procs(self) -> set[int]:
        out: set[int] = set()
        for path in self.paths.values():
            try:
                out.update(int(x) for x in _read(os.path.join(path, "cgroup.procs")).split())
            except FileNotFoundError:
                pass
        return out

    def cpu_s(self) -> float:
        return int(_read(os.path.join(self.paths["cpuacct"], "cpuacct.usage"))) / 1e9

    def stats(self) -> dict:
        mem = self.paths["memory"]
        oom = dict(line.split() for line in _read(os.path.join(mem, "memory.oom_control")).splitlines())
        events = dict(line.split() for line in _read(os.path.join(self.paths["pids"], "pids.events")).splitlines())
        return {"cpu_s": self.cpu_s(), "peak_memory_bytes": int(_read(os.path.join(mem, "memory.max_usage_in_bytes"))),
                "oom_kills": int(oom.get("oom_kill", 0)), "process_limit_hits": int(events.get("max", 0))}

    def destroy(self) -> int:
        """Kill anything left, wait for the groups to empty, remove them; return how many were left."""
        left = self.procs()
        deadline = time.monotonic() + 5
        while self.procs() and time.monotonic() < deadline:
            for pid in self.procs():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.005)
        for path in self.paths.values():
            remove_dir(path)
        return len(left)
