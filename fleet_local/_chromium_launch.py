"""Starting one confined Chromium: its profile, its CDP pipe, and the confinement it got.

:func:`launch` (blocking: a worker thread runs it) makes a fresh profile directory, the two pipes
of ``--remote-debugging-pipe`` and a control socket, and starts ``_chromium_confine`` in a process
group of its own; that script confines itself as far as the machine allows and executes Chromium.
What it reports back (network namespace, hidden data dir, uid, sandbox) is :class:`Confinement`.

The browser's uid: a server running as root runs its browsers as :data:`BROWSER_UID` (override
with ``FLEET_BROWSER_UID``), a uid that owns nothing on the machine, so Chromium runs with its
own sandbox on and cannot read root's files; any other server runs them as itself. Chromium's
environment is a fresh one (``PATH``, its profile as ``HOME``, the locale): nothing of the
server's, its key included.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleet_sdk import BrowserStartError

from .sandbox._process_groups import guard_group, release_group

__all__ = ["BROWSER_UID", "PROFILE_PREFIX", "START_DEADLINE", "Confinement", "Launched", "launch", "reap"]

PROFILE_PREFIX = "chromium-"
"""Name prefix of each browser's profile directory under the pool's root."""

START_DEADLINE = 30.0
"""Seconds Chromium gets to start (and to answer its first CDP command)."""

BROWSER_UID = 2_000_000_000
"""The uid (and gid) a root server runs its browsers as: above any login's and the ranges
``/etc/subuid`` hands out, so it owns nothing on the machine."""

_CONFINE = Path(__file__).with_name("_chromium_confine.py")
_PASSED_ENV = ("LANG", "LANGUAGE", "LC_ALL", "TZ")


@dataclass(frozen=True)
class Confinement:
    """What confines a lease's Chromium on this machine, as its start reported it.

    Attributes:
        netns: It runs in a network namespace of its own: its only way out is the lease's proxy.
        hidden: The server's data dir is covered in its mount namespace; it sees only its profile.
        uid: The uid it runs as.
        sandbox: Chromium's own sandbox is on (off means ``--no-sandbox``).
        problems: What the machine refused, in words.
    """

    netns: bool
    hidden: bool
    uid: int
    sandbox: bool
    problems: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        """Every layer held: own network, data dir hidden, not root, sandbox on."""
        return self.netns and self.hidden and self.uid != 0 and self.sandbox


@dataclass
class Launched:
    """A started Chromium, before anything talks to it.

    Attributes:
        process: The Chromium process (leader of its own process group).
        profile: Its ``--user-data-dir``.
        cdp_read: Our end of the pipe it writes CDP to.
        cdp_write: Our end of the pipe it reads CDP from.
        listener: The listening socket its ``--proxy-server`` names (the server serves it).
        confinement: What confines it.
    """

    process: subprocess.Popen[bytes]
    profile: Path
    cdp_read: int
    cdp_write: int
    listener: socket.socket
    confinement: Confinement

    def discard(self) -> None:
        """Kill it and close our ends (blocking: it waits for the process)."""
        kill_group(self.process)
        self.close_ends()
        reap(self.process, self.profile)

    def close_ends(self) -> None:
        """Close our pipe ends and the listener (when nothing took them over)."""
        for fd in (self.cdp_read, self.cdp_write):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.listener.close()


def browser_ids() -> tuple[int, int] | None:
    """The uid and gid to run browsers as, or None to keep the server's (it is not root)."""
    if os.geteuid() != 0:
        return None
    uid = int(os.environ.get("FLEET_BROWSER_UID") or BROWSER_UID)
    return uid, uid


def _enterable(path: Path, uid: int, gid: int) -> bool:
    info = path.stat()
    bit = 0o100 if info.st_uid == uid else 0o010 if info.st_gid == gid else 0o001
    return bool(info.st_mode & bit)


def _blocking_ancestor(root: Path, ids: tuple[int, int] | None) -> Path | None:
    """The first directory on the way to ``root`` the browser's uid may not enter, if any."""
    if ids is not None:
        for ancestor in reversed(root.parents):
            if ancestor != Path("/") and not _enterable(ancestor, *ids):
                return ancestor
    return None


