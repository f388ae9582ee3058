"""The PEP 578 audit-hook policy of the verifier sandbox.

Standard library only: the sandbox child loads this file without importing ``fleet_sdk``.

:class:`SandboxPolicy` decides, for each audit event, whether the verifier may go on;
:func:`install_audit_hook` makes a denial raise :class:`PermissionError` whose message starts
with ``"denied by the verifier sandbox"``. Once installed a hook cannot be removed.

What it denies:

- ``open`` (and ``os.open``, ``io.open_code``...) of any path that is not the scratch directory,
  one of the given database files (read-only) or its ``-wal``/``-shm``/``-journal`` sibling, or
  (read-only) the standard library; symlinks are resolved first (by the hook's own code, with
  functions bound before the verifier runs: patching ``posixpath`` or ``os`` changes nothing)
  and cannot be created; a directory outside the scratch directory cannot be opened as a file
  descriptor, nor made the cwd, so a path relative to a ``dir_fd`` (which no audit event shows)
  resolves inside the scratch directory whenever the hook's own reading of it does;
- every ``sqlite3.connect`` (the databases are opened before the hook, with an authorizer
  that refuses ``ATTACH``: see :func:`lock_down_connection`) and loading SQLite extensions;
- starting processes: ``subprocess.Popen``, ``os.system``, ``os.exec*``, ``os.fork``,
  ``os.forkpty``, ``os.posix_spawn*``, ``os.spawn*``, importing ``_posixsubprocess`` (under any
  name or from any file); sending signals (``os.kill``, ``os.killpg``, ``signal.pthread_kill``;
  the runner removes what raises no event, such as ``signal.pidfd_send_signal``);
- the network: every ``socket.*`` event except creating a socket object (``connect``, ``bind``,
  ``sendto``, ``sendmsg``, ``getaddrinfo``...), so asyncio's internal socketpair still works;
- ``ctypes`` (and importing it, or CPython's test and interpreter-internal modules), loading an
  extension module from outside the standard library, raising resource limits,
  ``gc.get_objects``/``get_referrers``/``get_referents``, listing directories outside the
  allowed ones, and changing files outside the scratch directory;
- introspection that reaches the sandbox's own frames or rewrites code: ``sys._getframe``,
  ``sys._current_frames``, ``sys.settrace``/``setprofile``, ``breakpoint()``, reading
  ``tb_frame``, ``gi_frame``, ``cr_frame``, ``f_code``, ``__code__`` and friends, assigning
  ``__code__`` and creating code objects. A denied ``sys._getframe`` raises an error that is
  also a ``ValueError``, which the standard library's callers (``namedtuple``, ``enum``,
  ``typing``) already treat as "no frame" and carry on.

The policy the hook enforces is sealed when it is installed (:func:`install_audit_hook`):
the hook and every helper it calls are rebuilt over a private copy of this module's globals and
of the builtins, the policy's paths are frozen into immutable values, and nothing dispatches
through :class:`SandboxPolicy` or this module's dict. A verifier that reaches this module
anyway (``object.__subclasses__()`` finds the class, ``__globals__`` reads raise no audit
event) and rewrites its deny sets or functions changes nothing the hook uses. The check never
runs with any exemption: code of the verifier's that runs inside it (an ``__fspath__``) is
checked like any other. The runner's own short windows (``unaudited(read, *args)``: reading
the entry point's code object, a traceback's frames) are exempt from the frame and code rules
only, run none of the verifier's code (``_entry._read_chain``, garbage collection off), and are
never handed to it: the hook refuses changing the ``__defaults__`` through which the runner's
functions pass the window on (``protected``).

It is still a tripwire, not a boundary: PEP 578 cannot see what C code does (SQLite opening a
file for ``ATTACH``, for one), reading ``__globals__``, ``f_locals`` or ``f_globals`` raises no
event (one frame reached by a way not refused here leads to the hook's state: its own frame is
in the traceback of every denial), and the hook shares the interpreter, and its memory bugs,
with the code it checks. Only the OS jail of ``_jail.py`` keeps a verifier away from the host
(``docs/threat-model.md``).
"""

from __future__ import annotations

import _imp
import builtins
import gc
import os
import sqlite3
import stat
import sys
import types
from _thread import _local as thread_local  # threading.local itself, without importing threading
from collections.abc import Callable, Iterable
from typing import Any, cast

