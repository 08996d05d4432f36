"""The zygote: a warm `python -I -S` that forks one isolated child per run.

Process tree (one zygote per sandbox slot; the client is a `sandboxes.Sandbox`):

    client --socket--> Z0 (pristine: never reads a request; root, or root of its own user namespace)
                         └─ Z1 (one run: reads the request, supervises, reports, exits)
                              └─ P  (pid 1 of a fresh pid namespace; becomes the candidate)

A host run (`_host.py`) is one Z1 and one P serving many programs: P forks a child per program.

Z0 finds the best isolation level the host gives (`_levels.py`) and builds the read-only
root once, then keeps one Z1 forked and waiting; Z1 takes the next
request, creates the run's control groups (where there are any), forks P into a new pid namespace, lets it go
once it is inside the cgroups, then streams its output (capped), relays calls in `serve`
mode, enforces wall and CPU time, kills the whole namespace at the end (every descendant
dies with its pid 1), checks the cgroups are empty, removes them and answers. Because Z1 is
forked fresh from a Z0 that never saw any run's data, no run can read another run's code,
input or output from memory. Expected outputs never reach this process tree at all.

Here: Z0 and Z1's loop. Z1's supervision of a run is `_supervise.py`, P's set-up `_child.py`.
Standard library only: this file runs as a script under the base interpreter.
"""
from __future__ import annotations

import json
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _isolate  # noqa: E402
import _levels  # noqa: E402
import _wire  # noqa: E402
from _host import HostRun  # noqa: E402
from _supervise import _Run, supervise  # noqa: E402  (and through it _child, _harness, _seccomp: all loaded here, once)

# Warm the modules candidate programs import most, once; every run gets them for free (copy-on-write).
for _m in ("json", "re", "math", "collections", "itertools", "functools", "heapq", "bisect", "string",
           "typing", "threading", "random", "fractions", "decimal", "dataclasses", "copy", "operator",
           "statistics", "unittest", "io", "time", "datetime", "enum", "traceback", "tempfile"):
    __import__(_m)

EOF_EXIT = 86  # Z1's exit status when the client closed the socket: Z0 stops too


def z1(sock: int, mode: dict, name: str) -> None:
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    _isolate.prctl(_isolate.PR_SET_PDEATHSIG, signal.SIGKILL)
    try:
        req = _wire.read_frame(sock)
        while req.get("op") != "run":  # a late "end"/"call" for the previous run, which had already ended
            req = _wire.read_frame(sock)
    except _wire.WireError:
        os._exit(EOF_EXIT)
    try:
        result = supervise(sock, req, mode, name, HostRun if req.get("mode") == "host" else _Run)
    except Exception as e:  # report the sandbox's own failure; the client turns it into ERROR
        result = {"op": "result", "error": f"sandbox failure: {type(e).__name__}: {e}"}
    if result is None:
        os._exit(EOF_EXIT)
    try:
        _wire.write_frame(sock, result)
    except OSError:
        os._exit(EOF_EXIT)
    os._exit(0)


def main() -> None:
    sock = int(sys.argv[1])
    packages = json.loads(sys.argv[2]) if len(sys.argv) > 2 else None  # {"site", "entries"}: packages.py
    report, cgroups = _levels.detect(sys.base_prefix, packages)
    _wire.write_frame(sock, {"op": "hello", "isolation": report, "pid": os.getpid()})
    mode = {"level": report["level"], "limits": report["limits"], "seccomp": report["seccomp"],
            "rootless": not report["root"], "cgroups": cgroups, "packages": report["packages_path"]}
    while True:
        pid = os.fork()
        name = f"{os.getpid()}-{pid}" if pid else f"{os.getppid()}-{os.getpid()}"
        if pid == 0:
            z1(sock, mode, name)
        status = os.waitpid(pid, 0)[1]
        if cgroups:
            cgroups.make(name).destroy()  # whatever became of Z1, its run's groups go
        if os.waitstatus_to_exitcode(status) == EOF_EXIT:
            break
    if cgroups:
        cgroups.close()


if __name__ == "__main__":
    main()
