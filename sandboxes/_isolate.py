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

What it deliberately does not do: seccomp syscall filtering (the kernel's syscall surface
stays reachable by an unprivileged uid), and anything for non-root callers (see
`detect()` in the zygote: without root the sandbox reports a weaker level).
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


def _bind_ro(source: str, target: str) -> None:
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        _write(target, "")
    mount(source, target, None, MS_BIND | MS_REC)
    mount(None, target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)


SYSTEM_DIRS = ("usr", "bin", "lib", "lib64", "lib32", "sbin")
DEVICES = ("null", "zero", "random", "urandom")
MOUNT_POINTS = ("proc", "tmp", "work", "dev/shm", ".old")


def build_root(root: str, python_prefix: str) -> None:
    """Assemble the read-only root under `root` (caller is root in its own private mount ns)."""
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


def enter_run(root: str, disk_mb: int, hostname: str = "sandbox") -> None:
    """Called in pid 1 of a fresh pid namespace, as root: isolate, pivot, then become nobody."""
    unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET | CLONE_NEWCGROUP)
    mount(None, "/", None, MS_REC | MS_PRIVATE)
    opts = f"size={int(disk_mb)}m,mode=1777,uid={NOBODY},gid={NOBODY}"
    for point in ("work", "tmp", "dev/shm"):
        mount("tmpfs", os.path.join(root, point), "tmpfs", MS_NOSUID | MS_NODEV, opts)
    mount("proc", os.path.join(root, "proc"), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    pivot_root(root, os.path.join(root, ".old"))
    os.chdir("/")
    umount("/.old", MNT_DETACH)
    _check(_libc.sethostname(hostname.encode(), len(hostname)), "sethostname")
    os.chdir("/work")


def become_nobody() -> None:
    """Drop to uid/gid 65534 (all capabilities cleared), then a user namespace mapping only it."""
    os.setgroups([])
    os.setresgid(NOBODY, NOBODY, NOBODY)
    os.setresuid(NOBODY, NOBODY, NOBODY)
    prctl(PR_SET_DUMPABLE, 1)  # a uid change makes /proc/self root-owned; we must write our own maps
    unshare(CLONE_NEWUSER)
    _write("/proc/self/uid_map", f"{NOBODY} {NOBODY} 1\n")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/gid_map", f"{NOBODY} {NOBODY} 1\n")
    drop_all_capabilities()
