"""The zygote's side of a pre-forked verifier run: serving requests, the middle, the run.

Standard library only (loaded by ``_zygote_main.py`` inside the zygote's bubblewrap jail); see
that script for what each process does, and ``_zygote.py`` for the server's side. The system
calls Python 3.11 has no function for (``unshare``, ``mount``, ``prctl``, ``capset``) go
through ``ctypes``; every object of it lives in ``_NATIVE``, which the run empties, with
``ctypes`` removed from ``sys.modules``, before anything of the verifier's runs.

Wire format (``SOCK_SEQPACKET``): a request is one message ``{"databases": [paths in the
zygote's view, or null], "scratch_bytes": N}`` with five descriptors (stdin, stdout, stderr,
result, channel). On the channel: the run sends ``P`` (its pid rides along as
``SCM_CREDENTIALS``), the server answers ``G``, the middle finally sends ``S`` and the run's
status as 4 ASCII digits; ``E`` and a message instead means the middle could not set the run
up (nothing of the verifier ran).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gc
import io
import json
import os
import signal
import socket
import sys
import types
from collections.abc import Callable
from typing import Any

from ._seccomp import seccomp_program

__all__ = ["serve"]

RESULT_FD = 3  # the run's result pipe (``_sandbox._prepare`` names it in the payload)
_CHANNEL_FD = 4
_SCRATCH = "/scratch"
_PROC = "/tmp/.fleet-zygote-proc"  # _jail.ZYGOTE_PROC (this module imports nothing of fleet_sdk)
_DATABASES = "/databases"

_CLONE_NEWNS = 0x00020000
_CLONE_NEWCGROUP = 0x02000000
_CLONE_NEWUTS = 0x04000000
_CLONE_NEWIPC = 0x08000000
_CLONE_NEWUSER = 0x10000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWNET = 0x40000000
_RUN_NAMESPACES = (
    _CLONE_NEWUSER
    | _CLONE_NEWNS
    | _CLONE_NEWNET
    | _CLONE_NEWIPC
    | _CLONE_NEWUTS
    | _CLONE_NEWPID
    | _CLONE_NEWCGROUP
)
_MS_RDONLY, _MS_NOSUID, _MS_NODEV = 1, 2, 4
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_PR_SET_PDEATHSIG = 1
_PR_SET_SECCOMP = 22
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_SECCOMP_MODE_FILTER = 2
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_NOBODY = 65534

_NATIVE: dict[str, Any] = {}
"""The ``ctypes`` objects of the zygote and the middle; the run empties it before the verifier runs."""


def _classes() -> set[type]:
    """Every class reachable through ``__subclasses__()`` from ``object``."""
    seen: set[type] = set()
    todo: list[type] = [object]
    while todo:
        subs: list[type] = type.__subclasses__(todo.pop())
        for sub in subs:
            if sub not in seen:
                seen.add(sub)
                todo.append(sub)
    return seen


def _load_native() -> None:
    before = _classes()
    import ctypes

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    libc = ctypes.CDLL(None, use_errno=True)
    # What importing ctypes added: the classes a run takes out of every ``__subclasses__()``.
    _NATIVE.update(ctypes=ctypes, libc=libc, fprog=SockFprog, classes=list(_classes() - before))
    try:
        with open(f"{_PROC}/sys/kernel/cap_last_cap", "rb") as f:
            _NATIVE["cap_last"] = int(f.read())
    except (OSError, ValueError):
        _NATIVE["cap_last"] = 63  # dropping a capability the kernel lacks fails with EINVAL: ignored


def _check(result: int, what: str) -> None:
    if result != 0:
        number = _NATIVE["ctypes"].get_errno()
        raise OSError(number, f"{what}: {os.strerror(number)}")


def _prctl(option: int, arg: int = 0) -> int:
    c = _NATIVE["ctypes"]
    return int(
        _NATIVE["libc"].prctl(c.c_int(option), c.c_ulong(arg), c.c_ulong(0), c.c_ulong(0), c.c_ulong(0))
    )


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    c = _NATIVE["ctypes"]
    result = _NATIVE["libc"].mount(
        source.encode() if source is not None else None,
        target.encode(),
        fstype.encode() if fstype is not None else None,
        c.c_ulong(flags),
        data.encode() if data is not None else None,
    )
    _check(result, f"mount {target}")


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


# -- the middle ------------------------------------------------------------------------------------


def _namespaces() -> None:
    """New namespaces, uid/gid 65534 alone, and no user namespace below this one."""
    _check(_NATIVE["libc"].unshare(_RUN_NAMESPACES), "unshare")
    _write(f"{_PROC}/self/setgroups", "deny")
    _write(f"{_PROC}/self/uid_map", f"{_NOBODY} {_NOBODY} 1")
    _write(f"{_PROC}/self/gid_map", f"{_NOBODY} {_NOBODY} 1")
    # bubblewrap's --disable-userns: the limit of the run's own user namespace is 0, so neither
    # the run nor anything it starts can make one; the run has no capability to raise it again.
    _write(f"{_PROC}/sys/user/max_user_namespaces", "0")
    _NATIVE["libc"].sethostname(b"verifier", 8)


def _mounts(databases: list[str | None], scratch_bytes: int) -> None:
    """The run's filesystem view (the zygote's, with the per-run parts over it)."""
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)  # nothing made here reaches the zygote
    plain = _MS_NOSUID | _MS_NODEV
    _mount("tmpfs", _DATABASES, "tmpfs", plain, "size=65536,nr_inodes=64,mode=0755")
    for index, host_path in enumerate(databases):
        if host_path is None or not os.path.exists(host_path):
            continue  # as bubblewrap's jail: a database that does not exist is not there
        inner = f"{_DATABASES}/{index}.sqlite"
        os.close(os.open(inner, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o444))
        _mount(host_path, inner, None, _MS_BIND)
        _mount(None, inner, None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | plain)
    _mount(None, _DATABASES, None, _MS_REMOUNT | _MS_RDONLY | plain)
    # Over /tmp, this also covers the zygote's /proc and the database roots (the server's data
    # dir): the run sees only its own databases, bound above, and no /proc (whose mountinfo
    # would show the host paths of the mounts).
    for place in (_SCRATCH, "/tmp"):
        _mount("tmpfs", place, "tmpfs", plain, f"size={scratch_bytes},mode=0755")


def _middle(header: dict[str, Any], fds: list[int], zygote: int) -> int:
    """Set up the run's namespaces and mounts, fork it, report its status; the exit status."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != zygote:
        return 1
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the zygote's handler reaps; this process waits
    channel = socket.socket(fileno=fds[4])
    try:
        _namespaces()
        _mounts(list(header["databases"]), int(header["scratch_bytes"]))
        alive_read, alive_write = os.pipe()
        pid = os.fork()
    except Exception as exc:
        with contextlib.suppress(OSError):
            channel.send(b"E" + f"{type(exc).__name__}: {exc}".encode()[:4000])
        return 1
    if pid == 0:
        code = 127
        try:
            os.close(alive_write)
            channel.detach()
            code = _init(fds, alive_read)
        finally:
            os._exit(code)
    os.close(alive_read)
    for fd in fds[:4]:
        os.close(fd)  # the run holds them: its pipes end with it
    _, status = os.waitpid(pid, 0)
    with contextlib.suppress(OSError):
        channel.send(b"S" + f"{_status_code(status):04d}".encode())
    return 0