__all__ = ["DENIED_PREFIX", "SandboxPolicy", "install_audit_hook", "lock_down_connection"]

DENIED_PREFIX = "denied by the verifier sandbox"


# A denied frame or code introspection is a PermissionError that is also a ValueError: the
# stdlib's callers (namedtuple, enum, dataclasses) treat ValueError as "not available" and
# carry on. It keeps the name PermissionError, which is what verifiers see in messages.
_FrameDenied = type("PermissionError", (PermissionError, ValueError), {"__module__": "builtins"})

_PROCESS_EVENTS = frozenset(
    {
        "subprocess.Popen",
        "os.system",
        "os.exec",
        "os.fork",
        "os.forkpty",
        "os.posix_spawn",
        "os.spawn",
        "os.startfile",
        "pty.spawn",
        "os.kill",
        "os.killpg",
        "signal.pthread_kill",
    }
)
_ALWAYS_DENIED = _PROCESS_EVENTS | frozenset(
    {
        "os.symlink",
        "os.link",
        "resource.setrlimit",
        "resource.prlimit",
        "gc.get_objects",
        "gc.get_referrers",
        "gc.get_referents",
        "sqlite3.connect",
        "sqlite3.enable_load_extension",
        "sqlite3.load_extension",
        "sys.remote_exec",
        # Frame and code introspection: the way to the hook's own state (see the module docs).
        "sys._getframe",
        "sys._current_frames",
        "sys._current_exceptions",
        "sys.settrace",
        "sys.setprofile",
        "sys.monitoring.register_callback",
        "builtins.breakpoint",
        "code.__new__",
    }
)
_DENIED_IMPORTS = frozenset(
    {
        "_posixsubprocess",
        "_ctypes",
        "ctypes",
        "_testcapi",
        "_testinternalcapi",
        "_testbuffer",
        "_testmultiphase",
        "_testsinglephase",
        "_xxsubinterpreters",
        "_xxinterpchannels",
        "_interpreters",
        # Loaded before the hook, with the functions that raise no event removed (``_runner``):
        # a fresh import would bring them back.
        "posix",
        "_signal",
    }
)
# Attributes whose reading raises ``object.__getattr__`` and that lead to frames or code.
_DENIED_READS = frozenset(
    {
        "tb_frame",
        "gi_frame",
        "cr_frame",
        "ag_frame",
        "f_code",
        "f_back",
        "f_locals",
        "f_globals",
        "f_builtins",
        "gi_code",
        "cr_code",
        "ag_code",
        "__code__",
    }
)
_DENIED_WRITES = frozenset({"__code__", "__globals__", "__closure__", "__builtins__"})
# What the runner's own windows (``unaudited()``) may do that the verifier may not.
_RELAXED_EVENTS = frozenset({"sys._getframe", "object.__getattr__"})
# Events whose listed arguments are paths that must stay inside the scratch directory.
_WRITE_PATH_ARGS: dict[str, tuple[int, ...]] = {
    "os.remove": (0,),
    "os.rename": (0, 1),
    "os.rmdir": (0,),
    "os.mkdir": (0,),
    "os.chmod": (0,),
    "os.chown": (0,),
    "os.chflags": (0,),
    "os.lchflags": (0,),
    "os.truncate": (0,),
    "os.utime": (0,),
    "os.setxattr": (0,),
    "os.removexattr": (0,),
    "shutil.rmtree": (0,),
    "shutil.chown": (0,),
}
# Events that read a directory listing or metadata: allowed inside the readable trees.
_LIST_PATH_ARGS: dict[str, tuple[int, ...]] = {
    "os.listdir": (0,),
    "os.scandir": (0,),
    "os.getxattr": (0,),
    "os.listxattr": (0,),
}
# The policy's helpers, bound once here: looked up at call time, builtins and module functions
# are whatever the verifier last assigned to them (this module's globals are out of its reach:
# the runner removes the module from sys.modules before the verifier runs). So are Python-level
# library functions that look up *their* module's globals (``os.path.realpath`` calls
# ``posixpath._joinrealpath``, ``os.fsdecode`` calls ``os.fspath``): only C functions here.
_type, _issubclass, _any, _len, _repr, _bool = type, issubclass, any, len, repr, bool
# Exact copies of a str / bytes subclass, made in C (``str(x)`` would call the subclass's ``__str__``).
_str_exact, _bytes_exact = str.__str__, bytes.__bytes__
_fspath, _getcwd, _lstat, _stat, _readlink = os.fspath, os.getcwd, os.lstat, os.stat, os.readlink
_S_ISLNK, _S_ISDIR = stat.S_ISLNK, stat.S_ISDIR
_FS_ENCODING = sys.getfilesystemencoding()
_SEP = "/"
_EXTENSION_SUFFIXES = tuple(_imp.extension_suffixes())
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_DIRECTORY_FLAGS = os.O_DIRECTORY | getattr(os, "O_PATH", 0)
_MAX_LINKS = 40


