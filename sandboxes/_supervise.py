"""Z1's supervision of one run: its control groups, the child, its pipes, its clocks, its result.

`supervise(sock, req, mode, name)` creates the run's cgroups (where the level has any), forks P
(`_child.py`) into a new pid namespace, lets it go once it is inside them, then streams its output
(capped), relays calls in `serve` mode or feeds and splits the cases of a `cases` session,
enforces wall and CPU time, kills the whole namespace at the end (every descendant dies with its
pid 1), checks the cgroups are empty, removes them and builds the result frame.
Standard library only; loaded by the zygote.
"""
from __future__ import annotations

import json
import os
import select
import shutil
import signal
import tempfile
import time

import _isolate
import _wire
from _child import child

CLK_TCK = os.sysconf("SC_CLK_TCK")


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


def _exit_status(status: int) -> dict:
    """A wait status as the result frames carry it: an exit code, or the signal that ended the process."""
    code = os.waitstatus_to_exitcode(status)
    return {"exit_code": code, "signal": None} if code >= 0 else {"exit_code": None, "signal": -code}


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

    def __init__(self, req: dict, mode: dict, name: str, extra_fds: dict | None = None) -> None:
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
        self.fds.update(extra_fds or {})  # the child's ends of anything else it is given (a host's socket)
        if mode["level"] != "none":
            _isolate.unshare(_isolate.CLONE_NEWPID)
        self.pid = os.fork()
        if self.pid == 0:
            child(req, self.fds, mode)
        for k in ("go_r", "ready_w", "out_w", "err_w", "req_r", "resp_w", *(extra_fds or {})):
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
        self.case_open = False  # a case was sent and its report has not come back
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
            self._start_case(0, self.cg.stats() if self.cg else None)

    # -- cases mode: one session, one fresh child per stdio case, limits and results per case -----------
    def _start_case(self, i: int, base: dict | None) -> None:
        """Send case `i`; `base` is the cgroups' figures now (the last case's end), its deltas start there."""
        self.case_i, self.case_t0, self.case_open = i, time.monotonic(), True
        self.case_stats0, self.case_cpu0 = base, base["cpu_s"] if base else self.cpu_s()
        if self.cg:
            self.cg.reset_peak()
        self.pending += _wire.encode({"i": i, "stdin": self.cases[i]})

    # -- one slice of a session (a case, or a host run's program): its own figures and result ---------------
    def slice_result(self, exit_status: dict, stats: dict, killed: str | None, left: int, t0: float) -> dict:
        """A run's result for the slice that started at `t0`: the output read since, its figures, its limit."""
        stderr = self.err.text()
        return {**exit_status, "stdout": self.out.text(), "stderr": stderr, "stdout_truncated": self.out.over,
                "stderr_truncated": self.err.over, "wall_s": time.monotonic() - t0,
                "cpu_s": stats["cpu_s"], "peak_memory_bytes": stats["peak_memory_bytes"], "leftover_processes": left,
                "limit": _limit_from(exit_status, stats, stderr, killed), "isolation": self.mode["level"],
                "limits_by": self.mode["limits"], "seccomp": self.mode["seccomp"]}

    def slice_stats(self, base: dict | None, data: dict | None, now: dict | None) -> dict:
        """A slice's figures: deltas of the cgroups' (`now` minus `base`, the slice's start), else what pid 1
        reported for it (`data`: its cpu_s and maxrss)."""
        if not self.cg:
            return {"cpu_s": (data or {}).get("cpu_s", 0.0), "peak_memory_bytes": (data or {}).get("maxrss", 0),
                    "oom_kills": 0, "process_limit_hits": 0}
        return {"cpu_s": now["cpu_s"] - base["cpu_s"], "peak_memory_bytes": now["peak_memory_bytes"],
                "oom_kills": now["oom_kills"] - base["oom_kills"],
                "process_limit_hits": now["process_limit_hits"] - base["process_limit_hits"]}

    def slice_over_cpu(self, exit_status: dict, stats: dict) -> bool:
        """The slice ran out of CPU: SIGXCPU, or (without cgroups) the hard RLIMIT_CPU's SIGKILL, or its figures."""
        return exit_status["signal"] == signal.SIGXCPU or stats["cpu_s"] > self.lim["cpu_s"] or (
            exit_status["signal"] == signal.SIGKILL and not self.cg and stats["cpu_s"] >= self.lim["cpu_s"])

    def _case_done(self, data) -> None:
        if not isinstance(data, dict) or data.get("i") != self.case_i or not isinstance(data.get("status"), int):
            self.killed = "protocol"  # the session's pid 1 is ours; a frame that is not its answer ends the run
            return
        self.case_open = False
        self.out.drain()
        self.err.drain()
        exit_status = _exit_status(data["status"])
        now = self.cg.stats() if self.cg else None
        stats = self.slice_stats(self.case_stats0, data, now)
        killed = "cpu" if self.slice_over_cpu(exit_status, stats) else None
        # what the case left behind was killed by the session's pid 1, as a run's end kills it: not a leftover
        self.case_results.append(self.slice_result(exit_status, stats, killed, 0, self.case_t0))
        self.out.reset()
        self.err.reset()
        if killed is None and self.case_results[-1]["limit"] in ("wall", "cpu"):
            killed = self.case_results[-1]["limit"]
        if killed is None and self.case_i + 1 < len(self.cases):  # after a time limit the rest is not run
            self._start_case(self.case_i + 1, now)
        else:
            self.closing = True

    def frames(self, stream: _Stream):
        """Each complete frame in `stream`'s buffer, decoded (None when it is not JSON) and removed as it is
        read; a frame announcing more than `output_bytes` ends the run ("output") and the reading."""
        while True:
            try:
                body = _wire.pop_frame(stream.buf, self.lim["output_bytes"])
            except _wire.WireError:
                self.killed = "output"
                return
            if body is None:
                return
            self.replies += 1
            try:
                yield json.loads(body.decode())
            except ValueError:
                yield None

    def forward_replies(self, sock: int) -> None:
        """Forward each complete reply frame to the client, re-encoded (never spliced: no forged frames);
        in cases mode the frames are the session's own case reports, kept here."""
        for data in self.frames(self.resp):
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

    def pump(self, ready: list) -> bool:
        """Read the streams `select` found ready; True when stdout or stderr went past its cap (killed: output)."""
        for st in self.streams:
            if st.fd in ready:
                st.pump()
        if self.out.over or self.err.over:
            self.killed = "output"
        return self.killed == "output"

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
                if self.pump(rd):
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

    def before_destroy(self, exit_status: dict) -> None:
        """Called by `finish` once the run is dead and drained, while its control groups still stand."""

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
        in_case = self.case_open
        case_stats = (self.slice_stats(self.case_stats0, None, stats if self.cg else None)  # before the groups go
                      if in_case else None)
        self.before_destroy(_exit_status(status))
        left = self.cg.destroy() if self.cg else 0
        if self.mode["level"] == "none":
            shutil.rmtree(self.req["scratch"], ignore_errors=True)
        exit_status = _exit_status(status)
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
                self.case_results.append(self.slice_result(ended, case_stats, killed, left, self.case_t0))
            if self.case_results:
                self.case_results[-1]["leftover_processes"] += left if not in_case else 0
            result["cases"] = self.case_results
        if bytes(self.ready.buf) != b"r":
            result["error"] = self.ready.text() or (
                f"sandbox child died before the program started (exit {exit_status['exit_code']}, "
                f"signal {exit_status['signal']}, stopped by {killed or 'nothing'})")
        return result


def supervise(sock: int, req: dict, mode: dict, name: str, run_class: type = _Run) -> dict | None:
    """Z1: run one request in a fresh isolated child and report what happened (None: the client left).
    run_class: `_Run`, or `_host.HostRun` for a host run."""
    run = run_class(req, mode, name)
    run.go()
    run.watch(sock)
    result = run.finish()
    return None if run.client_gone else result
