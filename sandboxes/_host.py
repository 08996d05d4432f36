"""Z1's side of a host session: many programs served one after another in one isolated run.

A serve session (`_supervise._Run`) pays for a fresh run per program: control groups, a pid
namespace, mounts, a user namespace and seccomp, then the teardown. A host session pays that once:
its pid 1 (`_harness.host`) forks one child per program, and between programs kills everything
the last one left, empties /work, /tmp and /dev/shm and the IPC namespace. What still holds per
program: its own process, forked from a pid 1 that never read any program's data; its own request
and reply pipes (handed over by pid 1 on the control socket); its own wall clock and CPU budget;
its own stdout/stderr slice, peak memory and result. What the programs of one session share:
the session's namespaces (network, IPC, UTS, mount: nothing a program can change there outlives
it, see `_harness.host`), its control groups (so memory and process limits bind each program plus
pid 1's few MB) and its read-only root.

Client to Z1, in a host run: {"op": "load", "code"}, then calls as in a serve run
({"op": "call"}), then {"op": "unload"}; Z1 answers the load and the calls with "reply" frames
as a serve run does, and every program with {"op": "done", "result": <a run's result>}. A
program that hits a time or output limit ends the whole session (its result comes in the
session's result frame as "program"); a crash ends only the program. {"op": "end"} ends the
session. Standard library only; loaded by the zygote.
"""
from __future__ import annotations

import json
import os
import select
import signal
import socket
import time

import _wire
from _supervise import _exit_status, _Run, _Stream


class _Program:
    """The program being hosted: its clock, its budget's starting point, its pipes once pid 1 has forked it."""

    def __init__(self, code: str, base: dict | None, cpu0: float) -> None:
        self.code, self.t0, self.base, self.cpu0 = code, time.monotonic(), base, cpu0
        self.req_w: int | None = None
        self.resp: _Stream | None = None
        self.pending, self.ending = bytearray(), False

    def close_fds(self) -> None:
        if self.req_w is not None:
            os.close(self.req_w)
            self.req_w = None
        if self.resp is not None:
            os.close(self.resp.fd)
            self.resp = None


