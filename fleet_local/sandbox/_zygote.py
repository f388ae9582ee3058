"""The server's side of the pre-forked verifier runner (the "zygote"), and the runner switch.

A fresh jailed run pays for ``bwrap``, an interpreter and its imports every time. The zygote pays
for them once per server process: one interpreter, started by ``bwrap`` with the jail's own
filesystem view (``_jail.py``: the same runtime binds, code and runtime directories,
``--clearenv``, uid/gid 65534, ``--die-with-parent``, every namespace) plus ``/proc`` and the
database roots read-only, and without ``--disable-userns`` or the seccomp filter: each run's
middle process makes the run's own user namespace and limits it, and each run loads the filter
itself (``_zygote_child.py`` says what each process does). The zygote never runs verifier code.

It is started on the first run that can use it, by a thread of this module that lives as long
as the process (bubblewrap's ``--die-with-parent`` is tied to the thread that started it), and
registered with the process-group guard (``_process_groups.py``): when this process dies, even
by SIGKILL, the zygote's group is killed, and with bubblewrap's PID namespace init every run,
each of which is in a PID namespace below it. A zygote that died is started again by the next
run; :func:`stop_zygote` ends it (the server's shutdown, ``atexit``).

A run can use the zygote when the runner is ``zygote`` (:func:`set_runner`, or the
``FLEET_VERIFIER_RUNNER`` environment variable; ``zygote`` by default), the jail here has every
part (sized tmpfs, ``--disable-userns``, seccomp), and every database lies below a root given to
:func:`set_database_roots` (the local server gives its data dir). Anything else, and a zygote
that cannot start or set a run up before the verifier starts, falls back to the fresh run.
``FLEET_VERIFIER_ZYGOTE_DEBUG=1`` in the server's environment lets the zygote's own stderr (the
middles' tracebacks before a run has pipes of its own) through to the server's.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import json
import os
import queue
import signal
import socket
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ._jail import INNER_CODE_DIR, INNER_RUNTIME_DIR, ZYGOTE_ROOTS, JailStatus, zygote_argv
from ._process_groups import guard_group, release_group
from ._runner_choice import (
    RUNNER_ENV,
    RUNNERS,
    _settings,
    _settings_lock,
    database_roots,
    disabled_reason,
    roots_covering,
    runner,
    set_database_roots,
    set_runner,
)

__all__ = [
    "RUNNERS",
    "RUNNER_ENV",
    "ZygoteUnavailable",
    "database_roots",
    "disabled_reason",
    "roots_covering",
    "runner",
    "set_database_roots",
    "set_runner",
    "stop_zygote",
    "zygote_pid",
]

_READY_TIMEOUT = 20.0
_SCRIPT = "_zygote_main.py"


class ZygoteUnavailable(Exception):
    """The zygote cannot serve this run (nothing of it ran): the caller runs it fresh."""


@dataclass
class _Zygote:
    process: subprocess.Popen[bytes]
    control: socket.socket
    key: tuple[object, ...]
    lock: threading.Lock

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.control.close()  # end of file: it exits
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)  # and bwrap's namespace with every run
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(5)
        release_group(self.process.pid)


_current: list[_Zygote] = []
_current_lock = threading.Lock()
_requests: queue.Queue[tuple[list[str], concurrent.futures.Future[_Zygote]]] = queue.Queue()
_keeper: list[threading.Thread] = []


def _keep() -> None:
    """The thread that starts every zygote, and lives as long as the process (see module docs)."""
    while True:
        argv, future = _requests.get()
        if not future.set_running_or_notify_cancel():
            continue
        try:
            future.set_result(_spawn(argv))
        except BaseException as exc:
            future.set_exception(exc)


def _spawn(argv: list[str]) -> _Zygote:
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        # Its end keeps its number in the zygote (bubblewrap passes inherited descriptors on).
        process = subprocess.Popen(
            [*argv, str(child.fileno())],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=None if os.environ.get("FLEET_VERIFIER_ZYGOTE_DEBUG") else subprocess.DEVNULL,
            env={},
            start_new_session=True,
            pass_fds=(child.fileno(),),
        )
    except OSError as exc:
        parent.close()
        raise ZygoteUnavailable(f"could not start the verifier zygote: {exc}") from exc
    finally:
        child.close()
    guard_group(process.pid)
    zygote = _Zygote(process, parent, (), threading.Lock())
    parent.settimeout(_READY_TIMEOUT)
    try:
        ready = parent.recv(1)
    except OSError:
        ready = b""
    if ready != b"R":
        zygote.stop()
        raise ZygoteUnavailable("the verifier zygote did not start")
    parent.settimeout(None)
    return zygote


def _zygote_for(status: JailStatus, code_dir: Path, runtime_dir: Path, roots: tuple[str, ...]) -> _Zygote:
    """The live zygote for this view, started (on the keeper thread) when there is none."""
    key = (str(code_dir), str(runtime_dir), roots)
    with _current_lock:
        if _current and _current[0].key == key and _current[0].alive():
            return _current[0]
        for old in _current:
            old.stop()
        _current.clear()
        if not _keeper:
            thread = threading.Thread(target=_keep, name="fleet-verifier-zygote", daemon=True)
            thread.start()
            _keeper.append(thread)
        argv = zygote_argv(
            [f"{INNER_CODE_DIR}/{_SCRIPT}", INNER_RUNTIME_DIR],
            status=status,
            code_dir=code_dir,
            runtime_dir=runtime_dir,
            roots=roots,
        )
        future: concurrent.futures.Future[_Zygote] = concurrent.futures.Future()
        _requests.put((argv, future))
        try:
            zygote = future.result(_READY_TIMEOUT + 5)
        except (ZygoteUnavailable, concurrent.futures.TimeoutError) as exc:
            # It cannot start here (a kernel refusing what it needs, say): every later run of
            # this process is fresh, rather than paying for a failing start each time.
            with _settings_lock:
                _settings["disabled"] = str(exc) or "the verifier zygote did not start"
            raise ZygoteUnavailable(str(exc)) from None
        zygote.key = key
        _current.append(zygote)
        return zygote


def _inner_paths(databases: Sequence[str], roots: tuple[str, ...]) -> list[str | None]:
    """Each database's path in the zygote's view (its root is bound at ``ZYGOTE_ROOTS/<index>``)."""
    inner: list[str | None] = []
    for path in databases:
        for index, root in enumerate(roots):
            prefix = root.rstrip("/") + "/"
            if path.startswith(prefix):
                # Both are resolved (no ``.``, ``..`` or doubled slashes): the rest is the
                # relative path, without ``os.path.relpath``'s normalising of both.
                inner.append(f"{ZYGOTE_ROOTS}/{index}/{path[len(prefix) :]}")
                break
        else:
            inner.append(None)
    return inner


@dataclass
class Submitted:
    """A run handed to the zygote: the server's ends of its pipes and channel."""

    channel: socket.socket
    stdin: int
    stdout: int
    stderr: int


