"""Adversarial programs, one property per test: every one stays inside its limits, harms
nothing outside, leaves nothing behind. Each runs at every isolation level this machine
offers (`level_sb`: full as root with cgroups, rootless as an unprivileged uid with rlimits),
each in the safety net of conftest.py. Where the rootless level bounds something only per
process (memory, CPU), the test checks the bound it does give: processes x the per-process limit."""
from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(60)
TIGHT = {"wall_s": 2.0, "cpu_s": 1.0, "memory_mb": 128, "processes": 32}


@pytest.fixture
def sb(level_sb):
    return level_sb


def cgroups(sb) -> bool:
    return sb.report["limits"] != "rlimits"


def run(sb, code, stdin="", **limits):
    r = sb.run(code, stdin, {**TIGHT, **limits})
    assert r.leftover_processes == 0 or r.limit is not None or r.exit_code is not None
    return r


def comm_names() -> set[str]:
    names = set()
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                names.add(Path(f"/proc/{pid}/comm").read_text().strip())
            except OSError:
                pass
    return names


# -- time ----------------------------------------------------------------------------------
def test_infinite_loop_hits_cpu_limit(sb):
    r = run(sb, "while True: pass")
    assert r.limit == "cpu" and r.exit_code is None and 0.9 <= r.cpu_s < 1.6


def test_cpu_spin_in_many_threads_is_charged_in_total(sb):
    code = "import threading\ndef spin():\n    while True: pass\nfor _ in range(8): threading.Thread(target=spin).start()"
    r = run(sb, code, wall_s=5.0)
    assert r.limit == "cpu" and r.wall_s < 4.5  # 8 threads share one CPU budget (2 cores burn it in ~0.5 s idle)


def test_sleep_forever_hits_wall_limit(sb):
    r = run(sb, "import time\ntime.sleep(10**6)", wall_s=1.0)
    assert r.limit == "wall" and 1.0 <= r.wall_s < 2.5 and r.cpu_s < 0.5


def test_ignoring_sigterm_does_not_help(sb):
    r = run(sb, "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(60)", wall_s=1.0)
    assert r.limit == "wall" and r.signal == signal.SIGKILL


def test_big_int_bomb_is_stopped(sb):
    r = run(sb, "x = 10 ** 10 ** 10\nprint(x)")
    assert r.limit in ("cpu", "wall") and not r.ok


def test_recursion_bomb_dies_without_passing(sb):
    r = run(sb, "import sys\nsys.setrecursionlimit(10**9)\ndef f(n): return f(n + 1)\nf(0)")
    assert not r.ok and r.exit_code != 0


# -- processes -----------------------------------------------------------------------------
def test_fork_bomb_is_capped_and_cleaned_up(sb):
    r = run(sb, "import os\nwhile True:\n    try: os.fork()\n    except OSError: pass", wall_s=2.0)
    assert not r.ok and r.limit in ("processes", "wall", "cpu")
    assert r.leftover_processes <= TIGHT["processes"]  # it hit the cgroup's cap, and they were all killed
    assert sb.run("print('alive')").stdout == "alive\n"  # the sandbox still works


def test_double_forked_and_setsid_daemons_die_with_the_run(sb):
    code = """
import ctypes, os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        ctypes.CDLL(None).prctl(15, b"rrl-daemon-x7", 0, 0, 0)   # PR_SET_NAME
        while True: time.sleep(0.1)
    os._exit(0)
time.sleep(0.3)
print("parent done")
"""
    r = run(sb, code)
    assert r.ok and r.stdout == "parent done\n"
    time.sleep(0.2)
    assert "rrl-daemon-x7" not in comm_names()


def test_cannot_kill_or_stop_host_processes(sb):
    me = os.getpid()
    code = f"""
import os, signal
for target in ({me}, os.getppid(), 1, -1):
    for sig in (signal.SIGSTOP, signal.SIGKILL):
        try: os.kill(target, sig)
        except OSError as e: print(target, type(e).__name__)
print(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))
"""
    r = run(sb, code)
    assert os.getpid() == me  # still here: the test itself was a target
    assert r.stdout.splitlines()[-1] == "[1]"  # the run sees only itself
    assert sb.run("print(2)").stdout == "2\n"


# -- memory --------------------------------------------------------------------------------
def test_one_huge_allocation_is_a_memory_limit(sb):
    r = run(sb, "x = bytearray(1 << 30)\nprint(len(x))")
    assert r.limit == "memory" and not r.ok


def test_gradual_growth_is_a_memory_limit(sb):
    r = run(sb, "chunks = []\nwhile True: chunks.append(bytearray(1 << 20))", wall_s=5.0, cpu_s=5.0)
    slack = 0 if cgroups(sb) else 32 << 20  # rlimits bound the data segment; resident also counts mapped files
    assert r.limit == "memory" and r.peak_memory_bytes <= (128 << 20) + slack


