"""The seccomp filter of the verifier jail: a small classic-BPF program, built without libseccomp.

bubblewrap loads it (``--seccomp FD``) just before it runs the verifier's interpreter, so it
holds for every thread of the run and for anything that interpreter ``exec``s. It refuses:

- new processes: ``fork``, ``vfork`` and a ``clone`` that is not a thread (``CLONE_THREAD``);
  ``clone3`` answers ``ENOSYS``, so the C library falls back to ``clone`` for threads;
- new namespaces and mounts: ``unshare``, ``setns``, a ``clone`` with any ``CLONE_NEW*`` flag,
  ``mount`` and the new mount API, ``pivot_root``, ``chroot``;
- reaching other processes and the kernel's larger surfaces: ``ptrace``, ``process_vm_*``,
  ``pidfd_*``, ``kcmp``, ``keyctl``, ``bpf``, ``perf_event_open``, ``userfaultfd``,
  ``io_uring_*``, ``open_by_handle_at``, modules, ``kexec``, ``reboot``, ``swapon``...;
- memory outside the address-space limit: ``memfd_create``, ``memfd_secret``; other
  processes' pages and the x86 descriptor table: ``move_pages``, ``modify_ldt``;
- System V IPC objects (``msgget``, ``semget``, ``shmget``), which no verifier needs;
- sockets of any family but ``AF_UNIX``, ``AF_INET`` and ``AF_INET6`` (``socket`` and
  ``socketpair``): the jail's empty network namespace isolates the inet families, not
  ``AF_VSOCK`` (a virtual machine's host services), ``AF_NETLINK`` or the rest;
- ``setsid`` (the run stays one process group and session) and the ``TIOCSTI``/``TIOCLINUX``
  ioctls (typing into a terminal).

Refused calls fail with ``EPERM``. A call made through another ABI than the interpreter's
(32-bit ``int 0x80``, x32) kills the process. :func:`seccomp_program` returns ``None`` on an
architecture without a table here (the jail then runs without the filter, and says so).
"""

from __future__ import annotations

import errno
import platform
import struct

__all__ = ["seccomp_program"]

# Classic BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h).
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_RET_ALLOW = 0x7FFF0000

# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6] (little-endian).
_NR = 0
_ARCH = 4
_ARG0_LOW = 16
_ARG1_LOW = 24

# Socket families a verifier may open (linux/socket.h); every other one is refused.
_AF_UNIX, _AF_INET, _AF_INET6 = 1, 2, 10

_CLONE_THREAD = 0x00010000
_CLONE_NEW_ANY = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
_TIOCSTI = 0x5412
_TIOCLINUX = 0x541C
_X32_SYSCALL_BIT = 0x40000000

# Syscall numbers per architecture (x86_64: asm/unistd_64.h; aarch64: asm-generic/unistd.h).
_DENIED = [
    *("unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount"),
    *("fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr"),
    *("ptrace", "process_vm_readv", "process_vm_writev", "kcmp"),
    *("pidfd_open", "pidfd_send_signal", "pidfd_getfd"),
    *("keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd"),
    *("io_uring_setup", "io_uring_enter", "io_uring_register", "open_by_handle_at", "name_to_handle_at"),
    *("fanotify_init", "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load"),
    *("reboot", "swapon", "swapoff", "syslog", "acct", "quotactl", "personality"),
    *("memfd_create", "memfd_secret", "setsid", "fork", "vfork"),
    *("move_pages", "modify_ldt", "msgget", "semget", "shmget"),
]

_X86_64 = {
    "ioctl": 16, "clone": 56, "fork": 57, "vfork": 58, "ptrace": 101, "syslog": 103, "setsid": 112,
    "personality": 135, "pivot_root": 155, "chroot": 161, "acct": 163, "mount": 165, "umount2": 166,
    "swapon": 167, "swapoff": 168, "reboot": 169, "init_module": 175, "delete_module": 176,
    "quotactl": 179, "kexec_load": 246, "add_key": 248, "request_key": 249, "keyctl": 250,
    "unshare": 272, "perf_event_open": 298, "fanotify_init": 300, "name_to_handle_at": 303,
    "open_by_handle_at": 304, "setns": 308, "process_vm_readv": 310, "process_vm_writev": 311,
    "kcmp": 312, "finit_module": 313, "memfd_create": 319, "kexec_file_load": 320, "bpf": 321,
    "userfaultfd": 323, "pidfd_send_signal": 424, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
    "fsmount": 432, "fspick": 433, "pidfd_open": 434, "clone3": 435, "pidfd_getfd": 438,
    "mount_setattr": 442, "memfd_secret": 447, "shmget": 29, "socket": 41, "socketpair": 53,
    "semget": 64, "msgget": 68, "modify_ldt": 154, "move_pages": 279,
}  # fmt: skip
_AARCH64 = {
    "ioctl": 29, "umount2": 39, "mount": 40, "pivot_root": 41, "chroot": 51, "quotactl": 60,
    "acct": 89, "personality": 92, "unshare": 97, "kexec_load": 104, "init_module": 105,
    "delete_module": 106, "syslog": 116, "ptrace": 117, "reboot": 142, "setsid": 157,
    "add_key": 217, "request_key": 218, "keyctl": 219, "clone": 220, "swapon": 224, "swapoff": 225,
    "perf_event_open": 241, "fanotify_init": 262, "name_to_handle_at": 264, "open_by_handle_at": 265,
    "setns": 268, "process_vm_readv": 270, "process_vm_writev": 271, "kcmp": 272,
    "finit_module": 273, "memfd_create": 279, "bpf": 280, "userfaultfd": 282, "kexec_file_load": 294,
    "pidfd_send_signal": 424, "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
    "fspick": 433, "pidfd_open": 434, "clone3": 435, "pidfd_getfd": 438, "mount_setattr": 442,
    "memfd_secret": 447, "msgget": 186, "semget": 190, "shmget": 194, "socket": 198,
    "socketpair": 199, "move_pages": 239,
}  # fmt: skip
# platform.machine() -> (AUDIT_ARCH_* of linux/audit.h, syscall table, whether x32 exists).
_ARCHES = {
    "x86_64": (0xC000003E, _X86_64, True),
    "aarch64": (0xC00000B7, _AARCH64, False),
}