def submit(
    status: JailStatus,
    *,
    code_dir: Path,
    runtime_dir: Path,
    roots: tuple[str, ...],
    databases: Sequence[str],
    scratch_bytes: int,
    result_write: int,
    may_start: bool = True,
) -> Submitted:
    """Hand one run to the zygote (starting it if needed); blocking, once per run, briefly.

    Args:
        may_start: Start a zygote when none is up (else raise: the caller is on its loop).

    Raises:
        ZygoteUnavailable: No zygote could take it (nothing ran).
    """
    header = json.dumps({"databases": _inner_paths(databases, roots), "scratch_bytes": scratch_bytes})
    for attempt in range(2):
        if not may_start and not live(code_dir, runtime_dir, roots):
            raise ZygoteUnavailable("no zygote is up")
        zygote = _zygote_for(status, code_dir, runtime_dir, roots)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        ours.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        sent = busy = False
        try:
            with zygote.lock:
                socket.send_fds(
                    zygote.control,
                    [header.encode()],
                    [stdin_r, stdout_w, stderr_w, result_write, theirs.fileno()],
                    # On the caller's loop, never wait for room in the zygote's queue (a burst of
                    # runs; ``net.unix.max_dgram_qlen`` may be 10): the caller retries off it.
                    0 if may_start else socket.MSG_DONTWAIT,
                )
            sent = True
        except BlockingIOError:
            busy = True
        except OSError:
            pass
        finally:
            for fd in (stdin_r, stdout_w, stderr_w):
                os.close(fd)
            theirs.close()
        if sent:
            return Submitted(ours, stdin_w, stdout_r, stderr_r)
        ours.close()
        for fd in (stdin_w, stdout_r, stderr_r):
            os.close(fd)
        if busy:
            raise ZygoteUnavailable("the zygote's queue is full")
        with _current_lock:
            if _current and _current[0] is zygote:
                _current.clear()
                zygote.stop()
        if attempt:
            break
    raise ZygoteUnavailable("the verifier zygote did not take the run")


def live(code_dir: Path, runtime_dir: Path, roots: tuple[str, ...]) -> bool:
    """Whether a zygote for this view is up (so :func:`submit` will not wait for one to start)."""
    with _current_lock:
        zygote = _current[0] if _current else None
    return zygote is not None and zygote.key == (str(code_dir), str(runtime_dir), roots) and zygote.alive()


def zygote_pid() -> int | None:
    """The pid of the live zygote's ``bwrap`` (tests), or ``None``."""
    with _current_lock:
        return _current[0].process.pid if _current and _current[0].alive() else None


def forget_broken(reason: str, *, disable: bool) -> None:
    """Stop the zygote after it could not take a run; the next run starts a new one, unless
    ``disable`` (it could not set a run up here: every later run of this process runs fresh).

    Args:
        reason: Why (kept for :func:`disabled_reason`).
        disable: Stop using the zygote in this process.
    """
    with _settings_lock:
        if disable:
            _settings["disabled"] = reason or "the zygote could not set a run up"
    with _current_lock:
        for old in _current:
            old.stop()
        _current.clear()


def stop_zygote() -> None:
    """Stop the zygote, if one runs (and with it every run it serves)."""
    with _current_lock:
        for old in _current:
            old.stop()
        _current.clear()


atexit.register(stop_zygote)