def _status_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code  # as bubblewrap reports a signal: 128 + N


def _parent_gone(alive: int) -> bool:
    """The parent holds the pipe's write end: readable (end of file) means it has died."""
    import select

    return bool(select.select([alive], [], [], 0)[0])


def _init(fds: list[int], alive: int) -> int:
    """PID 1 of the run's namespace, as bubblewrap's own: starts the run (PID 2), reaps it and
    exits with its status. The run is not PID 1, so the signals it gets (``SIGXCPU`` at the CPU
    limit among them) act as in a fresh run; when this process ends, the kernel kills everything
    left in the namespace."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if _parent_gone(alive):
        return 125
    os.close(alive)
    alive_read, alive_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(alive_write)
            _run(fds, alive_read)
        except BaseException:  # the run's set-up failed: say why on its stderr (the server's tail)
            with contextlib.suppress(BaseException):
                import traceback

                traceback.print_exc()
                sys.stderr.flush()
        finally:
            os._exit(127)
    os.close(alive_read)
    for fd in fds:
        os.close(fd)
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            return _status_code(status)
        except InterruptedError:
            continue


# -- the run ------------------------------------------------------------------------------------


def _drop_capabilities() -> None:
    for cap in range(_NATIVE["cap_last"] + 1):
        if _prctl(_PR_CAPBSET_DROP, cap) != 0 and _NATIVE["ctypes"].get_errno() != errno.EINVAL:
            _check(-1, "PR_CAPBSET_DROP")
    _check(_prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL), "PR_CAP_AMBIENT_CLEAR_ALL")
    c = _NATIVE["ctypes"]
    header = (c.c_uint32 * 2)(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (c.c_uint32 * 6)()  # two structs of effective, permitted, inheritable: all zero
    _check(_NATIVE["libc"].capset(header, data), "capset")


def _load_filter() -> None:
    program = seccomp_program()
    if program is None:
        raise OSError(errno.ENOSYS, "no seccomp filter for this architecture")
    c = _NATIVE["ctypes"]
    buffer = c.create_string_buffer(program, len(program))
    fprog = _NATIVE["fprog"](len(program) // 8, c.cast(buffer, c.c_void_p))
    _check(_prctl(_PR_SET_NO_NEW_PRIVS, 1), "PR_SET_NO_NEW_PRIVS")
    result = _NATIVE["libc"].prctl(
        c.c_int(_PR_SET_SECCOMP), c.c_ulong(_SECCOMP_MODE_FILTER), c.cast(c.pointer(fprog), c.c_void_p), 0, 0
    )
    _check(result, "PR_SET_SECCOMP")


def _place(fds: list[int], alive: int) -> int:
    """Put the run's descriptors at 0-4 and close every other one; the new ``alive`` fd."""
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 16) for fd in [*fds, alive]]  # above every target
    for fd in {*fds, alive} - set(high):
        os.close(fd)
    for target, fd in enumerate(high[:5]):
        os.dup2(fd, target, inheritable=target < 3)
    alive = os.dup2(high[5], 5, inheritable=False)
    os.closerange(6, 1 << 16)
    return alive


