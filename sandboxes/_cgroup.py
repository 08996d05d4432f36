"""Per-run control groups: memory (+swap) and process-count limits and CPU accounting, v1 or v2.

`find()` picks what the host gives, in this order, and says why the others were not used:
  * cgroup v1: the memory, pids and cpuacct controllers writable under this process's own
    groups (root on a v1 or hybrid host). A run's groups nest under the zygote's, so limits
    set on the caller's group (a CI job, a test's safety net) bind every run too.
  * cgroup v2: a delegated subtree the caller owns, named by the environment variable
    REASONING_RL_SANDBOX_CGROUP (for example a systemd unit with `Delegate=yes`, or a
    container's own writable subtree). It must hold no process itself, so the memory and pids
    controllers can be enabled for its children (the kernel's "no internal processes" rule).
    Runs get `memory.max` (+ `memory.swap.max` 0), `pids.max`, and end with `cgroup.kill`.

Either kind's `destroy` kills whatever is left, waits for the groups to empty and removes them,
and returns how many it found: the proof that nothing outlives a run. What this does not do:
move the caller's own processes between groups to make a subtree usable (that is the host's
call), or CPU *limits* (CPU time is accounted here and enforced by the supervisor).
Standard library only; loaded by the zygote.
"""
from __future__ import annotations

import os
import signal
import time

CGROOT = "/sys/fs/cgroup"
CONTROLLERS = ("memory", "pids", "cpuacct")
GROUP = "reasoning-rl-sandbox"
V2_ENV = "REASONING_RL_SANDBOX_CGROUP"


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


def _kill_until_empty(procs, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while procs() and time.monotonic() < deadline:
        for pid in procs():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.005)


class CgroupV1:
    """One run's cgroup-v1 groups under `bases` (one directory per controller)."""

    kind = "cgroup-v1"

    def __init__(self, bases: dict, name: str) -> None:
        self.paths = {c: os.path.join(bases[c], name) for c in CONTROLLERS}

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

    def reset_peak(self) -> None:
        _put(os.path.join(self.paths["memory"], "memory.max_usage_in_bytes"), 0)

    def stats(self) -> dict:
        mem = self.paths["memory"]
        oom = dict(line.split() for line in _read(os.path.join(mem, "memory.oom_control")).splitlines())
        events = dict(line.split() for line in _read(os.path.join(self.paths["pids"], "pids.events")).splitlines())
        return {"cpu_s": self.cpu_s(), "peak_memory_bytes": int(_read(os.path.join(mem, "memory.max_usage_in_bytes"))),
                "oom_kills": int(oom.get("oom_kill", 0)), "process_limit_hits": int(events.get("max", 0))}

    def destroy(self) -> int:
        """Kill anything left, wait for the groups to empty, remove them; return how many were left."""
        left = self.procs()
        _kill_until_empty(self.procs)
        for path in self.paths.values():
            remove_dir(path)
        return len(left)


class CgroupV2:
    """One run's cgroup-v2 group under the zygote's delegated group `base`."""

    kind = "cgroup-v2"

    def __init__(self, base: str, name: str) -> None:
        self.path = os.path.join(base, name)

    def create(self, memory_bytes: int, processes: int) -> None:
        os.makedirs(self.path, exist_ok=True)
        _put(os.path.join(self.path, "memory.max"), memory_bytes)
        if os.path.exists(os.path.join(self.path, "memory.swap.max")):
            _put(os.path.join(self.path, "memory.swap.max"), 0)
        _put(os.path.join(self.path, "pids.max"), processes)

    def add(self, pid: int) -> None:
        _put(os.path.join(self.path, "cgroup.procs"), pid)

    def procs(self) -> set[int]:
        try:
            return {int(x) for x in _read(os.path.join(self.path, "cgroup.procs")).split()}
        except FileNotFoundError:
            return set()

    def _keyed(self, name: str) -> dict:
        try:
            return {k: int(v) for k, v in (line.split() for line in _read(os.path.join(self.path, name)).splitlines())}
        except FileNotFoundError:
            return {}

    def cpu_s(self) -> float:
        return self._keyed("cpu.stat").get("usage_usec", 0) / 1e6

    def reset_peak(self) -> None:
        """v2 resets memory.peak only per open file (kernel 6.12+): a session's cases share one peak figure."""

    def stats(self) -> dict:
        try:
            peak = int(_read(os.path.join(self.path, "memory.peak")))
        except FileNotFoundError:  # kernels before 5.19: the current figure is the best there is
            peak = int(_read(os.path.join(self.path, "memory.current")))
        return {"cpu_s": self.cpu_s(), "peak_memory_bytes": peak,
                "oom_kills": self._keyed("memory.events").get("oom_kill", 0),
                "process_limit_hits": self._keyed("pids.events").get("max", 0)}

    def destroy(self) -> int:
        left = self.procs()
        try:
            _put(os.path.join(self.path, "cgroup.kill"), 1)
        except OSError:  # kernels before 5.14: kill one by one
            pass
        _kill_until_empty(self.procs)
        remove_dir(self.path)
        return len(left)


