"""Run as a script between the server and one Chromium: confine this process, then become Chromium.

``_chromium_launch`` starts ``python -I -S _chromium_confine.py <config>`` in a process group of
its own; this script (standard library only, so it starts in a few milliseconds) then, as far as
the machine allows:

1. enters a network namespace of its own, with only a loopback interface (and a user namespace
   first when not run as root), so the browser reaches no host directly, whatever CDP tells it;
2. in a mount namespace of its own, covers the server's data dir (or the first of its parents the
   browser's uid cannot enter) with an empty tmpfs and binds only the browser's profile back at
   its own path, so the browser sees none of the server's files;
3. opens a loopback listener inside that namespace, names it in Chromium's ``--proxy-server``
   (``<-loopback>``: loopback too) and hands it to the server (``SCM_RIGHTS`` on the control
   socket), whose SOCKS proxy (``_socks``) connects only to the lease's allowed hosts;
4. when run as root, drops to the browser's own uid and gid (no supplementary groups), so
   Chromium runs with its sandbox on and cannot read what only root can;
5. checks that this uid may create a user namespace (Chromium's sandbox needs one) and adds
   ``--no-sandbox`` only when it may not;
6. puts the CDP pipe on fds 3 and 4 (``--remote-debugging-pipe``) and executes Chromium.

What held is reported on the control socket with the listener, as JSON: ``netns``, ``hidden``,
``uid``, ``sandbox``. A step the machine refuses (no user namespaces, no mount rights) is skipped
and reported; the server says so once (``_chromium``).
"""

from __future__ import annotations

import ctypes
import fcntl
import json
import os
import socket
import struct
import sys
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
MS_NOSUID = 0x2
MS_NODEV = 0x4
SIOCSIFFLAGS = 0x8914
IFF_UP_LOOPBACK_RUNNING = 0x1 | 0x8 | 0x40

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _write(path: str, text: str) -> None:
    with open(path, "w") as file:
        file.write(text)


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", IFF_UP_LOOPBACK_RUNNING))


def _enter_namespaces() -> None:
    """A network and a mount namespace; a user namespace first when not root (same ids inside)."""
    uid, gid = os.geteuid(), os.getegid()
    flags = CLONE_NEWNET | CLONE_NEWNS | (0 if uid == 0 else CLONE_NEWUSER)
    _check(_libc.unshare(flags), "unshare")
    if uid != 0:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    _loopback_up()


def _hide_all_but_profile(cover: str, profile: str) -> None:
    """Cover ``cover`` with an empty tmpfs and bind ``profile`` (inside it) back at its own path."""
    kept = os.open(profile, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        _check(_libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "mount --make-rprivate /")
        _check(
            _libc.mount(b"tmpfs", cover.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=0755,size=1m"),
            "mount tmpfs",
        )
        os.makedirs(profile, mode=0o755, exist_ok=True)
        source = f"/proc/self/fd/{kept}".encode()
        _check(_libc.mount(source, profile.encode(), None, MS_BIND, None), "bind the profile")
    finally:
        os.close(kept)


def _drop_to(uid: int, gid: int) -> None:
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)


def _may_create_user_namespace() -> bool:
    """Chromium's sandbox needs a user namespace (this Chromium has no setuid sandbox helper)."""
    child = os.fork()
    if child == 0:  # pragma: no cover - the child only exits
        os._exit(0 if _libc.unshare(CLONE_NEWUSER) == 0 else 1)
    _, status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(status) == 0


def _high(fd: int) -> int:
    """``fd`` moved above the numbers the pipe must take (3, 4)."""
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
    os.close(fd)
    return moved


def main(config: dict[str, Any]) -> None:
    """Confine this process as far as the machine allows, report it, and execute Chromium.

    Args:
        config: ``control``, ``cdp_in``, ``cdp_out`` (inherited fds), ``profile``, ``cover``
            (None: hide nothing), ``uid``/``gid`` (None: keep this one), ``reachable`` (that uid
            may enter the profile without the cover), ``argv``, ``env``.
    """
    control = socket.socket(fileno=_high(int(config["control"])))
    try:
        _confine_and_exec(control, config)
    except Exception as exc:  # the server reads why on the control socket; Chromium never ran
        control.sendall(json.dumps({"error": f"{type(exc).__name__}: {exc}"}).encode())
        raise SystemExit(1) from None


def _confine_and_exec(control: socket.socket, config: dict[str, Any]) -> None:
    cdp_in, cdp_out = _high(int(config["cdp_in"])), _high(int(config["cdp_out"]))
    profile: str = config["profile"]
    ids = (int(config["uid"]), int(config["gid"])) if config.get("uid") is not None else None
    status: dict[str, Any] = {"netns": False, "hidden": False, "problems": []}
    try:
        _enter_namespaces()
        status["netns"] = True
    except OSError as exc:
        status["problems"].append(f"no network namespace ({exc.strerror or exc})")
    if status["netns"] and config.get("cover"):
        try:
            _hide_all_but_profile(config["cover"], profile)
            status["hidden"] = True
        except OSError as exc:
            status["problems"].append(f"the data dir stays visible ({exc.strerror or exc})")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    if os.geteuid() == 0 and ids is not None:
        if status["hidden"] or config.get("reachable"):
            _drop_to(*ids)
        else:
            status["problems"].append("the profile is out of reach of the browser's uid")
    status["uid"] = os.geteuid()
    status["sandbox"] = os.geteuid() != 0 and _may_create_user_namespace()
    argv: list[str] = list(config["argv"])
    port = listener.getsockname()[1]
    # Every connection, loopback included ("<-loopback>"), asks the server's SOCKS proxy.
    argv[1:1] = [f"--proxy-server=socks5://127.0.0.1:{port}", "--proxy-bypass-list=<-loopback>"]
    if not status["sandbox"]:
        argv.insert(1, "--no-sandbox")
    socket.send_fds(control, [json.dumps(status).encode()], [listener.fileno()])
    listener.close()
    control.close()
    os.dup2(cdp_in, 3, inheritable=True)
    os.dup2(cdp_out, 4, inheritable=True)
    os.close(cdp_in)
    os.close(cdp_out)
    os.execve(argv[0], argv, dict(config["env"]))


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