class HostRun(_Run):
    def __init__(self, req: dict, mode: dict, name: str) -> None:
        ours, theirs = socket.socketpair()
        self.ctl = ours
        self.ctl_fds: list[int] = []
        self.ctl_buf = bytearray()
        super().__init__(req, mode, name, extra_fds={"ctl_p": theirs.detach()})
        self.prog: _Program | None = None
        self.programs = 0
        self.last_stats: dict | None = None  # the control groups' figures when the last program ended
        self.streams = (self.out, self.err, self.ready)
        os.close(self.resp.fd)
        self.ctl.setblocking(False)
        self.ctl_open = True

    # -- pid 1's control socket ----------------------------------------------------------------
    def _ctl_send(self, msg: dict) -> None:
        self.ctl.setblocking(True)
        try:
            self.ctl.sendall(_wire.encode(msg))
        finally:
            self.ctl.setblocking(False)

    def _from_pid1(self, sock: int) -> None:
        try:
            data, fds, _, _ = socket.recv_fds(self.ctl, 1 << 16, 4)
        except BlockingIOError:
            return
        self.ctl_fds += fds
        if not data:
            self.ctl_open = False  # pid 1 is ending; its pidfd says when
            return
        self.ctl_buf += data
        while (body := _wire.pop_frame(self.ctl_buf)) is not None:
            frame = json.loads(body)
            if frame.get("op") == "forked" and self.prog is not None and len(self.ctl_fds) >= 2:
                req_w, resp_r = self.ctl_fds[:2]
                del self.ctl_fds[:2]
                os.set_blocking(req_w, False)
                os.set_blocking(resp_r, False)
                self.prog.req_w, self.prog.resp = req_w, _Stream(resp_r, _wire.MAX_FRAME)
                self.prog.pending[:0] = _wire.encode({"code": self.prog.code})
                if self.prog.ending:
                    self.prog.close_fds()
            elif frame.get("op") == "done" and self.prog is not None and isinstance(frame.get("status"), int):
                self._done(sock, frame)
            else:
                self.killed = "protocol"
                return

    # -- programs ------------------------------------------------------------------------------
    def _stats(self) -> dict | None:
        return self.cg.stats() if self.cg else None

    def _program_result(self, exit_status: dict, data: dict | None, killed: str | None) -> dict:
        """The program's result, as a case's is made (`_Run.slice_*`), from its start's figures to now's."""
        p = self.prog
        self.last_stats = now = self._stats()
        stats = self.slice_stats(p.base, data, now)
        if killed is None and self.slice_over_cpu(exit_status, stats):
            killed = "cpu"
        return self.slice_result(exit_status, stats, killed, 0, p.t0)

    def _forward(self, sock: int) -> None:
        """The program's complete reply frames, re-encoded for the client (never spliced)."""
        for data in self.frames(self.prog.resp):
            _wire.write_frame(sock, {"op": "reply", "data": data})

    def _done(self, sock: int, frame: dict) -> None:
        """Pid 1 says every process of the program is gone: pass on its last replies, then its result."""
        p = self.prog
        if p.resp is not None:
            p.resp.drain()
            self._forward(sock)
        p.close_fds()
        self.out.drain()
        self.err.drain()
        result = self._program_result(_exit_status(frame["status"]), frame, None)
        _wire.write_frame(sock, {"op": "done", "result": result})
        self.out.reset()
        self.err.reset()
        if self.cg:
            self.cg.reset_peak()  # for the next program, if one comes
        self.prog, self.programs = None, self.programs + 1

    def _from_client(self, sock: int) -> None:
        try:
            msg = _wire.read_frame(sock)
        except _wire.WireError:
            self.client_gone, self.killed = True, "client"
            return
        op, p = msg.get("op"), self.prog
        if op == "load" and p is None and not self.closing and isinstance(msg.get("code"), str):
            base = self.last_stats if self.last_stats is not None else self._stats()  # the last program's end
            if self.cg and self.last_stats is None:
                self.cg.reset_peak()
            self.prog = _Program(msg["code"], base, base["cpu_s"] if base else 0.0)
            self._ctl_send({"op": "fork"})
        elif op == "call" and p is not None and not p.ending:
            p.pending += _wire.encode(msg["call"])
        elif op == "unload" and p is not None and not p.ending:
            p.ending, p.pending = True, bytearray()
            if p.req_w is not None:
                p.close_fds()  # EOF on its requests ends the program; replies still unread are not wanted
        elif op == "end":
            self.closing = True
            if p is not None:
                self.killed = "client"  # the client ended the host run with a program still loaded: stop it now
        elif op not in ("call", "unload"):  # a late call or unload, for a program that ended by itself, is fine
            self.killed = "client"

    def watch(self, sock: int) -> None:
        """Relay loads, calls and replies; enforce each program's wall clock and CPU budget; until the session ends."""
        pidfd = os.pidfd_open(self.pid)
        next_cpu_check = time.monotonic() + 0.05
        try:
            while True:
                if self.closing and self.prog is None:
                    return
                now, p = time.monotonic(), self.prog
                if p is not None and now >= p.t0 + self.lim["wall_s"]:
                    self.killed = "wall"
                    return
                if p is not None and now >= next_cpu_check:
                    next_cpu_check = now + 0.05
                    if self.cg and self.cg.cpu_s() - p.cpu0 > self.lim["cpu_s"]:
                        self.killed = "cpu"
                        return
                rlist = [st.fd for st in self.streams if st.open] + [pidfd, sock]
                if self.ctl_open:
                    rlist.append(self.ctl.fileno())
                if p is not None and p.resp is not None and p.resp.open:
                    rlist.append(p.resp.fd)
                wlist = [p.req_w] if p is not None and p.req_w is not None and p.pending else []
                wait = None if p is None else max(0.0, min(p.t0 + self.lim["wall_s"], next_cpu_check) - now)
                rd, wr, _ = select.select(rlist, wlist, [], wait)
                if self.pump(rd):
                    return
                if p is not None and p.resp is not None and p.resp.fd in rd:
                    p.resp.pump()
                    self._forward(sock)
                    if self.killed:
                        return
                if self.ctl.fileno() in rd:
                    self._from_pid1(sock)
                    if self.killed:
                        return
                if sock in rd:
                    self._from_client(sock)
                    if self.killed:
                        return
                p = self.prog
                if p is not None and p.req_w is not None and p.req_w in wr and p.pending:
                    try:
                        del p.pending[:os.write(p.req_w, p.pending)]
                    except (BlockingIOError, BrokenPipeError):
                        pass
                if pidfd in rd:
                    return
        finally:
            os.close(pidfd)

    def before_destroy(self, exit_status: dict) -> None:
        """A program still hosted when the session ended gets its result, stopped by what ended the session."""
        self.ended_program = None
        if self.prog is not None and bytes(self.ready.buf) == b"r":
            if self.killed:
                exit_status = {"exit_code": None, "signal": signal.SIGKILL}
            self.ended_program = self._program_result(exit_status, None,
                                                      None if self.killed == "client" else self.killed)

    def finish(self) -> dict:
        if self.prog is not None:
            self.prog.close_fds()
        self.ctl.close()
        for fd in self.ctl_fds:
            os.close(fd)
        result = super().finish()
        if self.ended_program is not None:
            self.ended_program["leftover_processes"] = result["leftover_processes"]
            result["program"] = self.ended_program
        result["programs"] = self.programs
        return result

