"""The second net around every sandbox test: an outer cgroup (pids and memory) that the
sandbox's own per-run groups nest under, plus a short per-test timeout.

The zygote is started while this test process sits in the net group, so the zygote and every
run it forks are charged to the net as well as to their own limits; the test process then
moves back out. If the sandbox's limits ever failed, a fork or memory bomb would hit the net
(256 processes, 2 GiB), not the machine.
"""
from __future__ import annotations

import os

import pytest

from sandboxes import Sandbox
from sandboxes._cgroup import GROUP, remove_dir

NET = "rrl-test-net-%d" % os.getpid()
CG = "/sys/fs/cgroup"


def _own(controller: str) -> str:
    for line in open("/proc/self/cgroup").read().splitlines():
        _, names, path = line.split(":", 2)
        if controller in names.split(","):
            return os.path.join(CG, controller, path.lstrip("/"))
    raise RuntimeError(f"no {controller} cgroup")


def _put(path: str, value) -> None:
    with open(path, "w") as f:
        f.write(str(value))


@pytest.fixture(scope="session")
def net_sandbox():
    homes = {c: _own(c) for c in ("pids", "memory")}
    nets = {c: os.path.join(homes[c], NET) for c in homes}
    try:
        for path in nets.values():
            os.makedirs(path, exist_ok=True)
        _put(os.path.join(nets["pids"], "pids.max"), 256)
        _put(os.path.join(nets["memory"], "memory.limit_in_bytes"), 2 << 30)
    except OSError as e:
        pytest.skip(f"cannot build the test's safety-net cgroup here: {e}")
    for c, path in nets.items():
        _put(os.path.join(path, "cgroup.procs"), os.getpid())
    try:
        sb = Sandbox()
        sb.start()
    finally:
        for c, home in homes.items():
            _put(os.path.join(home, "cgroup.procs"), os.getpid())
    yield sb
    sb.close()
    for path in [os.path.join(d, GROUP) for d in nets.values()] + list(nets.values()):
        remove_dir(path, tries=100, delay=0.05)


@pytest.fixture
def sb(net_sandbox):
    return net_sandbox


@pytest.fixture
def code_verifier(net_sandbox, monkeypatch):
    """The `code` verifier, with this process's sandbox being the one inside the net."""
    import verifiers.code as code

    monkeypatch.setitem(code._SANDBOXES, os.getpid(), net_sandbox)
    return code.CodeVerifier()