def _resolve(path: str) -> str:
    """``os.path.realpath(path)`` (non-strict), from the C functions bound above alone."""
    if not path.startswith(_SEP):
        path = _getcwd() + _SEP + path
    todo = path.split(_SEP)[::-1]  # the components left, the next one last
    resolved = ""  # "" is the root
    links = 0
    while todo:
        name = todo.pop()
        if name in ("", "."):
            continue
        if name == "..":
            resolved = resolved[: resolved.rfind(_SEP)] if resolved else ""
            continue
        candidate = resolved + _SEP + name
        try:
            mode = _lstat(candidate).st_mode
        except OSError:  # does not exist (yet): what follows is taken as written
            resolved = candidate
            continue
        if not _S_ISLNK(mode):
            resolved = candidate
            continue
        links += 1
        if links > _MAX_LINKS:
            raise OSError("too many levels of symbolic links")
        target = _readlink(candidate)
        if target.startswith(_SEP):
            resolved = ""
        todo.extend(target.split(_SEP)[::-1])
    return resolved or _SEP


def _real(path: Any) -> str | None:
    """The resolved absolute path, or ``None`` for a file descriptor / no path.

    A ``str`` or ``bytes`` subclass is copied to the exact type without calling any of its
    methods; any other object goes through its ``__fspath__`` (the verifier's code, audited
    like the rest of it: nothing here runs exempt).
    """
    kind = _type(path)
    if path is None or _issubclass(kind, int):
        return None
    if not _issubclass(kind, (str, bytes)):
        path = _fspath(path)
        kind = _type(path)
    if _issubclass(kind, bytes):
        return _resolve(_bytes_exact(path).decode(_FS_ENCODING, "surrogateescape"))
    return _resolve(_str_exact(path))


def _is_directory(path: str) -> bool:
    try:
        return _S_ISDIR(_stat(path).st_mode)
    except OSError:
        return False


def _inside(path: str, roots: Iterable[str]) -> bool:
    return _any(path == root or path.startswith(root.rstrip(_SEP) + _SEP) for root in roots)


class SandboxPolicy:
    """The allow-list of one sandboxed run.

    Args:
        workdir: The scratch directory (the child's cwd): anything may be done inside it.
        databases: The database files the verifier may read (their journal siblings too).
        read_roots: Trees the verifier may read, normally the standard library (``sys.path``
            of an isolated interpreter).
    """

    def __init__(self, *, workdir: str, databases: Iterable[str], read_roots: Iterable[str]) -> None:
        self.workdir = _resolve(workdir)
        files: set[str] = set()
        for database in databases:
            real = _resolve(database)
            files.update({real, real + "-wal", real + "-shm", real + "-journal"})
        self.database_files = frozenset(files)
        self.read_roots = tuple(_resolve(root) for root in read_roots)

    def check(self, event: str, args: tuple[Any, ...]) -> str | None:
        """Return why ``event`` is denied, or ``None`` when it may go on.

        The installed hook does not call this method (see :func:`install_audit_hook`): it
        calls a sealed copy of :func:`_check` with the policy's values frozen.

        Args:
            event: The audit event name.
            args: The event's arguments, as passed to the hook.
        """
        return _check(self.workdir, self.database_files, self.read_roots, event, args)