class _Program:
    """Classic BPF with forward jumps to labels, resolved when the program is packed."""

    def __init__(self) -> None:
        self._code: list[tuple[int, int | str, int | str, int]] = []
        self._labels: dict[str, int] = {}

    def load(self, offset: int) -> None:
        self._code.append((_LD_W_ABS, 0, 0, offset))

    def jump(self, op: int, value: int, true: int | str, false: int | str) -> None:
        """Jump to ``true`` or ``false`` (a label, or 0 for the next instruction)."""
        self._code.append((op, true, false, value))

    def ret(self, value: int) -> None:
        self._code.append((_RET_K, 0, 0, value))

    def label(self, name: str) -> None:
        self._labels[name] = len(self._code)

    def pack(self) -> bytes:
        out = bytearray()
        for index, (op, true, false, value) in enumerate(self._code):
            offsets = [t if isinstance(t, int) else self._labels[t] - index - 1 for t in (true, false)]
            assert all(0 <= o <= 255 for o in offsets), "a jump past 255 instructions"
            out += struct.pack("=HBBI", op, offsets[0], offsets[1], value)
        return bytes(out)


def seccomp_program(machine: str | None = None) -> bytes | None:
    """The filter as bubblewrap's ``--seccomp`` reads it (packed ``struct sock_filter``s).

    Args:
        machine: ``platform.machine()`` of the target (this machine's by default).

    Returns:
        The program, or ``None`` for an architecture without a syscall table here.
    """
    arch = _ARCHES.get(machine or platform.machine())
    if arch is None:
        return None
    audit_arch, table, has_x32 = arch
    p = _Program()
    p.load(_ARCH)
    p.jump(_JEQ_K, audit_arch, 0, "kill")
    p.load(_NR)
    if has_x32:
        p.jump(_JGE_K, _X32_SYSCALL_BIT, "kill", 0)
    p.jump(_JEQ_K, table["clone3"], "enosys", 0)
    p.jump(_JEQ_K, table["clone"], "clone", 0)
    p.jump(_JEQ_K, table["ioctl"], "ioctl", 0)
    p.jump(_JEQ_K, table["socket"], "socket", 0)
    p.jump(_JEQ_K, table["socketpair"], "socket", 0)
    for name in _DENIED:
        if name in table:  # fork, vfork and modify_ldt exist on x86_64 only
            p.jump(_JEQ_K, table[name], "deny", 0)
    p.ret(_RET_ALLOW)
    p.label("clone")  # a thread, in no new namespace
    p.load(_ARG0_LOW)
    p.jump(_JSET_K, _CLONE_THREAD, 0, "deny")
    p.jump(_JSET_K, _CLONE_NEW_ANY, "deny", "allow")
    p.label("ioctl")
    p.load(_ARG1_LOW)
    p.jump(_JEQ_K, _TIOCSTI, "deny", 0)
    p.jump(_JEQ_K, _TIOCLINUX, "deny", "allow")
    p.label("socket")  # the family is the first argument of both
    p.load(_ARG0_LOW)
    p.jump(_JEQ_K, _AF_UNIX, "allow", 0)
    p.jump(_JEQ_K, _AF_INET, "allow", 0)
    p.jump(_JEQ_K, _AF_INET6, "allow", "deny")
    p.label("allow")
    p.ret(_RET_ALLOW)
    p.label("deny")
    p.ret(_RET_ERRNO | errno.EPERM)
    p.label("enosys")
    p.ret(_RET_ERRNO | errno.ENOSYS)
    p.label("kill")
    p.ret(_RET_KILL_PROCESS)
    return p.pack()
