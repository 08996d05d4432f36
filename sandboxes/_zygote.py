"""The zygote: a warm `python -I -S` that forks one isolated child per run.

Process tree (one zygote per sandbox slot; the client is a `sandboxes.Sandbox`):

    client --socket--> Z0 (root, pristine: never reads a request)
                         └─ Z1 (one run: reads the request, supervises, reports, exits)
                              └─ P  (pid 1 of a fresh pid namespace; becomes the candidate)

Z0 builds the read-only root once, then keeps one Z1 forked and waiting; Z1 takes the next
request, creates the run's control groups, forks P into a new pid namespace, lets it go
once it is inside the cgroups, then streams its output (capped), relays calls in `serve`
mode, enforces wall and CPU time, kills the whole namespace at the end (every descendant
dies with its pid 1), checks the cgroups are empty, removes them and answers. Because Z1 is
forked fresh from a Z0 that never saw any run's data, no run can read another run's code,
input or output from memory. Expected outputs never reach this process tree at all.

Standard library only: this file runs as a script under the base interpreter.
"""
from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _harness  # noqa: E402
import _isolate  # noqa: E402
from _cgroup import BASES, CONTROLLERS, Cgroup  # noqa: E402
import _wire  # noqa: E402

# Warm the modules candidate programs import most, once; every run gets them for free (copy-on-write).
for _m in ("json", "re", "math", "collections", "itertools", "functools", "heapq", "bisect", "string",
           "typing", "threading", "random", "fractions", "decimal", "dataclasses", "copy", "operator",
           "statistics", "unittest", "io", "time", "datetime", "enum", "traceback", "tempfile"):
    __import__(_m)

EOF_EXIT = 86  # Z1's exit status when the client closed the socket: Z0 stops too
ROOT = "/tmp/root"  # inside Z0's private mount namespace only
SANDBOX_PATH = ["/work"] + [p for p in sys.path if p.startswith(sys.base_prefix)]


def detect() -> dict:
    """What this machine allows, probed for real (a full isolated child is forked and checked)."""
    report = {"root": os.geteuid() == 0, "cgroup": {}, "namespaces": False, "problems": []}
    for c in CONTROLLERS:
        path = os.path.dirname(BASES[c])
        ok = os.path.isdir(path) and os.access(path, os.W_OK)
        report["cgroup"][c] = ok
        if not ok:
            report["problems"].append(f"cgroup v1 controller {c!r} not writable at {path}")
    if not report["root"]:
        report["problems"].append("not running as root: namespaces, cgroups and the uid drop need root")
    else:
        try:
            _isolate.unshare(_isolate.CLONE_NEWNS)
            _isolate.mount(None, "/", None, _isolate.MS_REC | _isolate.MS_PRIVATE)
            _isolate.mount("tmpfs", "/tmp", "tmpfs", _isolate.MS_NOSUID | _isolate.MS_NODEV, "size=8m")  # ours only
            _isolate.build_root(ROOT, sys.base_prefix)
            pid = os.fork()
            if pid == 0:
                try:
                    _isolate.unshare(_isolate.CLONE_NEWPID)
                    if os.fork() == 0:
                        _isolate.enter_run(ROOT, 1)
                        _isolate.become_nobody()
                        os._exit(0 if os.getuid() == _isolate.NOBODY and not os.path.exists("/.old/etc") else 2)
                    os._exit(os.wait()[1] >> 8)
                except OSError:
                    os._exit(3)
            status = os.waitpid(pid, 0)[1]
            report["namespaces"] = status == 0
            if status:
                report["problems"].append(f"isolated probe child failed (status {status})")
        except OSError as e:
            report["problems"].append(f"namespaces unavailable: {e}")
    report["level"] = "full" if report["namespaces"] and all(report["cgroup"].values()) else "none"
    return report