def _check(
    workdir: str,
    database_files: frozenset[str],
    read_roots: tuple[str, ...],
    event: str,
    args: tuple[Any, ...],
) -> str | None:
    """Why ``event`` is denied under this policy, or ``None``. Calls none of ``args``' methods
    (exact type checks, no ``isinstance``/``repr``/hashing of the verifier's objects) except a
    path-like object's ``__fspath__`` (see :func:`_real`)."""
    if event in _ALWAYS_DENIED:
        return f"{event}{_describe(args)}"
    if event.startswith("socket.") and event != "socket.__new__":
        return f"{event}{_describe(args)}"
    if event.startswith("ctypes."):
        return event
    name = args[1] if _len(args) > 1 and _type(args[1]) is str else None
    if event == "object.__getattr__" and name in _DENIED_READS:
        return f"reading {name}"
    if event in ("object.__setattr__", "object.__delattr__") and name in _DENIED_WRITES:
        return f"changing {name}"
    if event == "import" and args:
        return _check_import(read_roots, args)
    if event == "open":
        return _check_open(workdir, database_files, read_roots, args)
    if event == "os.chdir" and args:  # an fd (fchdir) can only be a directory in scratch
        real = _real(args[0])
        if real is not None and not _inside(real, (workdir,)):
            return f"os.chdir({real!r})"
    if event in _WRITE_PATH_ARGS:
        for index in _WRITE_PATH_ARGS[event]:
            real = _real(args[index]) if index < _len(args) else None
            if real is not None and not _inside(real, (workdir,)):
                return f"{event}({real!r})"
    if event in _LIST_PATH_ARGS:
        real = _real(args[0]) if args else None
        if real is not None and not _inside(real, (workdir, *read_roots)):
            return f"{event}({real!r})"
    return None


def _check_import(read_roots: tuple[str, ...], args: tuple[Any, ...]) -> str | None:
    """An import by name, or an extension module loaded from a file (under any name)."""
    name = args[0] if _type(args[0]) is str else ""
    filename = args[1] if _len(args) > 1 else None
    names = [name, name.rpartition(".")[2]]
    real = _real(filename)
    if real is not None:
        names.append(real.rpartition(_SEP)[2].partition(".")[0])
        if real.endswith(_EXTENSION_SUFFIXES) and not _inside(real, read_roots):
            return f"loading the extension module {real!r}"
    for candidate in names:
        if candidate in _DENIED_IMPORTS:
            return f"import of {candidate}"
    return None


def _check_open(
    workdir: str, database_files: frozenset[str], read_roots: tuple[str, ...], args: tuple[Any, ...]
) -> str | None:
    path = args[0] if args else None
    real = _real(path)
    if real is None:
        return None
    mode = args[1] if _len(args) > 1 else None
    flags = args[2] if _len(args) > 2 else 0
    writes = (_type(mode) is str and _any(c in cast(str, mode) for c in "wax+")) or (
        _type(flags) is int and _bool(flags & _WRITE_FLAGS)
    )
    if _inside(real, (workdir,)):
        return None
    if (_type(flags) is int and flags & _DIRECTORY_FLAGS) or _is_directory(real):
        return f"open({real!r}), a directory outside the scratch directory"
    if not writes and (real in database_files or _inside(real, read_roots)):
        return None
    return f"open({real!r}{', for writing' if writes else ''})"


def _shown(value: Any, depth: int) -> str:
    """``repr(value)`` for plain values; the verifier's own objects are not asked (their
    ``__repr__`` is its code), nor are containers shown deeper than two levels."""
    kind = _type(value)
    if value is None or kind is str or kind is bytes or kind is bool or kind is float:
        return _repr(value)
    if kind is int:
        return _repr(value) if -(10**100) < value < 10**100 else "<int>"
    if (kind is tuple or kind is list) and depth < 2:
        items = [_shown(item, depth + 1) for item in value[:8]]
        if _len(value) > 8:
            items.append("...")
        if kind is list:
            return "[" + ", ".join(items) + "]"
        return "(" + ", ".join(items) + ("," if _len(items) == 1 else "") + ")"
    return "<object>"


def _describe(args: tuple[Any, ...]) -> str:
    text = _shown(args, 0) if _type(args) is tuple else "(<object>)"
    return text if _len(text) <= 160 else text[:157] + "...)"


