"""What runs inside the sandbox once it is isolated: the candidate's program, or a call server.

Two modes, both in the sandboxed process itself (forked from the warm zygote, so no new
interpreter starts):

  * `run_main(code)`: behave like `python solution.py`: the code runs as `__main__`, an
    uncaught exception prints its traceback and gives status 1, `SystemExit` gives its code,
    non-daemon threads are joined and `atexit` handlers run, as CPython does at exit.
  * `serve(code, req_fd, resp_fd)`: import the code as module `solution`, report the names it
    defines, then answer calls `{"id", "fn", "args", "kwargs"}` with plain-data results (see
    `plain.py`; `fn` is a function's name or `Class.method`, the method of a fresh instance). The
    checker, outside, decides whether a result is right; nothing here knows the expected values,
    so nothing here can be talked into a pass.
  * `cases(code, req_fd, resp_fd)`: a stdio program's test cases in one session: per case a
    fresh child runs `run_main` on that case's stdin; in between, everything it left is killed
    and the scratch space emptied (see the function for what keeps one case from the next).
  * `host(ctl_fd)`: many programs in one session, one after another: per program a fresh child,
    forked before any program reached this process, reads its own code from pipes of its own
    and serves calls; in between, the same clean-up as `cases`, and the IPC objects go too.

Deliberately absent: any notion of test, expected value or verdict.
"""
from __future__ import annotations

import atexit
import builtins
import ctypes
import fcntl
import os
import random
import select
import shutil
import signal
import socket
import sys
import traceback

import _wire
import plain

SOLUTION = "/work/solution.py"


def _exit_code(e: SystemExit) -> int:
    code = e.code
    if code is None:
        return 0
    if type(code) is int:
        return code & 0xFF
    try:
        print(code, file=sys.stderr)
    except (OSError, ValueError):
        pass
    return 1


def _namespace(name: str) -> dict:
    """A real module registered under `name`, so pickling (multiprocessing) finds its functions."""
    module = type(sys)(name)
    module.__dict__.update({"__file__": SOLUTION, "__builtins__": builtins})
    sys.modules[name] = module
    return module.__dict__


def report_uncaught(e: BaseException) -> None:
    try:
        sys.excepthook(type(e), e, e.__traceback__)
    except Exception:  # a candidate may break its own excepthook; fall back to the plain printer
        traceback.print_exception(type(e), e, e.__traceback__)


def _shutdown() -> None:
    """The parts of interpreter exit a program can observe: join threads, run atexit, flush."""
    try:
        import threading
        getattr(threading, "_shutdown", lambda: None)()
    except Exception as e:
        report_uncaught(e)
    atexit._run_exitfuncs()
    flush_std()