def _own_paths() -> dict:
    own = {}
    for line in _read("/proc/self/cgroup").splitlines():
        _, names, path = line.split(":", 2)
        for c in names.split(",") if names else ("",):
            own[c] = path
    return own


def _find_v1(problems: list) -> dict | None:
    own = _own_paths()
    bases = {c: os.path.join(CGROOT, c, own.get(c, "/").lstrip("/"), GROUP) for c in CONTROLLERS}
    for c in CONTROLLERS:
        parent = os.path.dirname(bases[c])
        if not (os.path.isdir(parent) and os.access(parent, os.W_OK)):
            problems.append(f"cgroup v1 controller {c!r} not writable at {parent}")
            return None
    return bases


def _find_v2(problems: list, zygote_pid: int) -> str | None:
    base = os.environ.get(V2_ENV)
    if not base:
        problems.append(f"no cgroup v2 subtree delegated (set {V2_ENV} to a writable cgroup-v2 directory "
                        f"that holds no process, e.g. a systemd unit's with Delegate=yes)")
        return None
    if not os.path.isfile(os.path.join(base, "cgroup.subtree_control")):
        problems.append(f"{V2_ENV}={base!r} is not a cgroup v2 directory")
        return None
    need = {"memory", "pids"}
    if not need <= set(_read(os.path.join(base, "cgroup.controllers")).split()):
        problems.append(f"cgroup v2 at {base} lacks the {', '.join(sorted(need))} controllers")
        return None
    group = os.path.join(base, f"{GROUP}-{zygote_pid}")
    try:
        if not need <= set(_read(os.path.join(base, "cgroup.subtree_control")).split()):
            _put(os.path.join(base, "cgroup.subtree_control"), "+memory +pids")
        os.makedirs(group, exist_ok=True)
        _put(os.path.join(group, "cgroup.subtree_control"), "+memory +pids")
    except OSError as e:
        problems.append(f"cgroup v2 at {base} is not usable: {e.strerror or e} (it must be writable and hold "
                        f"no process itself)")
        remove_dir(group, tries=1)
        return None
    return group


class Cgroups:
    """What `find()` settled on: `make(name)` builds one run's groups, `close()` removes the zygote's own."""

    def __init__(self, kind: str, where) -> None:
        self.kind, self.where = kind, where

    def make(self, name: str):
        return CgroupV1(self.where, name) if self.kind == "cgroup-v1" else CgroupV2(self.where, name)

    def close(self) -> None:
        for path in (self.where.values() if self.kind == "cgroup-v1" else [self.where]):
            try:
                os.rmdir(path)  # only succeeds when no other zygote still uses it
            except OSError:
                pass


def find(problems: list, zygote_pid: int) -> Cgroups | None:
    """The cgroups this process can use for its runs (v1 first, then a delegated v2), or None."""
    bases = _find_v1(problems)
    if bases is not None:
        return Cgroups("cgroup-v1", bases)
    group = _find_v2(problems, zygote_pid)
    return Cgroups("cgroup-v2", group) if group else None