def _limit_from(exit_status: dict, stats: dict, stderr: str, killed: str | None) -> str | None:
    if killed:
        return killed
    failed = exit_status["exit_code"] != 0
    if stats.get("oom_kills"):
        return "memory"
    if failed and "MemoryError" in stderr[-4000:]:
        return "memory"
    if failed and stats.get("process_limit_hits"):
        return "processes"
    if failed and ("[Errno 27]" in stderr[-4000:] or exit_status["signal"] == signal.SIGXFSZ):
        return "file_size"
    if failed and "[Errno 28]" in stderr[-4000:]:
        return "disk"
    return None


def child(req: dict, fds: dict, level: str) -> None:
    """P: isolate, set limits, drop privileges, wire up fds, then run the program. Never returns."""
    lim = req["limits"]
    try:
        os.close(fds["go_w"])
        if os.read(fds["go_r"], 1) != b"g":
            os._exit(1)
        if level == "full":
            _isolate.enter_run(ROOT, lim["disk_mb"])
        else:
            os.setsid()
            os.chdir(req["scratch"])
        stdin = os.memfd_create("stdin")
        os.write(stdin, req.get("stdin", "").encode())
        os.lseek(stdin, 0, os.SEEK_SET)
        import resource as r
        mb = 1 << 20
        r.setrlimit(r.RLIMIT_CPU, (max(1, int(lim["cpu_s"] + 0.999)), int(lim["cpu_s"]) + 2))
        r.setrlimit(r.RLIMIT_FSIZE, (lim["file_size_mb"] * mb,) * 2)
        r.setrlimit(r.RLIMIT_CORE, (0, 0))
        r.setrlimit(r.RLIMIT_NOFILE, (lim["open_files"],) * 2)
        r.setrlimit(r.RLIMIT_AS, ((2 * lim["memory_mb"] + 512) * mb,) * 2)
        if level != "full":
            r.setrlimit(r.RLIMIT_NPROC, (lim["processes"],) * 2)
        if level == "full":
            _isolate.become_nobody()
            os.setsid()
        elif os.geteuid() == 0:  # weak isolation still never runs the program as root
            os.setgroups([])
            os.setresgid(_isolate.NOBODY, _isolate.NOBODY, _isolate.NOBODY)
            os.setresuid(_isolate.NOBODY, _isolate.NOBODY, _isolate.NOBODY)
        _isolate.prctl(_isolate.PR_SET_PDEATHSIG, signal.SIGKILL)
        wanted = {0: stdin, 1: fds["out_w"], 2: fds["err_w"]}
        if req["mode"] == "serve":
            wanted.update({3: fds["req_r"], 4: fds["resp_w"]})
        high = {k: fcntl.fcntl(v, fcntl.F_DUPFD, 100) for k, v in wanted.items()}  # clear of 0..4
        ready = fcntl.fcntl(fds["ready_w"], fcntl.F_DUPFD, 100)
        for k, v in high.items():
            os.dup2(v, k)
        os.closerange(len(wanted), ready)
        os.closerange(ready + 1, 1 << 16)
        os.environ.clear()
        os.environ.update({"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/work", "TMPDIR": "/tmp",
                           "LANG": "C.UTF-8", "PYTHONIOENCODING": "utf-8"})
        sys.argv[:] = ["solution.py"]
        sys.path[:] = SANDBOX_PATH
        import random
        random.seed()
        with open("solution.py", "w") as f:
            f.write(req["code"])
        os.write(ready, b"r")
        os.close(ready)
    except Exception as e:  # a failed set-up is the sandbox's fault: say so on the ready pipe, never run code
        try:
            os.write(fds["ready_w"], f"setup failed: {type(e).__name__}: {e}".encode()[:4000])
        finally:
            os._exit(1)
    if req["mode"] == "serve":
        os._exit(_harness.serve(req["code"], 3, 4))
    os._exit(_harness.run_main(req["code"]))


