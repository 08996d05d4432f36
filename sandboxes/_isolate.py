"""Linux isolation primitives for the sandbox, through raw syscalls (ctypes on libc).

Standard library only and import-light: this module is loaded by the zygote, a bare
`python -I -S` process, and stays in memory in every sandboxed child it forks.

What it does:
  * `build_root(dir, python_prefix)`: once per zygote, in the zygote's private mount
    namespace, a read-only root file system: /usr (and the /bin, /lib, /sbin links), the
    interpreter's prefix, a minimal /etc (passwd, group, hosts: no shadow, no resolv.conf),
    /dev/{null,zero,random,urandom}, and empty mount points for /proc, /tmp, /dev/shm, /work.
  * `enter_run(root, ...)`: in a child that is already pid 1 of a fresh pid namespace,
    unshare mount/ipc/uts/net namespaces, mount fresh size-capped tmpfs on /work, /tmp and
    /dev/shm and a new /proc, pivot into the root and detach the host's file system, set the
    host name, then drop to uid/gid 65534 inside a new user namespace with every capability
    and the bounding set dropped and `no_new_privs` set.

  * `enter_user_namespace(uid, gid)`: for a caller without root, a user namespace (plus a
    mount namespace it owns) in which it is uid 0 with capabilities over its own namespaces
    only: everything above then works the same, and `become_nobody(rootless=True)` maps the
    program to uid 65534 of one more user namespace on top (host uid: the caller's).

Mounts copied from the host keep their locked flags (nosuid, nodev, noexec, atime): a
read-only remount restates them, as the kernel requires inside a user namespace.
Seccomp lives in `_seccomp.py`; limits (cgroups, rlimits) are the zygote's business.
"""
from __future__ import annotations

import ctypes
import os
import platform

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC = 0x00020000, 0x02000000, 0x04000000, 0x08000000
CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 4, 24, 38
SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}.get(platform.machine())
NOBODY = 65534

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
_libc.syscall.argtypes = [ctypes.c_long, ctypes.c_char_p, ctypes.c_char_p]


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), f"unshare({flags:#x})")


def mount(source: str | None, target: str, fstype: str | None, flags: int = 0, data: str | None = None) -> None:
    enc = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(_libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)), f"mount {target}")


def umount(target: str, flags: int = 0) -> None:
    _check(_libc.umount2(target.encode(), flags), f"umount {target}")


def prctl(option: int, arg: int = 0) -> None:
    _check(_libc.prctl(option, arg, 0, 0, 0), f"prctl({option})")


def pivot_root(new_root: str, put_old: str) -> None:
    if SYS_PIVOT_ROOT is None:
        raise OSError(f"pivot_root: unsupported architecture {platform.machine()!r}")
    _check(_libc.syscall(SYS_PIVOT_ROOT, new_root.encode(), put_old.encode()), "pivot_root")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def drop_all_capabilities() -> None:
    """Empty the bounding set, then the effective/permitted/inheritable sets, then no_new_privs."""
    for cap in range(64):
        if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == 22:  # EINVAL: past last cap
            break
    header = _CapHeader(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
    data = (_CapData * 2)()
    _check(_libc.capset(ctypes.byref(header), data), "capset")
    prctl(PR_SET_NO_NEW_PRIVS, 1)


def _write(path: str, text: str, mode: int = 0o644) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


_LOCKED = ((os.ST_NOEXEC, MS_NOEXEC), (os.ST_NOATIME, 1024), (os.ST_NODIRATIME, 2048), (os.ST_RELATIME, 1 << 21))


def _bind_ro(source: str, target: str) -> None:
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        _write(target, "")
    mount(source, target, None, MS_BIND | MS_REC)
    have = os.statvfs(source).f_flag
    kept = sum(ms for st, ms in _LOCKED if have & st)  # a user namespace may not clear these
    mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | kept)


SYSTEM_DIRS = ("usr", "bin", "lib", "lib64", "lib32", "sbin")
DEVICES = ("null", "zero", "random", "urandom")
MOUNT_POINTS = ("proc", "tmp", "work", "dev/shm", ".old")
PKG_DIR = "/pkgs"  # the declared third-party packages, read-only (packages.py)


