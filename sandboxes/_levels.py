"""Which isolation level this host gives, found by trying it: the zygote's one-time set-up.

Levels, strongest first (`detect()` sets up the best one in the calling zygote and reports it):

  * full: the zygote is root. Runs get fresh user, pid, mount, net, ipc, uts and cgroup
    namespaces, host uid 65534 with no capabilities, and cgroups (v1, or a delegated v2
    subtree) bound memory (+swap), processes and CPU time of the whole run.
  * rootless: the zygote is not root (or is root without a writable cgroup, or root without
    CAP_SYS_ADMIN as in a container, which first drops to uid 65534). It first enters
    a user namespace of its own; runs get the same namespaces inside it, and the program is
    uid 65534 of one more user namespace (its host uid: the caller's, or 65534 for root). Limits
    come from rlimits, each per process: data segment (memory_mb), address space, CPU time,
    file size, open files, and the process count (RLIMIT_NPROC, which the kernel counts per
    user namespace, so per run); a delegated cgroup v2 subtree, when given, adds the
    whole-run limits of the full level. Without one, what is not bound in total is written
    down in `BOUNDS` and in the report.
  * none: no namespaces (they are unavailable). The program runs in a scratch directory with
    rlimits and, under root, as uid 65534, and can read what that uid can read, see host
    processes and use the network. The sandbox refuses this level unless weak isolation is
    explicitly allowed.

A seccomp filter (`_seccomp.py`) is added at full and rootless where the host allows one.
Standard library only; loaded by the zygote.
"""
from __future__ import annotations

import os

import _cgroup
import _isolate
import _seccomp

ROOT = "/tmp/root"  # inside the zygote's private mount namespace only

CONTAINS = {
    "full": "namespaces (user, pid, mount, net, ipc, uts, cgroup); host uid 65534, no capabilities; read-only root "
            "with private size-capped tmpfs; no network; memory, processes and CPU of the whole run bound by cgroups",
    "rootless": "the full level's namespaces inside a user namespace of the caller's uid; uid 65534 there, no "
                "capabilities; read-only root with private size-capped tmpfs; no network; per-process rlimits "
                "(data, address space, CPU, file size, open files) and a per-run process count",
    "none": "a scratch directory and per-process rlimits only: host files, processes and network are reachable",
}
LACKS = {  # what each level does not contain
    "full": "kernel bugs in the syscalls the filter allows; timing and cache side channels",
    "rootless": "kernel bugs in the syscalls the filter allows; side channels; memory and CPU in total across the "
                "run's processes (bounded per process only: see `bounds`); the program's host uid is the caller's",
    "none": "nearly everything: the program can read what its uid can read, see host processes, use the network",
}
BOUNDS = {  # what a level without cgroups bounds only per process, and the total that follows
    "memory": "memory_mb per process (RLIMIT_DATA), so at most processes x memory_mb in all, plus 3 x disk_mb of tmpfs",
    "cpu": "cpu_s per process (RLIMIT_CPU), so at most processes x cpu_s in all, and never past the wall clock",
}


def _probe(owner: int, rootless: bool) -> int:
    """Fork a fresh isolated child as the real runs get: 0 (ok), 10 (ok, but no seccomp), else failed."""
    outer = os.fork()
    if outer == 0:  # the pid namespace is unshared here, never in the zygote itself
        try:
            _isolate.unshare(_isolate.CLONE_NEWPID)
            pid = os.fork()
            if pid == 0:
                try:
                    _isolate.enter_run(ROOT, 1, owner=owner)
                    _isolate.become_nobody(rootless)
                    if os.getuid() != _isolate.NOBODY or os.path.exists("/.old/etc"):
                        os._exit(2)
                    try:
                        _seccomp.install()
                    except OSError:
                        os._exit(10)
                    os._exit(0)
                except OSError:
                    os._exit(3)
            os._exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
        except OSError:
            os._exit(4)
    return os.waitstatus_to_exitcode(os.waitpid(outer, 0)[1])


