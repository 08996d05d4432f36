"""Programs served one after another in one host run (`Sandbox.serve(..., hosted=True)`) give what each
gives in a run of its own, whatever the program before it did: the same load report, call results, exit
status, output and limit, at every isolation level; nothing one program leaves (files, processes, IPC
objects, bytes in memory, a hijacked serve loop, a flood, a spin) reaches the next; and the `code`
verifier's verdicts with a host run are the ones with fresh runs. (What a program can see that differs:
it is not pid 1 of its namespace; the host's pid 1 is.)"""
from __future__ import annotations

import pytest

from sandboxes import RunEnded

pytestmark = pytest.mark.timeout(180)
LIM = {"wall_s": 2.0, "cpu_s": 1.0, "memory_mb": 128, "processes": 16, "output_bytes": 1 << 16}

# What a later program can find of an earlier one: files in its scratch space, processes other than the
# host's pid 1 and itself, System V IPC objects, stdin, and the earlier program's secret anywhere in its own
# memory. The secret is searched as two halves, so this program's own text never holds it whole.
PROBE = '''
import glob, os
def look(plant=False):
    head, tail = b"rrl-secret-", b"7c1f9a"
    planted = b"".join([head, tail]) if plant else b""  # the scan's own check: a secret in memory is found
    files = sorted(os.listdir("/work") + os.listdir("/tmp") + os.listdir("/dev/shm"))
    others = sorted(p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, os.getpid()))
    ipc = [len(open(f).read().splitlines()) - 1 for f in sorted(glob.glob("/proc/sysvipc/*"))]
    found = False
    with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb", 0) as mem:
        for line in maps:
            span, perms = line.split()[:2]
            if "r" not in perms or "[v" in line:
                continue
            lo, hi = (int(x, 16) for x in span.split("-"))
            try:
                mem.seek(lo)
                data = mem.read(hi - lo)
            except (OSError, OverflowError, ValueError):
                continue
            at = data.find(head)
            while at != -1 and not found:
                found = data[at + len(head):at + len(head) + len(tail)] == tail
                at = data.find(head, at + 1)
    return {"files": [f for f in files if f != "solution.py"], "others": others, "ipc": ipc,
            "stdin": os.read(0, 100).decode(), "found": found}
'''

# (what the earlier program does, its code, the call made to it or None)
LEAVERS = [
    ("leaves files, its secret in memory and a call's argument",
     "import os\nS = 'rrl-secret-7c1f9a'\nopen('/work/a', 'w').write(S)\nopen('/tmp/b', 'w').write(S)\n"
     "os.mkdir('/dev/shm/d'); os.chmod('/dev/shm/d', 0)\nprint(S)\ndef f(x):\n    return [x, S]\n",
     ("f", "rrl-secret-7c1f9a")),
    ("leaves a daemon that outlives it", "import ctypes, os, time\ndef f():\n    if os.fork() == 0:\n"
     "        os.setsid()\n        if os.fork() == 0:\n            time.sleep(60)\n        os._exit(0)\n"
     "    return 1\n", ("f",)),
    ("leaves System V IPC objects", "import ctypes\nlibc = ctypes.CDLL(None)\n"
     "def f():  # (ids count on within one IPC namespace: whether each was made is what compares)\n"
     "    return [libc.shmget(1234, 4096, 0o1666) >= 0, libc.msgget(99, 0o1666) >= 0,\n"
     "            libc.semget(7, 1, 0o1666) >= 0]\n",
     ("f",)),
    ("writes to its stdin", "import os\ndef f():\n    try:\n        return os.write(0, b'rrl-secret-7c1f9a')\n"
     "    except OSError as e:\n        return str(e)\n", ("f",)),
    ("hijacks its serve loop so it never ends", "import _wire, time\n_orig = _wire.read_frame\n"
     "def f():\n    _wire.read_frame = lambda *a, **k: time.sleep(60)\n    return 1\n", ("f",)),
    ("floods its output", "import sys\ndef f():\n    sys.stdout.write('x' * (1 << 20))\n    return 1\n", ("f",)),
    ("spins", "def f():\n    while True:\n        pass\n", ("f",)),
    ("runs out of memory", "def f():\n    return len(bytearray(1 << 30))\n", ("f",)),
    ("fork bomb", "import os\ndef f():\n    while True:\n        try:\n            os.fork()\n"
     "        except OSError:\n            pass\n", ("f",)),
    ("crashes mid-call", "import os\ndef f():\n    os._exit(3)\n", ("f",)),
    ("raises a BaseException of its own", "class E(BaseException):\n    pass\ndef f():\n    print('before')\n"
     "    raise E()\n", ("f",)),
]


def _serve(sb, code, call, hosted):
    """(load report, call result or the error that ended it, the program's result key) for one program."""
    s = sb.serve(code, LIM, hosted=hosted)
    got = None
    if s.loaded and call:
        try:
            got = s.call(*call)
        except RunEnded as e:
            got = ("ended", str(e).split(")")[0])
    r = s.close()
    key = (r.exit_code, r.signal if r.limit is None else None, r.stdout[:200], r.limit, r.stdout_truncated)
    return sorted(s.names), s.load_error, got, key


