"""A seccomp filter for the sandboxed program: a small classic-BPF deny list, installed through prctl.

Standard library only (ctypes), like the rest of the zygote: the zygote runs under the base
interpreter with `-I -S`, so a binding installed in a virtual environment (libseccomp's
`seccomp` module, `pyseccomp`) is out of its reach. The program is a straight list of
"syscall number == N -> fail with EPERM" checks, short enough to read whole below.

What it denies (each returns EPERM; nothing is killed, so a program that probes gets an error
it can handle): ptrace and process_vm_readv/writev (reading or steering another process),
mount and the new mount API, pivot_root, chroot, unshare and setns (new namespaces: the
unprivileged way back to capabilities), clone with any namespace flag, kexec, kernel modules,
bpf, perf_event_open, userfaultfd, io_uring, the keyring (add_key, request_key, keyctl),
open_by_handle_at, kcmp, pidfd_getfd, fanotify, reboot, swap, quotas, acct, syslog, clock and
host-name setting, iopl/ioperm. clone3 fails with ENOSYS (its flags live in memory a classic
filter cannot read), which makes the C library fall back to clone, whose flags it can read.
Calls through the x32 ABI fail; any other architecture is killed (the numbers would differ).

What it does not do: allow-listing (a Python program's syscall needs vary too much to pin),
argument checks beyond clone's flags, or anything on an architecture other than x86_64 (where
`available()` says so and the sandbox reports `seccomp: false`).
"""
from __future__ import annotations

import ctypes
import platform

DENIED = {  # x86_64 numbers (asm/unistd_64.h)
    "ptrace": 101, "syslog": 103, "uselib": 134, "vhangup": 153, "pivot_root": 155, "adjtimex": 159,
    "chroot": 161, "acct": 163, "settimeofday": 164, "mount": 165, "umount2": 166, "swapon": 167,
    "swapoff": 168, "reboot": 169, "sethostname": 170, "setdomainname": 171, "iopl": 172, "ioperm": 173,
    "init_module": 175, "delete_module": 176, "quotactl": 179, "lookup_dcookie": 212, "clock_settime": 227,
    "kexec_load": 246, "add_key": 248, "request_key": 249, "keyctl": 250, "unshare": 272,
    "perf_event_open": 298, "fanotify_init": 300, "name_to_handle_at": 303, "open_by_handle_at": 304,
    "clock_adjtime": 305, "setns": 308, "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312,
    "finit_module": 313, "kexec_file_load": 320, "bpf": 321, "userfaultfd": 323, "io_uring_setup": 425,
    "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428, "move_mount": 429, "fsopen": 430,
    "fsconfig": 431, "fsmount": 432, "fspick": 433, "pidfd_getfd": 438, "mount_setattr": 442,
}
SYS_CLONE, SYS_CLONE3 = 56, 435
NAMESPACE_FLAGS = 0x7E020000  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET
AUDIT_ARCH_X86_64 = 0xC000003E
X32_BIT = 0x40000000

# classic BPF opcodes
LD_W_ABS, JEQ_K, JGE_K, JSET_K, RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
RET_ALLOW, RET_KILL_PROCESS, RET_ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
EPERM, ENOSYS = 1, 38
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
OFF_NR, OFF_ARCH, OFF_ARG0 = 0, 4, 16  # struct seccomp_data (args[0]'s low word on little-endian)


class _Insn(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint32)]


class _Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Insn))]


def available() -> str | None:
    """None when this filter can run here, else why not."""
    if platform.machine() != "x86_64":
        return f"no syscall table for {platform.machine()!r} (the filter is written for x86_64)"
    return None


def program() -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions: arch check, x32 refusal, one deny pair per syscall."""
    p = [(LD_W_ABS, 0, 0, OFF_ARCH), (JEQ_K, 1, 0, AUDIT_ARCH_X86_64), (RET_K, 0, 0, RET_KILL_PROCESS),
         (LD_W_ABS, 0, 0, OFF_NR), (JGE_K, 0, 1, X32_BIT), (RET_K, 0, 0, RET_ERRNO | EPERM)]
    for nr in sorted(DENIED.values()):
        p += [(JEQ_K, 0, 1, nr), (RET_K, 0, 0, RET_ERRNO | EPERM)]
    p += [(JEQ_K, 0, 1, SYS_CLONE3), (RET_K, 0, 0, RET_ERRNO | ENOSYS),
          (JEQ_K, 0, 3, SYS_CLONE), (LD_W_ABS, 0, 0, OFF_ARG0), (JSET_K, 0, 1, NAMESPACE_FLAGS),
          (RET_K, 0, 0, RET_ERRNO | EPERM), (RET_K, 0, 0, RET_ALLOW)]
    return p


def install() -> None:
    """Install the filter on the calling thread (needs no_new_privs or CAP_SYS_ADMIN); raises OSError."""
    why = available()
    if why:
        raise OSError(why)
    insns = program()
    array = (_Insn * len(insns))(*[_Insn(*i) for i in insns])
    prog = _Prog(len(insns), array)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(prog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_SECCOMP): {__import__('os').strerror(err)}")