def build_root(root: str, python_prefix: str, packages: dict | None = None) -> None:
    """Assemble the read-only root under `root` (caller is root in its own private mount ns). `packages`:
    {"site": a site-packages folder, "entries": its top-level names to bind read-only under PKG_DIR}."""
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    os.makedirs(root, exist_ok=True)
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "size=4m,mode=0755")
    for name in SYSTEM_DIRS:
        host = "/" + name
        if os.path.islink(host):
            os.symlink(os.readlink(host), os.path.join(root, name))
        elif os.path.isdir(host):
            _bind_ro(host, os.path.join(root, name))
    prefix = os.path.realpath(python_prefix)
    if not any(prefix == "/" + d or prefix.startswith("/" + d + "/") for d in SYSTEM_DIRS):
        _bind_ro(prefix, root + prefix)
        path = root
        for part in prefix.strip("/").split("/")[:-1]:  # intermediate dirs traversable (host /root is 0700)
            path = os.path.join(path, part)
            os.chmod(path, 0o755)
    if packages:
        os.makedirs(root + PKG_DIR, mode=0o755)
        for entry in packages["entries"]:
            _bind_ro(os.path.join(packages["site"], entry), os.path.join(root + PKG_DIR, entry))
    os.makedirs(os.path.join(root, "etc"), mode=0o755)
    _write(os.path.join(root, "etc/passwd"), f"root:x:0:0::/:/usr/sbin/nologin\n"
                                             f"sandbox:x:{NOBODY}:{NOBODY}::/work:/usr/sbin/nologin\n")
    _write(os.path.join(root, "etc/group"), f"root:x:0:\nsandbox:x:{NOBODY}:\n")
    _write(os.path.join(root, "etc/hosts"), "127.0.0.1 localhost\n")
    os.makedirs(os.path.join(root, "dev"), mode=0o755)
    for dev in DEVICES:
        _write(os.path.join(root, "dev", dev), "")
        mount("/dev/" + dev, os.path.join(root, "dev", dev), None, MS_BIND)
    os.symlink("/proc/self/fd", os.path.join(root, "dev/fd"))
    for point in MOUNT_POINTS:
        os.makedirs(os.path.join(root, point), mode=0o755, exist_ok=True)
    mount(None, root, None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def enter_user_namespace(uid: int, gid: int) -> None:
    """Become uid/gid 0 of a new user namespace (host ids `uid`/`gid`) with a mount namespace of its own."""
    unshare(CLONE_NEWUSER | CLONE_NEWNS)
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"0 {uid} 1\n")
    _write("/proc/self/gid_map", f"0 {gid} 1\n")


def enter_run(root: str, disk_mb: int, hostname: str = "sandbox", owner: int = NOBODY) -> None:
    """Called in pid 1 of a fresh pid namespace, as (namespace) root: isolate and pivot into `root`.

    owner: the uid owning the run's tmpfs, as this namespace numbers it (NOBODY as host root; 0 in a
    rootless zygote's namespace, which `become_nobody(rootless=True)` then shows as 65534)."""
    unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET | CLONE_NEWCGROUP)
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    opts = f"size={int(disk_mb)}m,mode=1777,uid={owner},gid={owner}"
    for point in ("work", "tmp", "dev/shm"):
        mount("tmpfs", os.path.join(root, point), "tmpfs", MS_NOSUID | MS_NODEV, opts)
    mount("proc", os.path.join(root, "proc"), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    pivot_root(root, os.path.join(root, ".old"))
    os.chdir("/")
    umount("/.old", MNT_DETACH)
    _check(_libc.sethostname(hostname.encode(), len(hostname)), "sethostname")
    os.chdir("/work")


def become_nobody(rootless: bool = False) -> None:
    """Become uid/gid 65534 of a new user namespace mapping only it, every capability dropped.

    As host root: drop to host uid 65534 first. Rootless (uid 0 of the zygote's user namespace): the
    new namespace maps 65534 onto that uid 0, so the program's host uid is the caller's."""
    inner = 0 if rootless else NOBODY
    if not rootless:
        os.setgroups([])
        os.setresgid(NOBODY, NOBODY, NOBODY)
        os.setresuid(NOBODY, NOBODY, NOBODY)
        prctl(PR_SET_DUMPABLE, 1)  # a uid change makes /proc/self root-owned; we must write our own maps
    unshare(CLONE_NEWUSER)
    _write("/proc/self/uid_map", f"{NOBODY} {inner} 1\n")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/gid_map", f"{NOBODY} {inner} 1\n")
    drop_all_capabilities()