def test_memory_across_many_processes_is_capped_in_total(sb):
    if not cgroups(sb):
        pytest.skip("without cgroups the total is bounded as processes x memory_mb: see the next test")
    code = """
import os, time
for _ in range(8):
    if os.fork() == 0:
        x = bytearray(40 << 20)   # 8 x 40 MiB > 128 MiB for the whole run
        for i in range(0, len(x), 4096): x[i] = 1
        time.sleep(5); os._exit(0)
time.sleep(5)
"""
    r = run(sb, code, wall_s=3.0)
    assert r.peak_memory_bytes <= 128 << 20 and r.limit in ("memory", "wall")


def test_memory_is_bounded_by_processes_times_the_per_process_limit(sb):
    """Every process is held to memory_mb and there are at most `processes` of them."""
    code = """
import os, sys, time
children = 0
for _ in range(8):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        try:
            x = bytearray(200 << 20)   # over the 128 MiB each process may have
            os._exit(7)
        except MemoryError:
            os._exit(3)
    children += 1
codes = [os.waitstatus_to_exitcode(os.wait()[1]) for _ in range(children)]
print(children, sorted(set(codes)))
"""
    r = run(sb, code, processes=4, wall_s=5.0)
    forks, codes = r.stdout.split(" ", 1)
    assert int(forks) <= 3 and 7 not in eval(codes), r  # 4 processes in all; not one got its 200 MiB


def test_cpu_across_forked_spinners_is_a_cpu_limit(sb):
    code = """
import os
for _ in range(4):
    if os.fork() == 0:
        while True: pass
for _ in range(4): os.wait()
print("all children ended")
"""
    r = run(sb, code, wall_s=6.0, cpu_s=1.0)
    assert r.limit == "cpu" and not r.ok  # each spinner is held to 1 s (or the run's total is, with cgroups)
    assert r.wall_s < 5.5


# -- output and disk -----------------------------------------------------------------------
@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_a_gigabyte_of_output_is_cut_off(sb, stream):
    code = f"import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(1024): sys.{stream}.write(chunk)"
    r = run(sb, code, output_bytes=1 << 20, wall_s=5.0, cpu_s=5.0)
    assert r.limit == "output" and getattr(r, f"{stream}_truncated")
    assert len(getattr(r, stream)) <= 1 << 20


def test_disk_fill_stops_at_the_scratch_quota(sb):
    code = "with open('fill', 'wb') as f:\n    while True: f.write(b'x' * (1 << 20))"
    r = run(sb, code, disk_mb=8, file_size_mb=64, memory_mb=256)
    assert not r.ok and r.limit == "disk"


def test_file_size_limit(sb):
    r = run(sb, "open('big', 'wb').write(b'x' * (8 << 20))", file_size_mb=1)
    assert not r.ok and r.limit == "file_size"


# -- file system ---------------------------------------------------------------------------
def test_writes_outside_the_scratch_directory_fail(sb, root, tmp_path):
    targets = ["/root/pwned", str(root / "pwned"), "/usr/pwned", "/etc/pwned", str(tmp_path / "pwned"),
               "/work/main/pwned"]
    code = "import sys\nfor p in sys.argv[1:] or %r:\n    try:\n        open(p, 'w').write('x'); print('wrote', p)\n" \
           "    except OSError as e: print('no', p, e.errno)" % (targets,)
    r = run(sb, code)
    assert r.ok
    for t in targets:
        assert not Path(t).exists()
    assert "wrote /tmp" not in r.stdout
    for line in r.stdout.splitlines():
        if line.startswith("wrote"):  # allowed only where the run's private tmpfs is mounted
            assert line.split()[1].startswith(("/work/", "/tmp/"))


def test_host_tmp_is_not_the_runs_tmp(sb):
    marker = Path("/tmp/rrl-host-marker-%d" % os.getpid())
    marker.write_text("host")
    try:
        r = run(sb, f"import os\nprint(os.path.exists({str(marker)!r}))\nopen('/tmp/from-run', 'w').write('x')")
        assert r.stdout == "False\n" and not Path("/tmp/from-run").exists()
    finally:
        marker.unlink()


def test_no_cross_run_contamination(sb):
    first = ("import os\nfor d in ('/work', '/tmp', '/dev/shm'): open(os.path.join(d, 'left'), 'w').write('x')\n"
             "os.environ['LEFT'] = '1'")
    assert run(sb, first).ok
    second = ("import os\nprint([os.path.exists(os.path.join(d, 'left')) for d in ('/work', '/tmp', '/dev/shm')],"
              " sorted(os.listdir('/work')), os.environ.get('LEFT'))")
    assert run(sb, second).stdout == "[False, False, False] ['solution.py'] None\n"


