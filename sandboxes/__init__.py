"""reasoning-rl sandboxes: run untrusted programs (model-written Python) against tests, contained.

Part of the `reasoning-rl` distribution (not the unrelated `sandboxes` package on PyPI).
Standard library only.

Threat model. The program is hostile and knows how this sandbox works. It must not:
  * escape or harm the host: it runs as uid 65534 inside fresh user, pid, mount, net, ipc,
    uts and cgroup namespaces, with no capabilities (bounding set empty, no_new_privs), a
    read-only root holding only /usr, the interpreter, a minimal /etc (no shadow, no
    home, not the project) and the third-party packages the caller declared (/pkgs,
    `packages.py`), private size-capped tmpfs /work (its cwd), /tmp and /dev/shm,
    no network interface but a down loopback, a new session, no inherited descriptors and
    a scrubbed environment;
  * exhaust the host: memory (+swap, +tmpfs) and process count of the whole run are bound
    by cgroups; CPU by cgroup accounting (all threads and processes) and RLIMIT_CPU; file
    size, core dumps and open files by rlimits; stdout/stderr are read as streams and
    capped; the wall clock kills the whole run;
  * survive its run: the run is pid 1 of its namespace, so killing it kills every
    descendant (double-forked and setsid daemons included); the cgroups are then checked
    empty and removed, and the count found is reported (`RunResult.leftover_processes`);
  * fake a pass: no verdict is computed here. `Session.call` returns fresh plain data
    (`plain.py`) for a checker outside to compare; expected outputs never enter the sandbox's
    process tree, files, argv or environment (see `verifiers/code.py`);
  * read another run's data: each run is forked from a zygote that never saw any run's
    input, with fresh namespaces and tmpfs. In a host run (`Sandbox.serve(..., hosted=True)`,
    `_host.py`) the programs share one run's namespaces, but each is a fresh process forked
    from a pid 1 that never reads any program's data, and everything a program left
    (processes, files, System V IPC objects) is gone before the next one loads.

Levels (`_levels.py`, docs/sandbox.md): the above is level "full" (root, cgroups v1 or a
delegated v2 subtree). Level "rootless" (no root, or no writable cgroup, or a container's root
without CAP_SYS_ADMIN) builds the same namespaces inside a user namespace of its own and bounds
memory, CPU and processes per process with rlimits (the process count per run); what that does
not bound in total is written down in the report. A seccomp deny list (`_seccomp.py`) is added
at both where the host allows it. Level "none" (no namespaces) is refused unless weak isolation
is explicitly allowed.

Not covered: kernel vulnerabilities in the syscalls the filter allows; side channels (timing,
CPU caches); the hash seed, which every run shares with the zygote (so `hash(str)` and set
order repeat across runs: the runs are reproducible, not secret).
"""
from .client import CallResult, RunEnded, Sandbox, Session, base_python, probe
from .limits import LIMIT_NAMES, IsolationError, Limits, RunResult, SandboxError
from .plain import PlainDataError
from .packages import Packages
from .pool import SandboxPool

__all__ = ["Sandbox", "Session", "SandboxPool", "CallResult", "Limits", "RunResult", "RunEnded", "SandboxError",
           "IsolationError", "PlainDataError", "LIMIT_NAMES", "base_python", "probe", "Packages"]
