"""The zygote: a warm `python -I -S` that forks one isolated child per run.

Process tree (one zygote per sandbox slot; the client is a `sandboxes.Sandbox`):

    client --socket--> Z0 (pristine: never reads a request; root, or root of its own user namespace)
                         └─ Z1 (one run: reads the request, supervises, reports, exits)
                              └─ P  (pid 1 of a fresh pid namespace; becomes the candidate)

Z0 finds the best isolation level the host gives (`_levels.py`) and builds the read-only
root once, then keeps one Z1 forked and waiting; Z1 takes the next
request, creates the run's control groups (where there are any), forks P into a new pid namespace, lets it go
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
import resource as r  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402

import _harness  # noqa: E402
import _isolate  # noqa: E402
import _levels  # noqa: E402
import _seccomp  # noqa: E402
import _wire  # noqa: E402

# Warm the modules candidate programs import most, once; every run gets them for free (copy-on-write).
for _m in ("json", "re", "math", "collections", "itertools", "functools", "heapq", "bisect", "string",
           "typing", "threading", "random", "fractions", "decimal", "dataclasses", "copy", "operator",
           "statistics", "unittest", "io", "time", "datetime", "enum", "traceback", "tempfile"):
    __import__(_m)

CLK_TCK = os.sysconf("SC_CLK_TCK")
EOF_EXIT = 86  # Z1's exit status when the client closed the socket: Z0 stops too
SANDBOX_PATH = ["/work"] + [p for p in sys.path if p.startswith(sys.base_prefix)]


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
        if mode["seccomp"]:
            _seccomp.install()  # last: nothing of ours runs a denied call after this
        os.write(ready, b"r")
        os.close(ready)
    except Exception as e:  # a failed set-up is the sandbox's fault: say so on the ready pipe, never run code
        try:
            os.write(fds["ready_w"], f"setup failed: {type(e).__name__}: {e}".encode()[:4000])
        finally:
            os._exit(1)
    if req["mode"] == "serve":
        os._exit(_harness.serve(req["code"], 3, 4))
    if req["mode"] == "cases":
        os._exit(_harness.cases(req["code"], 3, 4))
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

    def drain(self) -> None:
        """Read everything already in the pipe (its writers may still hold it open)."""
        while self.open:
            before = self.total
            self.pump()
            if self.total == before:
                return

    def reset(self) -> None:
        self.buf, self.total = bytearray(), 0


class _Run:
    """Z1's view of one run: the child, its pipes, its control groups (if any) and what it did."""

    PIPES = (("go_r", "go_w"), ("ready_r", "ready_w"), ("out_r", "out_w"), ("err_r", "err_w"),
             ("req_r", "req_w"), ("resp_r", "resp_w"))

    def __init__(self, req: dict, mode: dict, name: str) -> None:
        self.req, self.mode, self.lim = req, mode, req["limits"]
        self.cg = mode["cgroups"].make(name) if mode["cgroups"] else None
        if self.cg:
            self.cg.create(self.lim["memory_mb"] << 20, self.lim["processes"])
        if mode["level"] == "none":
            req["scratch"] = tempfile.mkdtemp(prefix="rrl-sandbox-")
            if os.geteuid() == 0:
                os.chown(req["scratch"], _isolate.NOBODY, _isolate.NOBODY)  # the program runs as nobody
        self.fds = {}
        for a, b in self.PIPES:
            self.fds[a], self.fds[b] = os.pipe()
        if mode["level"] != "none":
            _isolate.unshare(_isolate.CLONE_NEWPID)
        self.pid = os.fork()
        if self.pid == 0:
            child(req, self.fds, mode)
        for k in ("go_r", "ready_w", "out_w", "err_w", "req_r", "resp_w"):
            os.close(self.fds[k])
        if self.cg:
            self.cg.add(self.pid)
        self.out, self.err = _Stream(self.fds["out_r"], self.lim["output_bytes"]), _Stream(self.fds["err_r"],
                                                                                          self.lim["output_bytes"])
        self.resp, self.ready = _Stream(self.fds["resp_r"], _wire.MAX_FRAME), _Stream(self.fds["ready_r"], 4096)
        self.streams = (self.out, self.err, self.resp, self.ready)
        for fd in (self.fds["out_r"], self.fds["err_r"], self.fds["resp_r"], self.fds["ready_r"], self.fds["req_w"]):
            os.set_blocking(fd, False)
        self.serve = req["mode"] in ("serve", "cases")  # both talk to the program over fds 3 and 4
        self.cases = req.get("stdins") if req["mode"] == "cases" else None
        self.case_results: list = []
        self.req_w = self.fds["req_w"] if self.serve else None
        if not self.serve:
            os.close(self.fds["req_w"])
        self.pending, self.closing, self.replies, self.killed, self.client_gone = bytearray(), False, 0, None, False

    def cpu_s(self) -> float:
        """CPU seconds so far: the whole run's with cgroups; else the run's pid 1 (its children are held by
        their own RLIMIT_CPU: pid 1 of a namespace ignores SIGXCPU, so its own time is watched here)."""
        if self.cg:
            return self.cg.cpu_s()
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime

    def go(self) -> None:
        self.t0 = time.monotonic()
        os.write(self.fds["go_w"], b"g")
        os.close(self.fds["go_w"])
        if self.cases is not None:
            self._start_case(0)

    # -- cases mode: one session, one fresh child per stdio case, limits and results per case -----------
    def _start_case(self, i: int) -> None:
        self.case_i, self.case_t0, self.case_cpu0, self.case_open = i, time.monotonic(), self.cpu_s(), True
        self.case_stats0 = self.cg.stats() if self.cg else None
        if self.cg:
            self.cg.reset_peak()
        self.pending += _wire.encode({"i": i, "stdin": self.cases[i]})

    def _case_result(self, exit_status: dict, stats: dict, killed: str | None, left: int) -> dict:
        stderr = self.err.text()
        return {**exit_status, "stdout": self.out.text(), "stderr": stderr, "stdout_truncated": self.out.over,
                "stderr_truncated": self.err.over, "wall_s": time.monotonic() - self.case_t0,
                "cpu_s": stats["cpu_s"], "peak_memory_bytes": stats["peak_memory_bytes"], "leftover_processes": left,
                "limit": _limit_from(exit_status, stats, stderr, killed), "isolation": self.mode["level"],
                "limits_by": self.mode["limits"], "seccomp": self.mode["seccomp"]}

    def _case_stats(self, data: dict | None) -> dict:
        if not self.cg:
            return {"cpu_s": (data or {}).get("cpu_s", 0.0), "peak_memory_bytes": (data or {}).get("maxrss", 0),
                    "oom_kills": 0, "process_limit_hits": 0}
        now, base = self.cg.stats(), self.case_stats0
        return {"cpu_s": now["cpu_s"] - base["cpu_s"], "peak_memory_bytes": now["peak_memory_bytes"],
                "oom_kills": now["oom_kills"] - base["oom_kills"],
                "process_limit_hits": now["process_limit_hits"] - base["process_limit_hits"]}

    def _case_done(self, data) -> None:
        if not isinstance(data, dict) or data.get("i") != self.case_i or not isinstance(data.get("status"), int):
            self.killed = "protocol"  # the session's pid 1 is ours; a frame that is not its answer ends the run
            return
        self.case_open = False
        self.out.drain()
        self.err.drain()
        code = os.waitstatus_to_exitcode(data["status"])
        exit_status = {"exit_code": code, "signal": None} if code >= 0 else {"exit_code": None, "signal": -code}
        stats = self._case_stats(data)
        killed = None
        if exit_status["signal"] == signal.SIGXCPU or (exit_status["signal"] == signal.SIGKILL and not self.cg
                                                       and stats["cpu_s"] >= self.lim["cpu_s"]) \
                or stats["cpu_s"] > self.lim["cpu_s"]:
            killed = "cpu"
        # what the case left behind was killed by the session's pid 1, as a run's end kills it: not a leftover
        self.case_results.append(self._case_result(exit_status, stats, killed, 0))
        self.out.reset()
        self.err.reset()
        if killed is None and self.case_results[-1]["limit"] in ("wall", "cpu"):
            killed = self.case_results[-1]["limit"]
        if killed is None and self.case_i + 1 < len(self.cases):  # after a time limit the rest is not run
            self._start_case(self.case_i + 1)
        else:
            self.closing = True

    def forward_replies(self, sock: int) -> None:
        """Forward each complete reply frame to the client, re-encoded (never spliced: no forged frames);
        in cases mode the frames are the session's own case reports, kept here."""
        buf = self.resp.buf
        while len(buf) >= 4:
            n = int.from_bytes(buf[:4], "big")
            if n > self.lim["output_bytes"]:
                self.killed = "output"
                return
            if len(buf) < 4 + n:
                return
            frame, buf[:] = bytes(buf[4:4 + n]), buf[4 + n:]
            self.replies += 1
            try:
                data = json.loads(frame.decode())
            except ValueError:
                data = None
            if self.cases is not None:
                self._case_done(data)
                if self.killed:
                    return
                continue
            _wire.write_frame(sock, {"op": "reply", "data": data})

    def from_client(self, sock: int) -> None:
        try:
            msg = _wire.read_frame(sock)
        except _wire.WireError:
            self.client_gone, self.killed = True, "client"
            return
        if not self.serve or self.cases is not None:
            self.killed = "client"  # nothing is expected from the client during a plain run or a cases session
        elif msg.get("op") == "call" and self.req_w is not None and not self.closing:
            self.pending += _wire.encode(msg["call"])
        elif msg.get("op") == "end":
            self.closing = True
        else:
            self.killed = "client"

    def feed(self, writable: list) -> None:
        if self.req_w is not None and self.pending and self.req_w in writable:
            try:
                del self.pending[:os.write(self.req_w, self.pending)]
            except (BlockingIOError, BrokenPipeError):
                pass
        if self.req_w is not None and self.closing and not self.pending:
            os.close(self.req_w)  # the server sees EOF and exits
            self.req_w = None

    def watch(self, sock: int) -> None:
        """Stream output, relay calls, enforce the wall clock (and CPU with cgroups) until the run ends."""
        deadline, next_cpu_check = self.t0 + self.lim["wall_s"], self.t0 + 0.05
        pidfd = os.pidfd_open(self.pid)
        try:
            while True:
                now = time.monotonic()
                if self.cases is not None and not self.closing:  # each case has its own clock and CPU budget
                    deadline = self.case_t0 + self.lim["wall_s"]
                if now >= deadline:
                    self.killed = "wall"
                    return
                if now >= next_cpu_check:
                    next_cpu_check = now + 0.05
                    spent = self.cpu_s() - (self.case_cpu0 if self.cases is not None else 0.0)
                    if spent > self.lim["cpu_s"]:
                        self.killed = "cpu"
                        return
                rlist = [st.fd for st in self.streams if st.open] + [pidfd, sock]  # sock: calls, or EOF
                wlist = [self.req_w] if self.req_w is not None and self.pending else []
                wait = max(0.0, min(deadline, next_cpu_check) - now)
                rd, wr, _ = select.select(rlist, wlist, [], wait)
                for st in self.streams:
                    if st.fd in rd:
                        st.pump()
                if self.out.over or self.err.over:
                    self.killed = "output"
                    return
                self.forward_replies(sock)
                if self.killed:
                    return
                if sock in rd:
                    self.from_client(sock)
                    if self.killed:
                        return
                self.feed(wr)
                if pidfd in rd:
                    return
        finally:
            os.close(pidfd)

    def finish(self) -> dict:
        """Kill the whole run, drain its pipes, clean up, and build the result frame."""
        wall = time.monotonic() - self.t0
        try:
            os.kill(self.pid, signal.SIGKILL)  # pid 1 of the namespace: the kernel kills every process in it
        except ProcessLookupError:
            pass
        _, status, rusage = os.wait4(self.pid, 0)  # returns once every process of the namespace is gone
        if self.mode["level"] == "none":
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for st in self.streams:  # every writer is gone now: drain to EOF
            while st.open and st.pump():
                pass
        if self.req_w is not None:
            os.close(self.req_w)
        for st in self.streams:
            os.close(st.fd)
        stats = self.cg.stats() if self.cg else {"cpu_s": rusage.ru_utime + rusage.ru_stime, "oom_kills": 0,
                                                 "peak_memory_bytes": rusage.ru_maxrss * 1024,
                                                 "process_limit_hits": 0}
        in_case = self.cases is not None and getattr(self, "case_open", False)
        case_stats = self._case_stats(None) if in_case else None  # before the groups go
        left = self.cg.destroy() if self.cg else 0
        if self.mode["level"] == "none":
            shutil.rmtree(self.req["scratch"], ignore_errors=True)
        exit_status = {"exit_code": os.waitstatus_to_exitcode(status), "signal": None}
        if exit_status["exit_code"] < 0:
            exit_status = {"exit_code": None, "signal": -exit_status["exit_code"]}
        killed = self.killed
        if killed is None and self.cases is None and (exit_status["signal"] == signal.SIGXCPU or (
                exit_status["signal"] == signal.SIGKILL and stats["cpu_s"] >= self.lim["cpu_s"])):
            killed = "cpu"  # SIGKILL: the hard RLIMIT_CPU, past the soft limit's SIGXCPU
        if killed is None and self.cases is None and not self.cg and stats["cpu_s"] > self.lim["cpu_s"]:
            killed = "cpu"  # its processes, each within its own RLIMIT_CPU, used more than the run's budget
        stderr = self.err.text()
        result = {"op": "result", **exit_status, "stdout": self.out.text(), "stderr": stderr,
                  "stdout_truncated": self.out.over, "stderr_truncated": self.err.over, "wall_s": wall,
                  "cpu_s": stats["cpu_s"], "peak_memory_bytes": stats["peak_memory_bytes"],
                  "oom_kills": stats["oom_kills"], "leftover_processes": left, "replies": self.replies,
                  "limit": _limit_from(exit_status, stats, stderr, None if killed == "client" else killed),
                  "isolation": self.mode["level"], "limits_by": self.mode["limits"],
                  "seccomp": self.mode["seccomp"], "error": None}
        if self.cases is not None:
            if in_case and killed != "client" and bytes(self.ready.buf) == b"r":  # the case the session ended in
                ended = exit_status if killed is None else {"exit_code": None, "signal": signal.SIGKILL}
                self.case_results.append(self._case_result(ended, case_stats, killed, left))
            if self.case_results:
                self.case_results[-1]["leftover_processes"] += left if not in_case else 0
            result["cases"] = self.case_results
        if bytes(self.ready.buf) != b"r":
            result["error"] = self.ready.text() or (
                f"sandbox child died before the program started (exit {exit_status['exit_code']}, "
                f"signal {exit_status['signal']}, stopped by {killed or 'nothing'})")
        return result


def supervise(sock: int, req: dict, mode: dict, name: str) -> dict | None:
    """Z1: run one request in a fresh isolated child and report what happened (None: the client left)."""
    run = _Run(req, mode, name)
    run.go()
    run.watch(sock)
    result = run.finish()
    return None if run.client_gone else result


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
        result = supervise(sock, req, mode, name)
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
    report, cgroups = _levels.detect(sys.base_prefix)
    _wire.write_frame(sock, {"op": "hello", "isolation": report, "pid": os.getpid()})
    mode = {"level": report["level"], "limits": report["limits"], "seccomp": report["seccomp"],
            "rootless": not report["root"], "cgroups": cgroups}
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