# -- secrets -------------------------------------------------------------------------------
def test_secrets_are_out_of_reach(sb, monkeypatch):
    monkeypatch.setenv("RRL_TEST_SECRET", "hunter2-secret")
    code = """
import os, glob
print(dict(os.environ))
for p in ('/etc/shadow', '/root/.ssh', os.path.expanduser('~/.ssh'), '/root'):
    try:
        print(p, os.listdir(p) if os.path.isdir(p) else open(p).read())
    except OSError as e:
        print(p, 'denied', e.errno)
for p in glob.glob('/proc/[0-9]*/environ') + glob.glob('/proc/[0-9]*/cmdline'):
    try: print(p, open(p, 'rb').read())
    except OSError as e: print(p, 'denied')
print(os.getuid(), os.geteuid(), open('/proc/self/status').read().split('CapEff:')[1].split()[0])
"""
    r = run(sb, code)
    assert r.ok
    assert "hunter2" not in r.stdout and "RRL_TEST_SECRET" not in r.stdout
    assert "pytest" not in r.stdout  # no host process's cmdline is visible
    assert "root:" not in r.stdout
    assert r.stdout.splitlines()[-1] == "65534 65534 0000000000000000"


def test_ctypes_cannot_regain_privileges(sb):
    code = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
print(libc.setuid(0), libc.mount(b"none", b"/usr", b"tmpfs", 0, None), libc.unshare(0x20000), libc.chroot(b"/"))
print(os.getuid())
"""
    r = run(sb, code)
    assert r.stdout.splitlines() == ["-1 -1 -1 -1", "65534"]


# -- network -------------------------------------------------------------------------------
def test_no_network_to_host_loopback_or_dns(sb):
    tcp = socket.socket()
    tcp.bind(("127.0.0.1", 0))
    tcp.listen()
    tcp.settimeout(0.1)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.settimeout(0.1)
    got = []

    def listen():
        for s in (tcp, udp):
            try:
                got.append(s.accept() if s is tcp else s.recvfrom(100))
            except OSError:
                pass
    code = f"""
import socket
for fam, kind, port in ((socket.AF_INET, socket.SOCK_STREAM, {tcp.getsockname()[1]}),
                        (socket.AF_INET, socket.SOCK_DGRAM, {udp.getsockname()[1]})):
    s = socket.socket(fam, kind); s.settimeout(0.5)
    try:
        s.connect(('127.0.0.1', port)); s.send(b'leak'); print('sent')
    except OSError as e: print('blocked', e.errno)
try: print(socket.getaddrinfo('pypi.org', 443))
except OSError as e: print('dns blocked')
"""
    r = run(sb, code)
    listen()
    tcp.close()
    udp.close()
    assert got == [] and "dns blocked" in r.stdout and "sent" not in r.stdout


def test_other_users_files_are_unreadable(sb):
    secret = Path("/usr/local/lib/rrl-test-secret-%d" % os.getpid())  # inside the read-only root's /usr
    secret.write_text("hunter2-secret")
    secret.chmod(0o600)
    try:
        r = run(sb, f"try: print(open({str(secret)!r}).read())\nexcept OSError as e: print('denied', e.errno)")
    finally:
        secret.unlink()
    assert r.stdout == "denied 13\n"


def test_isolation_report_names_the_level_and_what_it_contains(sb, level_sb, request):
    level = request.node.callspec.params["level_sb"]
    assert sb.report["level"] == level and sb.isolation == level
    assert sb.report["limits"] == ("cgroup-v1" if level == "full" else "rlimits")
    assert sb.report["seccomp"] is True and sb.report["contains"]
    r = run(sb, "print(open('/proc/self/status').read().split('Seccomp:')[1].split()[0])")
    assert (r.isolation, r.limits_by, r.seccomp, r.stdout) == (level, sb.report["limits"], True, "2\n")


def test_seccomp_denies_namespace_and_kernel_calls(sb):
    code = """
import ctypes, errno
libc = ctypes.CDLL(None, use_errno=True)
out = []
for name, call in (("unshare", lambda: libc.unshare(0x10000000)), ("setns", lambda: libc.setns(0, 0)),
                   ("ptrace", lambda: libc.ptrace(0, 0, None, None)), ("bpf", lambda: libc.syscall(321, 0, 0, 0)),
                   ("keyctl", lambda: libc.syscall(250, 0, 0, 0)), ("perf", lambda: libc.syscall(298, 0, 0, 0, 0, 0)),
                   ("clone-newuser", lambda: libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0))):
    rc = call(); out.append(f"{name}={rc}/{errno.errorcode.get(ctypes.get_errno())}")
print(" ".join(out))
"""
    r = run(sb, code)
    assert r.ok, r.stderr
    assert all(part.endswith("=-1/EPERM") for part in r.stdout.split()), r.stdout


def test_concurrent_runs_from_threads_are_independent():
    from sandboxes import SandboxPool

    with SandboxPool(workers=2, limits=TIGHT) as pool:
        results = pool.run_many([(f"print({i} * 2)", "") for i in range(12)])
    assert [r.stdout for r in results] == [f"{i * 2}\n" for i in range(12)]