def _reopen_streams() -> None:
    """``sys.stdin``/``stdout``/``stderr`` over the run's pipes, made as the interpreter makes them
    for a fresh child (the zygote's were over ``/dev/null``, which can seek; a pipe cannot)."""
    streams: list[io.TextIOWrapper] = []
    for fd, old, mode in ((0, sys.stdin, "r"), (1, sys.stdout, "w"), (2, sys.stderr, "w")):
        stream = open(fd, mode, encoding=old.encoding, errors=old.errors, closefd=False)  # noqa: SIM115
        assert isinstance(stream, io.TextIOWrapper)
        streams.append(stream)
    streams[2].reconfigure(line_buffering=True)  # as the interpreter's stderr
    sys.stdin, sys.stdout, sys.stderr = streams
    sys.__stdin__, sys.__stdout__, sys.__stderr__ = streams  # type: ignore[misc]


def _run(fds: list[int], alive: int) -> None:
    """The run (PID 2 of its namespace): confine itself, wait for the server's go, run the job."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    alive = _place(fds, alive)
    if _parent_gone(alive):  # died before the death signal was set
        os._exit(125)
    os.close(alive)
    _reopen_streams()
    os.setsid()
    os.chdir(_SCRATCH)
    if _NATIVE["libc"].unshare(_CLONE_NEWUSER) == 0:  # bubblewrap's check of --disable-userns
        os._exit(125)
    _drop_capabilities()
    _load_filter()
    _unlist_ctypes()
    os.environ.clear()
    main: Callable[[], int] = _NATIVE.pop("runner")
    _forget_native()
    channel = socket.socket(fileno=_CHANNEL_FD)
    channel.send(b"P")
    if channel.recv(1) != b"G":
        os._exit(125)  # the server went away or gave up: nothing of the verifier has run
    channel.close()
    status = main()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # the verifier may have closed it
            stream.flush()
    os._exit(status)


# PyTypeObject's slots, in pointer-sized words (CPython 3.8-3.11): tp_base, tp_bases, tp_mro and
# tp_subclasses (a dict, id of the subclass -> weak reference, for static and heap types alike).
_TP_BASE, _TP_BASES, _TP_MRO, _TP_SUBCLASSES = 32, 42, 43, 45


def _unlist_ctypes() -> None:
    """Take the classes of ``ctypes`` (``_ctypes``'s static C types among them, which outlive
    their module) out of their bases' ``tp_subclasses``, so that ``object.__subclasses__()`` and
    the like no longer reach them: a function pointer made from an address is called without an
    audit event, and a pointer type reads and writes memory. The layout is checked on ``bool``
    and ``int`` first; a run whose interpreter does not match is never started.

    Raises:
        OSError: The interpreter's type layout is not the one known here.
    """
    c = _NATIVE["ctypes"]
    word = c.sizeof(c.c_void_p)

    def slot(cls: type, index: int) -> int:
        return int(c.c_size_t.from_address(id(cls) + index * word).value)

    def subclasses(cls: type) -> Any:
        if slot(cls, _TP_SUBCLASSES) == 0:
            return None
        return c.py_object.from_address(id(cls) + _TP_SUBCLASSES * word).value

    known = (
        sys.version_info[:2] <= (3, 11)
        and slot(bool, _TP_BASE) == id(int)
        and slot(bool, _TP_BASES) == id(bool.__bases__)
        and slot(bool, _TP_MRO) == id(bool.__mro__)
        and type(subclasses(int)) is dict
        and id(bool) in subclasses(int)
    )
    if not known:
        raise OSError(errno.ENOTSUP, "unknown type layout: cannot hide ctypes from the run")
    for cls in _NATIVE["classes"]:
        for base in cls.__bases__:
            registry = subclasses(base)
            if type(registry) is dict:
                registry.pop(id(cls), None)


def _forget_native() -> None:
    """Drop every reference to ``ctypes`` the verifier could be handed, and every module a fresh
    run would not have loaded yet (``ctypes`` among them; the sandbox's own are dropped by the
    runner), so the run's ``sys.modules`` is a fresh run's."""
    fresh: frozenset[str] = _NATIVE["fresh"]
    _NATIVE.clear()
    package = __name__.rpartition(".")[0]
    for name in [n for n in sys.modules if n not in fresh and n.partition(".")[0] != package]:
        del sys.modules[name]
    # A ``__main__`` as a fresh run's (``_child.py``), not the zygote's script.
    main = types.ModuleType("__main__")
    main.__file__ = os.path.join(os.path.dirname(os.path.realpath(__file__)), "_child.py")
    sys.modules["__main__"] = main
    sys.argv = [main.__file__, *sys.argv[1:2]]  # as a fresh run's: its script and runtime dir
    gc.collect()


# -- the zygote ------------------------------------------------------------------------------------


def _reap(*_: object) -> None:
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def serve(runner: Callable[[], int], control_fd: int, fresh: frozenset[str]) -> int:
    """Serve run requests on ``control_fd`` until the server closes it; never runs verifier code.

    Args:
        runner: ``_runner.main``.
        control_fd: The socket the server sends requests on.
        fresh: The modules a fresh run has loaded when its runner starts.
    """
    _load_native()
    _NATIVE["runner"] = runner
    _NATIVE["fresh"] = fresh
    # Middles are reaped as they end, by waitpid (not SIGCHLD ignored, which reaps them without
    # adding their CPU, and their runs', to this process's: what the benchmarks read).
    signal.signal(signal.SIGCHLD, _reap)
    control = socket.socket(fileno=control_fd)
    control.send(b"R")
    zygote = os.getpid()
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(control, 65536, 5, socket.MSG_CMSG_CLOEXEC)
        except InterruptedError:
            continue
        except OSError:
            return 0
        if not message:
            return 0  # the server closed the socket: it is stopping
        if len(fds) != 5:
            for fd in fds:
                os.close(fd)
            continue
        try:
            header = json.loads(message)
            pid = os.fork()
        except (ValueError, OSError):
            pid = -1
        if pid == 0:
            code = 1
            try:
                control.detach()
                keep = sorted({0, 1, 2, *fds})
                for low, high in zip([-1, *keep], [*keep, 1 << 16], strict=True):
                    if high > low + 1:  # closerange(n, n) closes everything from n on
                        os.closerange(low + 1, high)  # the control socket, anything else of the zygote's
                code = _middle(header, fds, zygote)
            finally:
                os._exit(code)
        for fd in fds:
            os.close(fd)