def flush_std() -> None:
    """Flush the program's stdout and stderr, whatever it did to them."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass


def run_main(code: str) -> int:
    status = 0
    try:
        exec(compile(code, SOLUTION, "exec", dont_inherit=True), _namespace("__main__"))
    except SystemExit as e:
        status = _exit_code(e)
    except (Exception, KeyboardInterrupt, GeneratorExit) as e:  # what CPython reports for a script
        report_uncaught(e)
        status = 1
    try:
        _shutdown()
    except SystemExit:  # sys.exit inside an atexit handler: CPython keeps the earlier status
        pass
    return status


def _public_names(ns: dict) -> dict:
    names = {}
    for key, value in list(ns.items()):
        if key.startswith("_"):
            continue
        if callable(value):
            names[key] = {"callable": True}
        else:
            try:
                names[key] = {"callable": False, "value": plain.encode(value)}
            except plain.PlainDataError:
                pass  # modules, instances: not reachable from the checker
    return names


def _callee(ns: dict, name: str):
    """The function a call names: `f`, a function of the solution, or `Class.method`, that method of a fresh
    instance (`Class()`, one per call, as LeetCode-style judges build one per test case)."""
    owner, dot, method = str(name).partition(".")
    found = ns.get(owner)
    if dot:
        if not isinstance(found, type):
            raise NameError(f"name {owner!r} is not a class defined by the solution")
        found = getattr(found(), method, None)
    if found is None or not callable(found):
        raise NameError(f"name {name!r} is not a function defined by the solution")
    return found


def serve(code: str, req_fd: int, resp_fd: int) -> int:
    read_frame, write_frame, encode, decode = _wire.read_frame, _wire.write_frame, plain.encode, plain.decode
    ns = _namespace("solution")
    try:
        exec(compile(code, SOLUTION, "exec", dont_inherit=True), ns)
    except SystemExit:
        pass  # names defined before the exit stay callable; a test of a missing name fails
    except (Exception, KeyboardInterrupt, GeneratorExit) as e:
        report_uncaught(e)
        write_frame(resp_fd, {"loaded": False, "error": traceback.format_exception_only(type(e), e)[-1].strip()})
        return 1
    write_frame(resp_fd, {"loaded": True, "names": _public_names(ns)})
    while True:
        try:
            req = read_frame(req_fd)
        except _wire.WireError:
            break  # the checker is done
        reply = {"id": req.get("id")}
        try:
            fn = _callee(ns, req["fn"])
            value = fn(*decode(req.get("args", [])), **decode(req.get("kwargs", {"$dict": []})))
            reply["ok"] = encode(value)
        except (Exception, SystemExit, KeyboardInterrupt, GeneratorExit) as e:
            reply["error"] = traceback.format_exception_only(type(e), e)[-1].strip()[:2000]
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
        write_frame(resp_fd, reply)
    return 0


def _reap_all() -> int:
    """As pid 1 of the run's namespace: kill every other process in it and reap them; return how many."""
    n = 0
    while True:
        try:
            os.kill(-1, signal.SIGKILL)  # from a namespace's pid 1: everyone in it but us
        except ProcessLookupError:
            pass
        try:
            os.waitpid(-1, 0)
            n += 1
        except ChildProcessError:
            return n


def _clean(dirs=("/work", "/tmp", "/dev/shm")) -> None:
    """Empty the run's scratch file systems between cases (files the program made there, whatever their mode)."""
    for d in dirs:
        for name in os.listdir(d):
            path = os.path.join(d, name)
            try:
                if os.path.isdir(path) and not os.path.islink(path):
                    for root, subdirs, _ in os.walk(path):
                        for s in subdirs:
                            os.chmod(os.path.join(root, s), 0o700)
                    os.chmod(path, 0o700)
                    shutil.rmtree(path)
                else:
                    os.unlink(path)
            except OSError:
                pass


def cases(code: str, req_fd: int, resp_fd: int) -> int:
    """Run `code` as `python solution.py` once per case frame `{"i", "stdin"}`, each in a fresh child process;
    after each, kill whatever it left, empty the scratch space and answer `{"i", "status", "cpu_s", "maxrss",
    "left"}`. Only ever pid 1 of a run's own pid namespace (`kill(-1)` must reach nothing else).

    This process is made undumpable and ignores every signal a program could send it (a namespace's pid 1 gets
    only the signals it handles, and SIGINT's handler is dropped), so a case cannot reach into it to steer
    the next one. Its stdout and stderr are the run's: each case's child writes there, and the supervisor,
    told a case is done only after every process of it is gone, splits the streams per case."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: no /proc/1/mem for the cases
    while True:
        try:
            req = _wire.read_frame(req_fd)
        except _wire.WireError:
            return 0
        stdin = os.memfd_create("stdin")
        os.write(stdin, str(req.get("stdin", "")).encode())
        os.lseek(stdin, 0, os.SEEK_SET)
        pid = os.fork()
        if pid == 0:
            libc.prctl(4, 1, 0, 0, 0)
            os.dup2(stdin, 0)
            for fd in (stdin, req_fd, resp_fd):
                os.close(fd)
            random.seed()
            os._exit(run_main(code))
        os.close(stdin)
        _, status, ru = os.wait4(pid, 0)
        left = _reap_all()
        _clean()
        with open(SOLUTION, "w") as f:  # the next case gets the program as it was, whatever this one did to it
            f.write(code)
        _wire.write_frame(resp_fd, {"i": req.get("i"), "status": status, "cpu_s": ru.ru_utime + ru.ru_stime,
                                    "maxrss": ru.ru_maxrss * 1024, "left": left})


def _clean_ipc(libc) -> None:
    """Remove the System V shared memory, message queues and semaphores left in the run's IPC namespace."""
    for kind, ctl in (("shm", libc.shmctl), ("msg", libc.msgctl), ("sem", libc.semctl)):
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                ids = [int(line.split()[1]) for line in f.readlines()[1:] if line.strip()]
        except (OSError, ValueError, IndexError):
            continue
        for ident in ids:
            if kind == "sem":
                ctl(ident, 0, 0, None)  # IPC_RMID is 0 for all three
            else:
                ctl(ident, 0, None)