class _Stream:
    """A capped reader of one pipe from the run."""

    def __init__(self, fd: int, cap: int) -> None:
        self.fd, self.cap, self.buf, self.total, self.open = fd, cap, bytearray(), 0, True

    def pump(self) -> bool:
        """Read what is there; False at EOF."""
        try:
            data = os.read(self.fd, 1 << 16)
        except BlockingIOError:
            return True
        if not data:
            self.open = False
            return False
        self.total += len(data)
        room = self.cap - len(self.buf)
        if room > 0:
            self.buf += data[:room]
        return True

    @property
    def over(self) -> bool:
        return self.total > self.cap

    def text(self) -> str:
        return self.buf.decode("utf-8", "replace")


def supervise(sock: int, req: dict, level: str, name: str) -> dict:
    """Z1: run one request in a fresh isolated child and report what happened."""
    lim = req["limits"]
    cg = Cgroup(name) if level == "full" else None
    if cg:
        cg.create(lim["memory_mb"] << 20, lim["processes"])
    else:
        import tempfile
        req["scratch"] = tempfile.mkdtemp(prefix="rrl-sandbox-")
        if os.geteuid() == 0:
            os.chown(req["scratch"], _isolate.NOBODY, _isolate.NOBODY)  # the program runs as nobody
    fds = {}
    for a, b in (("go_r", "go_w"), ("ready_r", "ready_w"), ("out_r", "out_w"), ("err_r", "err_w"),
                 ("req_r", "req_w"), ("resp_r", "resp_w")):
        fds[a], fds[b] = os.pipe()
    if level == "full":
        _isolate.unshare(_isolate.CLONE_NEWPID)
    pid = os.fork()
    if pid == 0:
        child(req, fds, level)
    for k in ("go_r", "ready_w", "out_w", "err_w", "req_r", "resp_w"):
        os.close(fds[k])
    if cg:
        cg.add(pid)
    t0 = time.monotonic()
    os.write(fds["go_w"], b"g")
    os.close(fds["go_w"])
    deadline = t0 + lim["wall_s"]
    serve = req["mode"] == "serve"
    out, err = _Stream(fds["out_r"], lim["output_bytes"]), _Stream(fds["err_r"], lim["output_bytes"])
    resp = _Stream(fds["resp_r"], _wire.MAX_FRAME)
    ready = _Stream(fds["ready_r"], 4096)
    for fd in (fds["out_r"], fds["err_r"], fds["resp_r"], fds["ready_r"], fds["req_w"]):
        os.set_blocking(fd, False)
    if not serve:
        os.close(fds["req_w"])
    pending, req_w = bytearray(), fds["req_w"] if serve else None
    pidfd = os.pidfd_open(pid)
    killed, client_gone, exited, closing, next_cpu_check, replies = None, False, False, False, t0 + 0.05, 0
    while not exited:
        now = time.monotonic()
        if now >= deadline:
            killed = "wall"
            break
        if cg and now >= next_cpu_check:
            next_cpu_check = now + 0.05
            if cg.cpu_s() > lim["cpu_s"]:
                killed = "cpu"
                break
        rlist = [s.fd for s in (out, err, resp, ready) if s.open] + [pidfd, sock]  # sock: calls, or EOF
        wlist = [req_w] if req_w is not None and pending else []
        r, w, _ = select.select(rlist, wlist, [], max(0.0, min(deadline, next_cpu_check) - now))
        for s in (out, err, resp, ready):
            if s.fd in r:
                s.pump()
        if out.over or err.over:
            killed = "output"
            break
        while len(resp.buf) >= 4:  # forward each complete reply frame to the client
            n = int.from_bytes(resp.buf[:4], "big")
            if n > lim["output_bytes"]:
                killed = "output"
                break
            if len(resp.buf) < 4 + n:
                break
            frame, resp.buf[:] = bytes(resp.buf[4:4 + n]), resp.buf[4 + n:]
            replies += 1
            try:  # re-encoded, never spliced: the run's bytes cannot forge a frame of ours
                data = json.loads(frame.decode())
            except ValueError:
                data = None
            _wire.write_frame(sock, {"op": "reply", "data": data})
        if killed:
            break
        if sock in r:
            try:
                msg = _wire.read_frame(sock)
            except _wire.WireError:
                client_gone, killed = True, "client"
                break
            if not serve:
                killed = "client"  # nothing is expected from the client during a plain run
                break
            if msg.get("op") == "call" and req_w is not None and not closing:
                pending += _wire.encode(msg["call"])
            elif msg.get("op") == "end":
                closing = True
            else:
                killed = "client"
                break
        if req_w is not None and pending and req_w in w:
            try:
                del pending[:os.write(req_w, pending)]
            except (BlockingIOError, BrokenPipeError):
                pass
        if req_w is not None and closing and not pending:
            os.close(req_w)  # the server sees EOF and exits
            req_w = None
        if pidfd in r:
            exited = True
    wall = time.monotonic() - t0
    try:
        os.kill(pid, signal.SIGKILL)  # pid 1 of the namespace: the kernel kills every process in it
    except ProcessLookupError:
        pass
    _, status, rusage = os.wait4(pid, 0)
    if level != "full":
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for s in (out, err, resp, ready):  # every writer is gone now: drain to EOF
        while s.open and s.pump():
            pass
    os.close(pidfd)
    if req_w is not None:
        os.close(req_w)
    for s in (out, err, resp, ready):
        os.close(s.fd)
    stats = cg.stats() if cg else {"cpu_s": rusage.ru_utime + rusage.ru_stime,
                                   "peak_memory_bytes": rusage.ru_maxrss * 1024, "oom_kills": 0, "process_limit_hits": 0}
    left = cg.destroy() if cg else 0
    if not cg:
        import shutil
        shutil.rmtree(req["scratch"], ignore_errors=True)
    exit_status = {"exit_code": os.waitstatus_to_exitcode(status), "signal": None}
    if exit_status["exit_code"] < 0:
        exit_status = {"exit_code": None, "signal": -exit_status["exit_code"]}
    if killed is None and exit_status["signal"] == signal.SIGXCPU:
        killed = "cpu"
    stderr = err.text()
    result = {"op": "result", **exit_status, "stdout": out.text(), "stderr": stderr,
              "stdout_truncated": out.over, "stderr_truncated": err.over, "wall_s": wall,
              "cpu_s": stats["cpu_s"], "peak_memory_bytes": stats["peak_memory_bytes"],
              "oom_kills": stats["oom_kills"], "leftover_processes": left, "replies": replies,
              "limit": _limit_from(exit_status, stats, stderr, None if killed == "client" else killed),
              "isolation": level, "error": None}
    if bytes(ready.buf) != b"r":
        result["error"] = ready.text() or (f"sandbox child died before the program started "
                                           f"(exit {exit_status['exit_code']}, signal {exit_status['signal']}, "
                                           f"stopped by {killed or 'nothing'})")
    return None if client_gone else result


def z1(sock: int, level: str, name: str) -> None:
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    _isolate.prctl(_isolate.PR_SET_PDEATHSIG, signal.SIGKILL)
    try:
        req = _wire.read_frame(sock)
        while req.get("op") != "run":  # a late "end"/"call" for the previous run, which had already ended
            req = _wire.read_frame(sock)
    except _wire.WireError:
        os._exit(EOF_EXIT)
    try:
        result = supervise(sock, req, level, name)
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
    report = detect()
    _wire.write_frame(sock, {"op": "hello", "isolation": report, "pid": os.getpid()})
    level = report["level"]
    while True:
        pid = os.fork()
        name = f"{os.getpid()}-{pid}" if pid else f"{os.getppid()}-{os.getpid()}"
        if pid == 0:
            z1(sock, level, name)
        status = os.waitpid(pid, 0)[1]
        if level == "full":
            Cgroup(name).destroy()  # whatever became of Z1, its run's groups go
        if os.waitstatus_to_exitcode(status) == EOF_EXIT:
            break
    if level == "full":
        for base in BASES.values():
            try:
                os.rmdir(base)  # only succeeds when no other zygote still uses it
            except OSError:
                pass


if __name__ == "__main__":
    main()