@pytest.mark.parametrize("what,code,call", LEAVERS, ids=[w for w, _, _ in LEAVERS])
def test_a_hosted_program_gives_what_a_fresh_run_gives_whatever_came_before(level_sb, what, code, call):
    fresh = _serve(level_sb, code, call, hosted=False)
    probe_fresh = _serve(level_sb, PROBE, ("look",), hosted=False)
    assert probe_fresh[2].value == {"files": [], "others": [], "ipc": [0, 0, 0], "stdin": "", "found": False}
    assert _serve(level_sb, PROBE, ("look", True), hosted=True)[2].value["found"] is True
    for _ in range(2):  # the second time round, the host run is one a program has already used
        assert _serve(level_sb, code, call, hosted=True) == fresh, what
        assert _serve(level_sb, PROBE, ("look",), hosted=True) == probe_fresh, what


SIGNALS_PID1 = ("import os, signal\ndef f():\n    out = []\n"
                "    for sig in (signal.SIGTERM, signal.SIGKILL, signal.SIGINT, signal.SIGSTOP):\n"
                "        os.kill(1, sig)\n    try:\n        open('/proc/1/mem', 'rb').read(1)\n"
                "    except OSError as e:\n        return type(e).__name__\n")


def test_a_program_cannot_stop_or_read_the_host_s_pid_1(level_sb):
    """Where a program of its own run is pid 1 itself, a hosted one sees the host's: its signals do nothing
    (pid 1 has no handler for them), its memory is closed (undumpable), and the next program runs as usual."""
    probe_fresh = _serve(level_sb, PROBE, ("look",), hosted=False)
    for _ in range(2):
        names, error, got, key = _serve(level_sb, SIGNALS_PID1, ("f",), hosted=True)
        assert (got.ok, got.value, key[:4]) == (True, "PermissionError", (0, None, "", None))
        assert _serve(level_sb, PROBE, ("look",), hosted=True) == probe_fresh


def test_a_program_s_own_base_exception_ends_it_as_cpython_would_and_never_unwinds_into_the_sandbox(level_sb):
    r = level_sb.run("class E(BaseException):\n    pass\nprint(1)\nraise E('x')\n", "", LIM)
    assert (r.exit_code, r.stdout, r.stderr.splitlines()[-1]) == (1, "1\n", "E: x")
    assert "_zygote.py" not in r.stderr and "_supervise.py" not in r.stderr


def test_programs_of_one_host_run_keep_their_own_output_calls_and_results(sb):
    sessions = [sb.serve(f"print('out {i}')\ndef f(x):\n    return x + {i}\n", LIM, hosted=True) for i in range(1)]
    for i in range(5):
        s = sessions[-1] if i == 0 else sb.serve(f"print('out {i}')\ndef f(x):\n    return x + {i}\n", LIM,
                                                 hosted=True)
        assert [s.call("f", k).value for k in range(3)] == [i, i + 1, i + 2]
        r = s.close()
        assert (r.exit_code, r.stdout, r.limit, r.isolation) == (0, f"out {i}\n", None, sb.report["level"])
    assert sb.run("print(7)", "", LIM).stdout == "7\n"  # a run of another kind ends the host run first
    s = sb.serve("def f():\n    return 2\n", LIM, hosted=True)
    assert s.call("f").value == 2
    s.close()


def test_a_program_that_does_not_load_is_reported_and_the_next_one_runs(sb):
    s = sb.serve("raise ValueError('no')\n", LIM, hosted=True)
    assert not s.loaded and "ValueError: no" in s.load_error
    assert s.close().exit_code == 1
    s = sb.serve("def f():\n    return 5\n", LIM, hosted=True)
    assert s.call("f").value == 5
    s.close()


def test_code_verifier_verdicts_with_a_host_run_are_the_fresh_run_ones(code_verifier):
    tests = {"kind": "assert", "entry_point": "add",
             "code": "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(-1, 1) == 0\n"}
    programs = ["def add(a, b):\n    return a + b\n",
                "import os\ndef add(a, b):\n    open('/work/x', 'w').write('1')\n    return a - b\n",
                "def add(a, b):\n    while True:\n        pass\n",
                "import os\ndef add(a, b):\n    return a + b + len(set(os.listdir('/work')) - {'solution.py'})\n",
                "def add(a, b):\n    return a + b\n"]
    fresh = [code_verifier.verify(p, tests, limits={"wall_s": 1.0}, hosted=False) for p in programs]
    hosted = [code_verifier.verify(p, tests, limits={"wall_s": 1.0}) for p in programs]
    assert [(v.status, v.score, v.detail) for v in hosted] == [(v.status, v.score, v.detail) for v in fresh]
    assert [v.status.name for v in hosted] == ["CORRECT", "INCORRECT", "INCORRECT", "CORRECT", "CORRECT"]
    with pytest.raises(ValueError, match="'hosted' must be True or False"):
        code_verifier.verify(programs[0], tests, hosted="yes")
