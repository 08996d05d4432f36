"""The sandbox's typed seams: `Limits` in, `RunResult` out, and its two errors.

Standard library only. `Limits.of(x)` accepts a `Limits`, a plain mapping with the same
field names (what `verifiers.verify("code", ..., limits={...})` passes), or None for the
defaults; an unknown key or a bad value raises `ValueError` naming the field and value.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any, Mapping

LIMIT_NAMES = ("wall", "cpu", "memory", "output", "processes", "file_size", "disk")


class SandboxError(RuntimeError):
    """The sandbox itself failed (could not start, set up, or report). Never the program's fault."""


class IsolationError(SandboxError):
    """The machine cannot give full isolation and weaker isolation was not explicitly allowed."""


@dataclass(frozen=True)
class Limits:
    """Per-run limits. Memory and process count bind the whole run (every process it starts)."""

    wall_s: float = 10.0       # wall-clock seconds; the whole run is killed at the deadline
    cpu_s: float = 10.0        # CPU seconds summed over every thread and process of the run
    memory_mb: int = 512       # resident memory (+ swap, + tmpfs files) of the whole run, MiB
    output_bytes: int = 16 << 20  # stdout and stderr each; more is a limit hit (the run is killed)
    file_size_mb: int = 16     # largest single file the program may write, MiB
    disk_mb: int = 64          # each of /work, /tmp, /dev/shm (private tmpfs), MiB
    processes: int = 64        # processes and threads alive at once in the whole run
    open_files: int = 256      # open file descriptors per process

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if f.type == "float" or f.name.endswith("_s"):
                ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 0 < v <= 3600
                need = "seconds in (0, 3600]"
            else:
                ok = isinstance(v, int) and not isinstance(v, bool) and v >= 1
                need = "a positive integer"
            if not ok:
                raise ValueError(f"Limits.{f.name} must be {need}, got {v!r}")
        if self.open_files < 16:
            raise ValueError(f"Limits.open_files must be >= 16 (the interpreter needs a few), got {self.open_files!r}")
        if self.memory_mb < 32:
            raise ValueError(f"Limits.memory_mb must be >= 32 (the interpreter needs it), got {self.memory_mb!r}")

    @classmethod
    def of(cls, value: "Limits | Mapping[str, Any] | None") -> "Limits":
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if not isinstance(value, Mapping):
            raise ValueError(f"limits must be a sandboxes.Limits or a mapping, got {type(value).__name__}")
        known = {f.name for f in fields(cls)}
        for key in value:
            if key not in known:
                raise ValueError(f"limits: unknown key {key!r}; valid: {sorted(known)}")
        return cls(**dict(value))

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class RunResult:
    """What one sandboxed run did.

    limit: which limit ended or broke the run (one of LIMIT_NAMES), or None.
    leftover_processes: processes still in the run's cgroups when it ended (all were then
        killed and the groups removed; the number is reported as proof, and is 0 normally).
        Without cgroups it is 0 by construction: the run's pid 1 is reaped only once the kernel
        has killed every process of its pid namespace.
    isolation: the level the run had ("full", "rootless", "none"); limits_by: what bound its
        memory and processes ("cgroup-v1", "cgroup-v2", or per-process "rlimits"); seccomp:
        whether the syscall filter was on.
    """

    exit_code: int | None
    signal: int | None
    stdout: str
    stderr: str
    wall_s: float
    cpu_s: float
    peak_memory_bytes: int
    limit: str | None = None
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    leftover_processes: int = 0
    isolation: str = "full"
    limits_by: str = "cgroup-v1"
    seccomp: bool = False

    @property
    def ok(self) -> bool:
        """Exited with status 0 and hit no limit (necessary for a pass, never sufficient)."""
        return self.exit_code == 0 and self.limit is None

    def describe(self) -> str:
        if self.limit:
            return f"{self.limit} limit exceeded"
        if self.signal is not None:
            return f"killed by signal {self.signal}"
        return f"exit status {self.exit_code}"
