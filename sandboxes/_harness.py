"""What runs inside the sandbox once it is isolated: the candidate's program, or a call server.

Two modes, both in the sandboxed process itself (forked from the warm zygote, so no new
interpreter starts):

  * `run_main(code)`: behave like `python solution.py`: the code runs as `__main__`, an
    uncaught exception prints its traceback and gives status 1, `SystemExit` gives its code,
    non-daemon threads are joined and `atexit` handlers run, as CPython does at exit.
  * `serve(code, req_fd, resp_fd)`: import the code as module `solution`, report the names it
    defines, then answer calls `{"id", "fn", "args", "kwargs"}` with plain-data results (see
    `plain.py`). The checker, outside, decides whether a result is right; nothing here knows
    the expected values, so nothing here can be talked into a pass.

Deliberately absent: any notion of test, expected value or verdict.
"""
from __future__ import annotations

import atexit
import builtins
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


def _report_uncaught(e: BaseException) -> None:
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
        _report_uncaught(e)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass


def run_main(code: str) -> int:
    status = 0
    try:
        exec(compile(code, SOLUTION, "exec"), _namespace("__main__"))
    except SystemExit as e:
        status = _exit_code(e)
    except (Exception, KeyboardInterrupt, GeneratorExit) as e:  # what CPython reports for a script
        _report_uncaught(e)
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


def serve(code: str, req_fd: int, resp_fd: int) -> int:
    read_frame, write_frame, encode, decode = _wire.read_frame, _wire.write_frame, plain.encode, plain.decode
    ns = _namespace("solution")
    try:
        exec(compile(code, SOLUTION, "exec"), ns)
    except SystemExit:
        pass  # names defined before the exit stay callable; a test of a missing name fails
    except (Exception, KeyboardInterrupt, GeneratorExit) as e:
        _report_uncaught(e)
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
            fn = ns.get(req["fn"])
            if fn is None or not callable(fn):
                raise NameError(f"name {req['fn']!r} is not a function defined by the solution")
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