def _hosted(req_fd: int, resp_fd: int) -> int:
    """A hosted program's own process: its code is the first frame on its own request pipe, then `serve`."""
    try:
        first = _wire.read_frame(req_fd)
    except _wire.WireError:
        return 0
    code = first.get("code") if isinstance(first, dict) else None
    if not isinstance(code, str):
        return 2
    with open(SOLUTION, "w") as f:
        f.write(code)
    return serve(code, req_fd, resp_fd)


def host(ctl_fd: int) -> int:
    """Host programs one at a time: per `{"op": "fork"}` frame on `ctl_fd` (a socket to the supervisor), fork
    a child with two fresh pipes, hand the supervisor their other ends (`{"op": "forked"}` + 2 descriptors),
    and when the child ends (as a serve session's program does, at EOF on its requests), kill whatever is left
    of it, empty the scratch space and the IPC namespace, and answer
    `{"op": "done", "status", "cpu_s", "maxrss", "left"}`.

    Only ever pid 1 of a run's own pid namespace, undumpable and deaf to the programs' signals, as in `cases`.
    This process never reads a program, a call or a reply: each child is forked from memory that never held
    any program's data, reads its code and calls from pipes only it and the supervisor hold, and gets a fresh
    empty stdin, as a serve run's program does. stdout and stderr are the session's: the supervisor splits
    them per program, told a program is done only after every process of it is gone."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
    ctl = socket.socket(fileno=ctl_fd)
    while True:
        try:
            req = _wire.read_frame(ctl_fd)
        except _wire.WireError:
            return 0
        if req.get("op") != "fork":
            return 2
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            libc.prctl(4, 1, 0, 0, 0)
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 100) for fd in (os.memfd_create("stdin"), req_r, resp_w)]
            for target, fd in zip((0, 3, 4), high):
                os.dup2(fd, target)
            os.closerange(5, 1 << 16)
            random.seed()
            os._exit(_hosted(3, 4))
        os.close(req_r)
        os.close(resp_w)
        socket.send_fds(ctl, [_wire.encode({"op": "forked"})], [req_w, resp_r])
        os.close(req_w)
        os.close(resp_r)
        pidfd = os.pidfd_open(pid)
        gone = ctl_fd in select.select([pidfd, ctl_fd], [], [])[0]  # the supervisor ends a program by EOF on its pipe
        os.close(pidfd)
        if gone:  # anything from the supervisor mid-program, or its end: stop this program and the session
            os.kill(pid, signal.SIGKILL)
            os.wait4(pid, 0)
            _reap_all()
            return 0
        _, status, ru = os.wait4(pid, 0)
        left = _reap_all()
        _clean()
        _clean_ipc(libc)
        try:
            _wire.write_frame(ctl_fd, {"op": "done", "status": status, "cpu_s": ru.ru_utime + ru.ru_stime,
                                       "maxrss": ru.ru_maxrss * 1024, "left": left})
        except OSError:
            return 0
