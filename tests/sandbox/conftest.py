"""The second net around every sandbox test: an outer cgroup (pids and memory) that the
sandbox's own per-run groups nest under, plus a short per-test timeout.

`level_sb` gives one sandbox per isolation level this machine offers: "full" (the zygote is
root, cgroups bind the runs) and "rootless" (the zygote runs as an unprivileged uid, RUN_AS,
under the system interpreter it can reach, so user namespaces and rlimits are all it has).
Both zygotes are started inside their own net.

The zygote is started while this test process sits in the net group, so the zygote and every
run it forks are charged to the net as well as to their own limits; the test process then
moves back out. If the sandbox's limits ever failed, a fork or memory bomb would hit the net
(256 processes, 2 GiB), not the machine.
"""
from __future__ import annotations

import contextlib
import os
import subprocess

import pytest

from sandboxes import Sandbox
from sandboxes.packages import DEFAULT as DEFAULT_PACKAGES
from sandboxes._cgroup import GROUP, remove_dir

NET = "rrl-test-net-%d" % os.getpid()
CG = "/sys/fs/cgroup"
RUN_AS = 4242  # an unprivileged uid no account on these machines uses
SYSTEM_PYTHON = "/usr/bin/python3"


def _own(controller: str) -> str:
    for line in open("/proc/self/cgroup").read().splitlines():
        _, names, path = line.split(":", 2)
        if controller in names.split(","):
            return os.path.join(CG, controller, path.lstrip("/"))
    raise RuntimeError(f"no {controller} cgroup")


def _put(path: str, value) -> None:
    with open(path, "w") as f:
        f.write(str(value))


@contextlib.contextmanager
def inside_net(tag: str):
    """While inside, this process sits in a fresh net group: what it starts then is charged to the net.
    Yields the net's directories (remove them with `remove_net`)."""
    homes = {c: _own(c) for c in ("pids", "memory")}
    nets = {c: os.path.join(homes[c], f"{NET}-{tag}") for c in homes}
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
        yield nets
    finally:
        for c, home in homes.items():
            _put(os.path.join(home, "cgroup.procs"), os.getpid())


def remove_net(nets: dict) -> None:
    for path in [os.path.join(d, GROUP) for d in nets.values()] + list(nets.values()):
        remove_dir(path, tries=100, delay=0.05)


def _start_in_net(tag: str, **kwargs):
    """Start a zygote inside a fresh net; returns (sandbox, the net's dirs)."""
    with inside_net(tag) as nets:
        sb = Sandbox(**kwargs)
        sb.start()
    return sb, nets


def _remove_net(sb, nets: dict) -> None:
    sb.close()
    remove_net(nets)


@pytest.fixture(scope="session")
def net_sandbox():
    """The full level, with the packages the code verifier offers by default (so every containment test runs with
    numpy and sympy in the root)."""
    sb, nets = _start_in_net("full", packages=DEFAULT_PACKAGES)
    yield sb
    _remove_net(sb, nets)


@pytest.fixture(scope="session")
def rootless_sandbox():
    if os.geteuid() != 0 or not os.path.exists(SYSTEM_PYTHON):
        pytest.skip("needs root (to start a zygote as an unprivileged uid) and a system python3 that uid can run")
    from sandboxes.client import ZYGOTE

    reach = subprocess.run([SYSTEM_PYTHON, "-c", f"open({ZYGOTE!r}).close()"], user=RUN_AS, group=RUN_AS,
                           extra_groups=[], capture_output=True, timeout=60)
    if reach.returncode:
        pytest.skip(f"the checkout is not readable by uid {RUN_AS}: {reach.stderr.decode()[-200:]}")
    sb, nets = _start_in_net("rootless", python=SYSTEM_PYTHON, user=RUN_AS, packages=DEFAULT_PACKAGES)
    if sb.report["level"] != "rootless":
        _remove_net(sb, nets)
        pytest.skip(f"no rootless level here: {sb.report['problems']}")
    yield sb
    _remove_net(sb, nets)


@pytest.fixture(params=["full", "rootless"])
def level_sb(request):
    """One sandbox per isolation level this machine offers (each inside its own net)."""
    return request.getfixturevalue("net_sandbox" if request.param == "full" else "rootless_sandbox")


@pytest.fixture
def sb(net_sandbox):
    return net_sandbox


@pytest.fixture
def code_verifier(net_sandbox, monkeypatch):
    """The `code` verifier, with this process's sandbox being the one inside the net."""
    import verifiers.code as code

    monkeypatch.setitem(code._SANDBOXES, os.getpid(), net_sandbox)
    return code.CodeVerifier()
