"""reasoning-rl sandboxes: run untrusted programs (model-written Python) against tests, contained.

Part of the `reasoning-rl` distribution (not the unrelated `sandboxes` package on PyPI).
Standard library only.

Threat model. The program is hostile and knows how this sandbox works. It must not:
  * escape or harm the host: it runs as uid 65534 inside fresh user, pid, mount, net, ipc,
    uts and cgroup namespaces, with no capabilities (bounding set empty, no_new_privs), a
    read-only root holding only /usr, the interpreter and a minimal /etc (no shadow, no
    home, not the project), private size-capped tmpfs /work (its cwd), /tmp and /dev/shm,
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
    input, with fresh namespaces and tmpfs.

Not covered: kernel vulnerabilities (no seccomp filter is installed, so the unprivileged
syscall surface is reachable); side channels (timing, CPU caches); the hash seed, which
every run shares with the zygote (so `hash(str)` and set order repeat across runs: the
runs are reproducible, not secret). Isolation needs root with cgroup v1 memory/pids/cpuacct
controllers (what our machines give); elsewhere the probe reports level "none" and the
sandbox refuses to run unless weak isolation is explicitly allowed.
"""
from .client import CallResult, RunEnded, Sandbox, Session, base_python
from .limits import LIMIT_NAMES, IsolationError, Limits, RunResult, SandboxError
from .plain import PlainDataError
from .pool import SandboxPool

__all__ = ["Sandbox", "Session", "SandboxPool", "CallResult", "Limits", "RunResult", "RunEnded", "SandboxError",
           "IsolationError", "PlainDataError", "LIMIT_NAMES", "base_python"]