def _enter_namespaces(root: bool, prefix: str, report: dict, packages: dict | None = None) -> bool:
    """Build the read-only root in a mount namespace of the zygote's own (and a user namespace without root)."""
    site_fd = None
    try:
        if root:
            _isolate.unshare(_isolate.CLONE_NEWNS)
        else:
            _isolate.enter_user_namespace(os.getuid(), os.getgid())
        if packages:  # held open: an environment under /tmp stays reachable once our own /tmp covers it
            site_fd = os.open(packages["site"], os.O_PATH | os.O_DIRECTORY)
            packages = {**packages, "site": f"/proc/self/fd/{site_fd}"}
        _isolate.mount(None, "/", None, _isolate.MS_REC | _isolate.MS_PRIVATE)
        _isolate.mount("tmpfs", "/tmp", "tmpfs", _isolate.MS_NOSUID | _isolate.MS_NODEV, "size=8m")  # ours only
        _isolate.build_root(ROOT, prefix, packages)
        return True
    except OSError as e:
        report["problems"].append(f"namespaces unavailable: {e}" + ("" if root else (
            " (unprivileged user namespaces may be disabled: kernel.unprivileged_userns_clone, "
            "user.max_user_namespaces, an AppArmor or container seccomp policy)")))
        return False
    finally:
        if site_fd is not None:
            os.close(site_fd)


def _package_links(packages: dict) -> str:
    """Level none has no root of its own: a folder of links to the declared entries stands in for PKG_DIR."""
    import tempfile

    farm = tempfile.mkdtemp(prefix="rrl-sandbox-pkgs-")
    os.chmod(farm, 0o755)
    for entry in packages["entries"]:
        os.symlink(os.path.join(packages["site"], entry), os.path.join(farm, entry))
    return farm


def detect(prefix: str, packages: dict | None = None) -> tuple[dict, "_cgroup.Cgroups | None"]:
    """Set up the best level this process can have and report it (the probe forks a real isolated child).
    `packages` (see `_isolate.build_root`) are bound into the root; `report["packages_path"]` is where runs find
    them (None without packages)."""
    root = os.geteuid() == 0
    report = {"root": root, "uid": os.geteuid(), "level": "none", "limits": "rlimits", "seccomp": False,
              "namespaces": False, "problems": [], "notes": []}
    found: list = []
    cgroups = _cgroup.find(found, os.getpid())
    entered = _enter_namespaces(root, prefix, report, packages)
    if root and not entered:  # root without CAP_SYS_ADMIN (a container): as nobody, through a user namespace
        os.setgroups([])
        os.setresgid(_isolate.NOBODY, _isolate.NOBODY, _isolate.NOBODY)
        os.setresuid(_isolate.NOBODY, _isolate.NOBODY, _isolate.NOBODY)
        _isolate.prctl(_isolate.PR_SET_DUMPABLE, 1)  # else /proc/self is root's and our own maps unwritable
        if cgroups is not None:
            cgroups.close()
        root, cgroups = False, None
        report.update(root=False, uid=os.geteuid())
        report["notes"].append("root without the capability to build namespaces: the zygote dropped to uid 65534 "
                               "and tried a user namespace")
        entered = _enter_namespaces(root, prefix, report, packages)
    if entered:
        status = _probe(_isolate.NOBODY if root else 0, not root)
        report["namespaces"] = status in (0, 10)
        report["seccomp"] = status == 0
        if status == 10:
            report["notes"].append(f"seccomp filter unavailable here ({_seccomp.available() or 'prctl refused it'})")
        elif status:
            report["problems"].append(f"isolated probe child failed (status {status})")
    if report["namespaces"]:
        report["level"] = "full" if root and cgroups else "rootless"
    if not root:  # what keeps this host from the full level
        report["problems"].append("not running as root: the full level needs root")
    if cgroups is None:
        report["problems"] += found
    if cgroups is not None and report["level"] != "none":
        report["limits"] = cgroups.kind
    elif cgroups is not None:
        cgroups.close()
        cgroups = None
    report["contains"], report["lacks"] = CONTAINS[report["level"]], LACKS[report["level"]]
    report["packages_path"] = None
    if packages:
        report["packages_path"] = _isolate.PKG_DIR if report["level"] != "none" else _package_links(packages)
    if report["limits"] == "rlimits" and report["level"] != "full":
        report["bounds"] = dict(BOUNDS)
    return report, cgroups
