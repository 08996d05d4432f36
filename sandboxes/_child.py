"""P, the run's own process: isolate, set limits, drop privileges, wire up descriptors, run the program.

Forked by the supervisor (`_supervise.py`) into a fresh pid namespace; it waits for the "go" byte
(sent once it sits in the run's control groups), enters the run's namespaces and root for the
zygote's level (`_levels.py`), sets the rlimits, becomes uid 65534, keeps only fds 0-2 (and 3-4
for calls and cases, or 3 for a host run's control socket), scrubs the environment, installs the
seccomp filter last and hands over to `_harness`. A set-up failure is reported on the ready pipe, never run past.
Standard library only; loaded by the zygote.
"""
from __future__ import annotations

import fcntl
import os
import resource as r
import signal
import sys

import _harness
import _isolate
import _levels
import _seccomp

SANDBOX_PATH = ["/work"] + [p for p in sys.path if p.startswith(sys.base_prefix)]
# a BLAS or OpenMP runtime otherwise starts a thread per core, each counted against the run's process limit
SINGLE_THREADED = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _set_rlimits(lim: dict, mode: dict) -> None:
    """Per-process limits; without cgroups they are the only memory and process bounds there are."""
    mb = 1 << 20
    cpu = max(1, int(lim["cpu_s"] + 0.999))
    r.setrlimit(r.RLIMIT_CPU, (cpu, cpu + 1))
    r.setrlimit(r.RLIMIT_FSIZE, (lim["file_size_mb"] * mb,) * 2)
    r.setrlimit(r.RLIMIT_CORE, (0, 0))
    r.setrlimit(r.RLIMIT_NOFILE, (lim["open_files"],) * 2)
    r.setrlimit(r.RLIMIT_AS, ((2 * lim["memory_mb"] + 512) * mb,) * 2)
    if mode["cgroups"] is None:
        r.setrlimit(r.RLIMIT_DATA, (lim["memory_mb"] * mb,) * 2)


def _drop_privileges(lim: dict, mode: dict) -> None:
    if mode["level"] != "none":
        _isolate.become_nobody(rootless=mode["rootless"])
        os.setsid()
    elif os.geteuid() == 0:  # weak isolation still never runs the program as root
        os.setgroups([])
        os.setresgid(_isolate.NOBODY, _isolate.NOBODY, _isolate.NOBODY)
        os.setresuid(_isolate.NOBODY, _isolate.NOBODY, _isolate.NOBODY)
    if mode["cgroups"] is None:  # set after the uid change: the kernel then counts this run's processes only
        r.setrlimit(r.RLIMIT_NPROC, (lim["processes"],) * 2)


def child(req: dict, fds: dict, mode: dict) -> None:
    """P: isolate, set limits, drop privileges, wire up fds, then run the program. Never returns."""
    lim = req["limits"]
    try:
        os.close(fds["go_w"])
        if os.read(fds["go_r"], 1) != b"g":
            os._exit(1)
        if mode["level"] != "none":
            _isolate.enter_run(_levels.ROOT, lim["disk_mb"], owner=0 if mode["rootless"] else _isolate.NOBODY)
        else:
            os.setsid()
            os.chdir(req["scratch"])
        stdin = os.memfd_create("stdin")
        os.write(stdin, req.get("stdin", "").encode())
        os.lseek(stdin, 0, os.SEEK_SET)
        _set_rlimits(lim, mode)
        _drop_privileges(lim, mode)
        _isolate.prctl(_isolate.PR_SET_PDEATHSIG, signal.SIGKILL)
        wanted = {0: stdin, 1: fds["out_w"], 2: fds["err_w"]}
        if req["mode"] in ("serve", "cases"):
            wanted.update({3: fds["req_r"], 4: fds["resp_w"]})
        elif req["mode"] == "host":
            wanted[3] = fds["ctl_p"]
        high = {k: fcntl.fcntl(v, fcntl.F_DUPFD, 100) for k, v in wanted.items()}  # clear of 0..4
        ready = fcntl.fcntl(fds["ready_w"], fcntl.F_DUPFD, 100)
        for k, v in high.items():
            os.dup2(v, k)
        os.closerange(len(wanted), ready)
        os.closerange(ready + 1, 1 << 16)
        os.environ.clear()
        os.environ.update({"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/work", "TMPDIR": "/tmp",
                           "LANG": "C.UTF-8", "PYTHONIOENCODING": "utf-8", **SINGLE_THREADED})
        sys.argv[:] = ["solution.py"]
        sys.path[:] = SANDBOX_PATH + ([mode["packages"]] if mode.get("packages") else [])
        import random
        random.seed()
        with open("solution.py", "w") as f:
            f.write(req["code"])
        if mode["seccomp"]:
            _seccomp.install()  # last: nothing of ours runs a denied call after this
        os.write(ready, b"r")
        os.close(ready)
    except Exception as e:  # a failed set-up is the sandbox's fault: say so on the ready pipe, never run code
        try:
            os.write(fds["ready_w"], f"setup failed: {type(e).__name__}: {e}".encode()[:4000])
        finally:
            os._exit(1)
    status = 1  # what is left if a program's own BaseException subclass escapes the harness
    try:
        if req["mode"] == "serve":
            status = _harness.serve(req["code"], 3, 4)
        elif req["mode"] == "cases":
            status = _harness.cases(req["code"], 3, 4)
        elif req["mode"] == "host":
            status = _harness.host(3)
        else:
            status = _harness.run_main(req["code"])
    finally:  # never back into the supervisor's code, whatever unwinds: report it as CPython would, and exit
        escaped = sys.exc_info()[1]
        if escaped is not None:
            _harness.report_uncaught(escaped)
        _harness.flush_std()
        os._exit(status)