def lock_down_connection(connection: sqlite3.Connection) -> None:
    """Refuse ``ATTACH`` and native-pointer functions on ``connection``.

    Kept for callers of the earlier API; :class:`~fleet_sdk.verifiers.SQLiteDatabase` opens
    its read-only connections locked down already (see ``_sqlite.py``).

    Args:
        connection: A connection opened before the hook (the hook denies opening new ones).
    """
    from fleet_sdk.verifiers._sqlite import harden_connection

    harden_connection(connection)


def install_audit_hook(policy: SandboxPolicy, protected: Iterable[dict[str, Any]] = ()) -> Callable[..., Any]:
    """Install ``policy`` as an audit hook for the rest of this process's life.

    Only call this in a throw-away process (the sandbox child): hooks cannot be removed.
    Nothing returned gives access to ``policy``: the caller should drop its own reference.
    The hook is sealed: see the module docs (what it closes and what it cannot).

    Args:
        policy: The allow-list to enforce.
        protected: Module dicts (the runner's) whose functions' ``__defaults__`` and
            ``__kwdefaults__`` may not be changed once the hook is on: the runner binds the
            functions it hands the window to as defaults (``_entry.Unaudited``).

    Returns:
        ``unaudited(read, *args)``: ``read(*args)`` with the *current thread* exempt from the
        frame and code introspection rules (and nothing else), for the runner's own reads of
        a traceback's frames or the entry point's code; garbage collection is off meanwhile, so
        no finalizer of the verifier's runs there. Other threads stay checked.
    """
    sealed = _sealed_globals()
    hook, unaudited = sealed["_make_hook"](
        _str_exact(policy.workdir),
        frozenset(_str_exact(path) for path in policy.database_files),
        tuple(_str_exact(root) for root in policy.read_roots),
        (globals(), sealed, *protected),
    )
    sys.addaudithook(hook)
    return cast("Callable[..., Any]", unaudited)


def _sealed_globals() -> dict[str, Any]:
    """A private copy of this module's globals, and of the builtins, with every function of this
    module rebuilt over it: what the verifier later rebinds in the module (reachable through
    ``SandboxPolicy.check.__globals__``) or in ``builtins`` is not what the hook looks up."""
    sealed = dict(globals())
    sealed["__builtins__"] = dict(vars(builtins))
    for name, value in list(sealed.items()):
        if _type(value) is types.FunctionType and value.__module__ == __name__:
            code = value.__code__
            sealed[name] = types.FunctionType(
                code, sealed, value.__name__, value.__defaults__, value.__closure__
            )
    return sealed


def _make_hook(
    workdir: str,
    database_files: frozenset[str],
    read_roots: tuple[str, ...],
    protected: tuple[dict[str, Any], ...],
) -> tuple[Callable[[str, tuple[Any, ...]], None], Callable[..., Any]]:
    """The hook and its ``unaudited()``; called on the sealed copy only, so that both functions'
    globals are the private ones and everything they use is bound in their closure."""
    state = thread_local()
    check, getattr_, relaxed_events = _check, getattr, _RELAXED_EVENTS
    frame_denied, permission_error, prefix = _FrameDenied, PermissionError, DENIED_PREFIX
    function_type, globals_of = types.FunctionType, types.FunctionType.__dict__["__globals__"].__get__
    defaults = frozenset({"__defaults__", "__kwdefaults__"})
    gc_disable, gc_enable, gc_isenabled = gc.disable, gc.enable, gc.isenabled

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event in relaxed_events and getattr_(state, "relaxed", False):
            return
        if (
            event == "object.__setattr__"
            and len(args) > 1
            and args[1] in defaults
            and type(args[0]) is function_type
            and any(globals_of(args[0]) is module for module in protected)
        ):
            raise permission_error(f"{prefix}: changing {args[1]} of the sandbox's own functions")
        try:
            reason = check(workdir, database_files, read_roots, event, args)
        except Exception:  # a path that cannot even be resolved is not allowed
            reason = f"{event} (could not be checked)"
        if reason is not None:
            denied = frame_denied if event in relaxed_events else permission_error
            raise denied(f"{prefix}: {reason}")

    def unaudited(read: Callable[..., Any], *args: Any) -> Any:
        previous, collecting = getattr_(state, "relaxed", False), gc_isenabled()
        gc_disable()
        state.relaxed = True
        try:
            return read(*args)
        finally:
            state.relaxed = previous
            if collecting:
                gc_enable()

    return hook, unaudited