def cover_for(root: Path, ids: tuple[int, int] | None) -> str | None:
    """The directory to cover with an empty tmpfs in the browser's mount namespace.

    The first directory on the way to ``root`` the browser's uid cannot enter (it would not reach
    its profile), else ``root``'s parent: the server's data dir. None when that is ``/``.

    Args:
        root: The pool's root, where profiles are made.
        ids: The browser's uid and gid (None: the server's own).
    """
    root = root.absolute()
    cover = _blocking_ancestor(root, ids) or root.parent
    return None if cover == Path("/") else str(cover)


def _environment(profile: Path) -> dict[str, str]:
    env = {k: os.environ[k] for k in _PASSED_ENV if k in os.environ}
    env.setdefault("LANG", "C.UTF-8")
    return {
        **env,
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(profile),
        "XDG_CONFIG_HOME": str(profile / ".config"),
        "XDG_CACHE_HOME": str(profile / ".cache"),
    }


def kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the process group of ``process`` (never raises, never blocks)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def reap(process: subprocess.Popen[bytes], profile: Path) -> None:
    """Wait for a killed Chromium and remove its profile (blocking: disk and a process wait)."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=10)
        release_group(process.pid)  # reaped: the id may be reused (else the guard keeps it)
    shutil.rmtree(profile, ignore_errors=True)


def _read_status(control: socket.socket, process: subprocess.Popen[bytes]) -> tuple[dict[str, Any], int]:
    control.settimeout(START_DEADLINE)
    try:
        message, fds, _, _ = socket.recv_fds(control, 65536, 1)
    except TimeoutError:
        raise BrowserStartError(f"chromium did not start within {START_DEADLINE:.0f}s") from None
    status = json.loads(message) if message else {"error": f"exited with status {process.poll()}"}
    if "error" in status or not fds:
        for fd in fds:
            os.close(fd)
        raise BrowserStartError(f"chromium could not start: {status.get('error', 'no proxy listener')}")
    return status, fds[0]


def launch(executable: str, root: Path, flags: list[str]) -> Launched:
    """Start a confined Chromium on a fresh profile under ``root`` (blocking; a worker thread runs it).

    Args:
        executable: The Chromium binary.
        root: Where the profile directory is made.
        flags: Chromium flags besides the fixed ones (the caller's ``CHROMIUM_FLAGS``).

    Raises:
        BrowserStartError: It did not start.
    """
    root = root.absolute()
    root.mkdir(parents=True, exist_ok=True)
    profile = Path(tempfile.mkdtemp(prefix=PROFILE_PREFIX, dir=root))
    ids = browser_ids()
    if ids is not None:
        os.chown(profile, *ids)
    cdp_in_read, cdp_in_write = os.pipe()  # we write, Chromium reads (its fd 3)
    cdp_out_read, cdp_out_write = os.pipe()  # Chromium writes (its fd 4), we read
    control, their_control = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    config = {
        "control": their_control.fileno(),
        "cdp_in": cdp_in_read,
        "cdp_out": cdp_out_write,
        "profile": str(profile),
        "cover": cover_for(root, ids),
        "reachable": _blocking_ancestor(root, ids) is None,
        "uid": ids[0] if ids else None,
        "gid": ids[1] if ids else None,
        "argv": [executable, *flags, f"--user-data-dir={profile}", "about:blank"],
        "env": _environment(profile),
    }
    passed = (their_control.fileno(), cdp_in_read, cdp_out_write)
    try:
        process = subprocess.Popen(
            [sys.executable, "-I", "-S", str(_CONFINE), json.dumps(config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=passed,
            env={},
            start_new_session=True,
        )
    except BaseException:
        for fd in (cdp_in_read, cdp_in_write, cdp_out_read, cdp_out_write):
            os.close(fd)
        control.close()
        their_control.close()
        shutil.rmtree(profile, ignore_errors=True)
        raise
    guard_group(process.pid)
    for fd in (cdp_in_read, cdp_out_write):
        os.close(fd)
    their_control.close()
    try:
        with control:
            status, listener_fd = _read_status(control, process)
    except BaseException:
        kill_group(process)
        for fd in (cdp_in_write, cdp_out_read):
            os.close(fd)
        reap(process, profile)
        raise
    confinement = Confinement(
        netns=bool(status.get("netns")),
        hidden=bool(status.get("hidden")),
        uid=int(status.get("uid", -1)),
        sandbox=bool(status.get("sandbox")),
        problems=tuple(status.get("problems") or ()),
    )
    listener = socket.socket(fileno=listener_fd)
    return Launched(process, profile, cdp_out_read, cdp_in_write, listener, confinement)
