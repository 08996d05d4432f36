"""`Sandbox`: the caller's handle on one zygote (one run at a time), and `Session` for calls.

    sb = Sandbox()                       # starts the zygote, probes isolation, may refuse
    r = sb.run("print(input()[::-1])", stdin="abc\\n", limits={"wall_s": 2})
    with sb.serve("def f(x): return 2 * x") as s:
        s.call("f", 21)                  # CallResult(ok=True, value=42, error=None)

The zygote is a fresh `python -I -S` exec'd from a clean environment (never a fork of the
caller, which may hold expected outputs). A zygote that stops answering is killed and
restarted; what that run did is reported as `SandboxError`, never as a program result.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass, fields
from typing import Any

from . import _wire, plain
from .limits import IsolationError, Limits, RunResult, SandboxError
from .packages import resolve

ZYGOTE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_zygote.py")
ALLOW_WEAK_ENV = "REASONING_RL_ALLOW_WEAK_SANDBOX"
MARGIN_S = 30.0  # how long past its wall limit a zygote may take to answer before it is presumed dead
HOST_PROGRAMS = 256  # programs one host run serves before a fresh one starts
IMPORT_LIMITS = Limits(wall_s=60.0, cpu_s=60.0, memory_mb=1024)  # the one-time import of each declared package


def _run_result(frame: dict) -> RunResult:
    """A `RunResult` from a result frame (or a case's or a hosted program's part of one)."""
    return RunResult(**{f.name: frame[f.name] for f in fields(RunResult)})


def base_python() -> str:
    """The base interpreter (not a virtual environment's): candidates get the standard library only."""
    for name in (f"python{sys.version_info[0]}.{sys.version_info[1]}", "python3"):
        path = os.path.join(sys.base_exec_prefix, "bin", name)
        if os.access(path, os.X_OK):
            return path
    return sys.executable


@dataclass(frozen=True)
class CallResult:
    ok: bool
    value: Any = None
    error: str | None = None


class RunEnded(SandboxError):
    """A call was made on a session whose program has already ended (crash, exit or limit)."""


class Sandbox:
    """One zygote. Thread-safe (runs are serialised); use `SandboxPool` for concurrency.

    The isolation level is the best the host gives (`report["level"]`: "full" as root with
    cgroups, "rootless" through user namespaces otherwise); only level "none" is refused.
    allow_weak: run even at level "none" (also: env REASONING_RL_ALLOW_WEAK_SANDBOX=1).
    python: the interpreter the zygote and the programs run under (default: the base interpreter
        of this one); it must be readable by the uid that runs the zygote.
    user: run the zygote, and so every program, as this host uid (and gid): a root caller's way
        to use the rootless level under a dedicated account. Needs root.
    packages: third-party distributions the programs may import (and what they require), read-only under
        /pkgs, from `site` (a virtual environment or site-packages folder; default: this interpreter's). Each is
        imported once at start; `report["packages"]` has versions and import seconds (`packages.py`).
    """

    def __init__(self, limits: Limits | dict | None = None, allow_weak: bool | None = None,
                 python: str | None = None, user: int | None = None, packages: tuple[str, ...] | list = (),
                 site: str | None = None) -> None:
        if user is not None and (isinstance(user, bool) or not isinstance(user, int) or user < 0):
            raise ValueError(f"Sandbox.user must be a non-negative uid, got {user!r}")
        if isinstance(packages, str) or not all(isinstance(p, str) and p for p in packages):
            raise ValueError(f"Sandbox.packages must be a list of distribution names, got {packages!r}")
        self.packages, self.site = tuple(packages), site
        self._resolved = resolve(self.packages, site) if self.packages else None  # a missing one: ValueError now
        self.python, self.user = python or base_python(), user
        self.limits = Limits.of(limits)
        self.allow_weak = allow_weak if allow_weak is not None else os.environ.get(ALLOW_WEAK_ENV) == "1"
        self._lock = threading.RLock()
        self._proc: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        self.report: dict | None = None
        self._host: _Host | None = None  # the open host run, between its programs

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> dict:
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                return self.report
            ours, theirs = socket.socketpair()
            env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
            try:
                who = {} if self.user is None else {"user": self.user, "group": self.user, "extra_groups": []}
                extra = [json.dumps({"site": self._resolved.site, "entries": list(self._resolved.entries)})] \
                    if self._resolved else []
                self._proc = subprocess.Popen([self.python, "-I", "-S", "-B", ZYGOTE, str(theirs.fileno()), *extra],
                                              pass_fds=(theirs.fileno(),), env=env, cwd="/",
                                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, **who)
            finally:
                theirs.close()
            self._sock = ours
            ours.settimeout(60)
            try:
                hello = _wire.recv_frame(ours)
            except (OSError, _wire.WireError) as e:
                self.close()
                raise SandboxError(f"sandbox zygote did not start: {e}") from None
            self.report = hello["isolation"]
            if self.report["level"] == "none" and not self.allow_weak:
                report = self.report
                self.close()
                raise IsolationError(
                    f"no sandbox isolation is available here ({'; '.join(report['problems'])}); refusing to run "
                    f"untrusted code without namespaces. Allow unprivileged user namespaces (sysctl "
                    f"user.max_user_namespaces > 0; in a container: run it with --security-opt seccomp=unconfined "
                    f"or a profile allowing unshare/clone of namespaces), or pass allow_weak=True / set "
                    f"{ALLOW_WEAK_ENV}=1 to accept a scratch directory and rlimits only.")
            if self._resolved:
                self.report["packages"] = self._import_each()
            return self.report

    def _import_each(self) -> dict:
        """Import each declared package once inside the sandbox: its version and seconds, or SandboxError naming
        the one that fails (built for another Python, a missing system library)."""
        out = {}
        versions = dict(self._resolved.versions)
        for module in self._resolved.modules:
            code = f"import time\nt = time.perf_counter()\nimport {module}\nprint(time.perf_counter() - t)"
            r = self.run(code, "", IMPORT_LIMITS)
            if not r.ok:
                self.close()
                why = (r.stderr.strip().splitlines() or [r.describe()])[-1][:300]
                raise SandboxError(f"Sandbox.packages: `import {module}` fails inside the sandbox (from "
                                   f"{self._resolved.site}): {why}")
            out[module] = {"import_s": float(r.stdout.strip() or 0.0)}
        return {"site": self._resolved.site, "versions": versions, "imports": out}

    @property
    def isolation(self) -> str:
        return (self.report or self.start())["level"]

    def close(self) -> None:
        with self._lock:
            self._host = None
            if self._sock is not None:
                self._sock.close()
                self._sock = None
            if self._proc is not None:
                try:
                    self._proc.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
                self._proc = None

    def __enter__(self) -> "Sandbox":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown: nothing useful to do
            pass

    # -- runs ------------------------------------------------------------------------------
    def _send(self, msg: dict) -> None:
        try:
            _wire.send_frame(self._sock, msg)
        except OSError as e:
            self._fail(f"could not talk to the sandbox zygote: {e}")

    def _recv(self, timeout: float) -> dict:
        self._sock.settimeout(timeout)
        try:
            return _wire.recv_frame(self._sock)
        except (OSError, _wire.WireError) as e:
            self._fail(f"sandbox zygote stopped answering: {e}")

    def _fail(self, why: str):
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
        self.close()  # the next run starts a fresh zygote
        raise SandboxError(why)

    def end_host(self) -> RunResult | None:
        """End the open host run, if there is one (every other kind of run does this first)."""
        with self._lock:
            host, self._host = self._host, None
            if host is None:
                return None
            self._send({"op": "end"})
            msg = self._recv(MARGIN_S)
            if msg.get("op") != "result":
                self._fail(f"sandbox protocol: expected a host run's result, got {str(msg)[:200]!r}")
            return None if msg.get("error") else _run_result(msg)

    def _begin(self, code: str, stdin: str, limits, mode: str, **extra) -> Limits:
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, got {type(code).__name__}")
        if not isinstance(stdin, str):
            raise TypeError(f"stdin must be a str, got {type(stdin).__name__}")
        lim = Limits.of(limits) if limits is not None else self.limits
        self.start()
        self.end_host()
        self._send({"op": "run", "mode": mode, "code": code, "stdin": stdin, "limits": lim.to_dict(), **extra})
        return lim

    def _result(self, msg: dict) -> RunResult:
        if msg.get("op") != "result":
            self._fail(f"sandbox protocol: expected a result, got {str(msg)[:200]!r}")  # restart: never desync
        if msg.get("error"):
            raise SandboxError(msg["error"])
        return _run_result(msg)

    def run(self, code: str, stdin: str = "", limits: Limits | dict | None = None) -> RunResult:
        """Run `code` as `python solution.py` with `stdin`; return what happened."""
        with self._lock:
            lim = self._begin(code, stdin, limits, "main")
            return self._result(self._recv(lim.wall_s + MARGIN_S))

    def run_cases(self, code: str, stdins: list[str], limits: Limits | dict | None = None) -> list[RunResult]:
        """Run `code` once per stdin, all in one sandbox session: each case is a fresh process with the
        limits of one `run`, and between cases everything it left is killed and /work, /tmp and /dev/shm are
        emptied, so each result is what `run(code, stdin)` would give. A case that ends the session (wall,
        CPU or output limit, or the session's death) is the last result: fewer results than stdins
        means the rest did not run (run them again, or not, as the caller's rule is)."""
        stdins = list(stdins)
        for i, s in enumerate(stdins):
            if not isinstance(s, str):
                raise TypeError(f"stdins[{i}] must be a str, got {type(s).__name__}")
        if not stdins:
            return []
        with self._lock:
            self.start()
            self.end_host()
            if self.report["level"] == "none":  # a session needs a pid namespace of its own to clear between cases
                return [self.run(code, s, limits) for s in stdins]
            lim = self._begin(code, "", limits, "cases", stdins=stdins)
            msg = self._recv(len(stdins) * (lim.wall_s + 2.0) + MARGIN_S)
            if msg.get("op") != "result":
                self._fail(f"sandbox protocol: expected a cases result, got {str(msg)[:200]!r}")
            if msg.get("error"):
                raise SandboxError(msg["error"])
            if not isinstance(msg.get("cases"), list):
                self._fail(f"sandbox protocol: a cases result without its cases: {str(msg)[:200]!r}")
            if not msg["cases"]:
                raise SandboxError("the sandbox session ran none of the cases")
            return [_run_result(c) for c in msg["cases"]]

    def serve(self, code: str, limits: Limits | dict | None = None, hosted: bool = False) -> "Session":
        """Load `code` as module `solution` in a sandbox and keep it running to answer calls.

        hosted: load it into this sandbox's host run (started on first use, and again after
        `HOST_PROGRAMS` programs, a change of limits, or a run of another kind): one isolated
        run serving programs one after another, each a fresh process of its own with its own
        pipes, clock, CPU budget and result, everything it left killed and its scratch space
        emptied before the next (`_host.py` says what the programs share). It saves the run's
        set-up and teardown per program; without it, and at level "none" (no pid namespace to
        clear), each program gets a fresh run."""
        self._lock.acquire()  # held until the program has ended (Session releases it)
        started = False
        try:
            if hosted and self.start()["level"] == "none":
                hosted = False  # a host run needs a pid namespace of its own to clear between programs
            if not hosted:
                session = Session(self, self._begin(code, "", limits, "serve"))
            else:
                if not isinstance(code, str):
                    raise TypeError(f"code must be a str, got {type(code).__name__}")
                lim = Limits.of(limits) if limits is not None else self.limits
                if self._host is not None and (self._host.limits != lim or self._host.programs >= HOST_PROGRAMS):
                    self.end_host()
                if self._host is None:
                    self._send({"op": "run", "mode": "host", "code": "", "stdin": "", "limits": lim.to_dict()})
                    self._host = _Host(lim)
                self._host.programs += 1
                self._send({"op": "load", "code": code})
                session = _HostedSession(self, lim)
            started = True
            return session
        finally:
            if not started:
                self._lock.release()


def probe(python: str | None = None, user: int | None = None) -> dict:
    """What isolation this host gives, without running anything: the zygote's report (level, what
    bounds the runs, seccomp, what the level contains and, without cgroups, what it bounds only per
    process, and the problems keeping it from the full level). Never refuses."""
    sb = Sandbox(allow_weak=True, python=python, user=user)
    try:
        return dict(sb.start())
    finally:
        sb.close()


class Session:
    """A program loaded in a sandbox, answering calls until `close()` (or its limits) end it."""

    def __init__(self, sandbox: Sandbox, limits: Limits) -> None:
        self._sb, self.limits, self._next_id = sandbox, limits, 0
        self.result: RunResult | None = None
        self.names: dict = {}
        self.load_error: str | None = None
        self._broken = False
        msg = self._read()
        if msg is not None:
            data = msg.get("data")
            if isinstance(data, dict) and data.get("loaded") is True and isinstance(data.get("names"), dict):
                self.names = data["names"]
            else:
                self.load_error = str(data.get("error") if isinstance(data, dict) else data)[:2000]

    @property
    def broken(self) -> bool:
        """The sandbox itself failed during this session (calls raised SandboxError)."""
        return self._broken

    @property
    def loaded(self) -> bool:
        return self.result is None and self.load_error is None

    def _ended(self, msg: dict) -> RunResult:
        """The program's result from the frame that says it has ended."""
        return self._sb._result(msg)

    def _read(self) -> dict | None:
        """The next reply, or None once the run has ended (its result is then in `self.result`)."""
        if self.result is not None:
            return None
        if self._broken:
            raise SandboxError("this session's sandbox failed earlier")
        try:
            msg = self._sb._recv(self.limits.wall_s + MARGIN_S)
            if msg.get("op") == "reply":
                return msg
            self.result = self._ended(msg)
        except SandboxError:
            self._broken = True
            self._sb._lock.release()
            raise
        self._sb._lock.release()
        return None

    def _send(self, msg: dict) -> None:
        try:
            self._sb._send(msg)
        except SandboxError:
            self._broken = True
            self._sb._lock.release()
            raise

    def call(self, fn: str, *args: Any, **kwargs: Any) -> CallResult:
        """Call `fn(*args, **kwargs)` inside the sandbox; the value comes back as fresh plain data."""
        if self.result is not None:
            raise RunEnded(f"the program ended ({self.result.describe()}) before calling {fn}()")
        if self._broken:
            raise SandboxError("this session's sandbox failed earlier")
        self._next_id += 1
        call_id = self._next_id
        self._send({"op": "call", "call": {"id": call_id, "fn": fn, "args": plain.encode(list(args)),
                                                "kwargs": plain.encode(dict(kwargs))}})
        while True:
            msg = self._read()
            if msg is None:
                raise RunEnded(f"the program ended ({self.result.describe()}) during {fn}()")
            data = msg.get("data")
            if not isinstance(data, dict) or data.get("id") != call_id:
                continue  # unsolicited or malformed frames from the program are ignored
            if "ok" in data:
                try:
                    return CallResult(True, plain.decode(data["ok"]))
                except plain.PlainDataError as e:
                    return CallResult(False, error=f"malformed result: {e}")
            return CallResult(False, error=str(data.get("error"))[:2000])

    _END = {"op": "end"}

    def close(self) -> RunResult:
        """End the program (EOF on its request channel) and return how the run went."""
        if self.result is None and not self._broken:
            self._send(self._END)
            while self._read() is not None:
                pass
        return self.result

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


@dataclass
class _Host:
    limits: Limits
    programs: int = 0


class _HostedSession(Session):
    """A program of a host run: the same calls; its end is the host's "done" frame, or the run's own end."""

    _END = {"op": "unload"}

    def _ended(self, msg: dict) -> RunResult:
        sb = self._sb
        if msg.get("op") == "done" and isinstance(msg.get("result"), dict):
            return _run_result(msg["result"])
        sb._host = None  # the host run itself ended: a limit it enforces, or the sandbox failed
        if msg.get("op") == "result" and not msg.get("error") and isinstance(msg.get("program"), dict):
            return _run_result(msg["program"])
        return sb._result(msg)
