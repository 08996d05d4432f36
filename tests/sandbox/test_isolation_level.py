"""Start-up detection, as the users who are not root meet it: an unprivileged caller gets the
rootless level (user namespaces) and its programs run; a host without namespaces (here: the
caller already under a seccomp filter that denies them, as a container runtime's default
profile does) is refused with a line saying what is missing, unless weak isolation is allowed."""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

pytestmark = pytest.mark.timeout(120)
NEEDS = pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv") or not os.path.exists("/usr/bin/python3"),
                           reason="needs root, setpriv and a system python3 to impersonate an unprivileged user")

PROBE = """
import ctypes, json, sys
from sandboxes import IsolationError, Sandbox
if sys.argv[1] == "no-namespaces":
    from sandboxes import _seccomp
    ctypes.CDLL(None).prctl(38, 1, 0, 0, 0)   # no_new_privs, then a filter that denies unshare
    _seccomp.install()
import sandboxes
out = {"probe": sandboxes.probe()}
try:
    sb = Sandbox()
    out["level"] = sb.start()["level"]
    r = sb.run("import os; print(6 * 7, os.getuid())")
    out["run"] = [r.stdout.strip(), r.isolation, r.limits_by]
    sb.close()
except IsolationError as e:
    out["refused"] = str(e)
    sb = Sandbox(allow_weak=True)
    r = sb.run("print(6 * 7)")
    out["weak"] = [sb.isolation, r.stdout.strip(), r.isolation]
    s = sb.serve("def f():\\n    return 6 * 7\\n", hosted=True)  # no pid namespace to clear: a fresh run
    out["weak_hosted"] = [s.call("f").value, s.close().isolation, sb._host is None]
    sb.close()
print(json.dumps(out))
"""


def as_nobody(root, *args) -> dict:
    out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c",
                          PROBE, *args], cwd="/", env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=90)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout)


@NEEDS
def test_unprivileged_caller_gets_the_rootless_level(root):
    out = as_nobody(root, "plain")
    assert out["level"] == "rootless" and out["probe"]["limits"] == "rlimits" and out["probe"]["seccomp"] is True
    assert "processes x memory_mb" in out["probe"]["bounds"]["memory"]
    assert "in total across the run's processes" in out["probe"]["lacks"]
    assert out["run"] == ["42 65534", "rootless", "rlimits"]


@NEEDS
def test_host_without_namespaces_is_refused_with_what_is_missing_unless_weak_is_allowed(root):
    out = as_nobody(root, "no-namespaces")
    assert "namespaces unavailable" in out["refused"] and "user.max_user_namespaces" in out["refused"]
    assert "allow_weak=True" in out["refused"]
    assert out["weak"] == ["none", "42", "none"]
    assert out["weak_hosted"] == [42, "none", True]


def test_weak_isolation_can_be_allowed_by_environment(monkeypatch):
    from sandboxes import Sandbox

    monkeypatch.setenv("REASONING_RL_ALLOW_WEAK_SANDBOX", "1")
    assert Sandbox().allow_weak is True
    monkeypatch.delenv("REASONING_RL_ALLOW_WEAK_SANDBOX")
    assert Sandbox().allow_weak is False


def test_a_delegated_cgroup_v2_without_controllers_is_reported_not_used(root, monkeypatch, tmp_path):
    """The v2 path, as far as this v1 host lets it run: a v2 directory lacking the controllers is named as such."""
    from sandboxes import _cgroup

    unified = "/sys/fs/cgroup/unified"
    if not os.path.isfile(os.path.join(unified, "cgroup.controllers")):
        pytest.skip("no cgroup v2 hierarchy mounted here")
    monkeypatch.setattr(_cgroup, "_find_v1", lambda problems: None)
    monkeypatch.setenv(_cgroup.V2_ENV, unified)
    problems: list = []
    assert _cgroup.find(problems, os.getpid()) is None
    assert problems == [f"cgroup v2 at {unified} lacks the memory, pids controllers"]
    monkeypatch.setenv(_cgroup.V2_ENV, str(tmp_path))
    problems = []
    assert _cgroup.find(problems, os.getpid()) is None and "is not a cgroup v2 directory" in problems[0]


@NEEDS
def test_root_without_cap_sys_admin_drops_to_nobody_and_gets_the_rootless_level(root):
    """A container's root: no CAP_SYS_ADMIN (bounding set without it), so no namespaces as root."""
    script = PROBE.replace('if sys.argv[1] == "no-namespaces":', 'if False:')
    out = subprocess.run(["setpriv", "--bounding-set", "-sys_admin", "/usr/bin/python3", "-c", script, "plain"],
                         cwd="/", env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}, capture_output=True,
                         text=True, timeout=90)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout)
    assert got["level"] == "rootless" and got["run"] == ["42 65534", "rootless", "rlimits"]
