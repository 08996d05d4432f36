"""Start-up detection: without root the probe reports level "none", and untrusted code is
refused unless weak isolation is explicitly allowed."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

pytestmark = pytest.mark.timeout(120)

PROBE = """
from sandboxes import IsolationError, Sandbox
try:
    Sandbox().start()
    print("ran-without-permission")
except IsolationError as e:
    print("refused", "not running as root" in str(e))
sb = Sandbox(allow_weak=True)
r = sb.run("print(6 * 7)")
print(sb.isolation, r.stdout.strip(), r.isolation)
sb.close()
"""


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv") or not os.path.exists("/usr/bin/python3"),
                    reason="needs root, setpriv and a system python3 to impersonate an unprivileged user")
def test_unprivileged_caller_is_refused_unless_weak_isolation_is_allowed(root):
    out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c",
                          PROBE], cwd="/", env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, timeout=90)
    assert out.stdout.split() == ["refused", "True", "none", "42", "none"], out.stderr[-2000:]


def test_weak_isolation_can_be_allowed_by_environment(monkeypatch):
    from sandboxes import Sandbox

    monkeypatch.setenv("REASONING_RL_ALLOW_WEAK_SANDBOX", "1")
    assert Sandbox().allow_weak is True
    monkeypatch.delenv("REASONING_RL_ALLOW_WEAK_SANDBOX")
    assert Sandbox().allow_weak is False
