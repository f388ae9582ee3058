"""What a local server takes before it starts anything: its address and its data dir.

``claim_server`` binds the listening socket and locks the data dir (``fcntl.flock`` on
``<data-dir>/server.lock``), so a busy port or a data dir another server is using ends
``fleet-sdk serve`` at once with one line, before the server stack is even imported. The lock
belongs to the open file, so it dies with the process that holds it, SIGKILLed or not: no stale
lock is ever left behind. This module imports only the standard library and the SDK's
exceptions, so the command line can call it first.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from fleet_sdk import ConfigurationError

__all__ = ["LOCK_FILE", "ServerClaim", "claim_server"]

LOCK_FILE = "server.lock"
"""The file in the data dir a running server holds locked (it holds that server's pid)."""


@dataclass
class ServerClaim:
    """A bound, listening socket and the locked data dir: what one server owns while it runs.

    Attributes:
        socket: The listening socket (``host``, ``port`` as bound: port 0 is resolved).
        data_dir: The data dir, created if it was missing.
        lock_fd: The open descriptor holding the data dir's lock.
    """

    socket: socket.socket
    data_dir: Path
    lock_fd: int

    def release(self) -> None:
        """Close the socket and give the data dir up (idempotent)."""
        self.socket.close()
        if self.lock_fd >= 0:
            fd, self.lock_fd = self.lock_fd, -1
            os.close(fd)  # closing the only descriptor of the file releases the lock


def _listen(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted sockets inherit this: without it small responses wait ~40 ms on delayed ACKs.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        reason = "the port is already in use" if exc.errno == errno.EADDRINUSE else exc.strerror or str(exc)
        raise ConfigurationError(f"cannot listen on {host}:{port}: {reason}") from None
    # Listen now: the ready line is printed before uvicorn starts accepting, and a bound socket
    # that is not listening refuses the connections of a fast client.
    sock.listen(2048)
    return sock


def _lock(data_dir: Path) -> int:
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)  # not inherited by children
    except OSError as exc:
        raise ConfigurationError(f"cannot use the data dir {data_dir}: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.read(fd, 32).decode("ascii", "replace").strip()
        os.close(fd)
        by = f" (pid {holder})" if holder.isdigit() else ""
        raise ConfigurationError(f"the data dir {data_dir} is in use by another local server{by}") from None
    except OSError as exc:
        os.close(fd)
        raise ConfigurationError(f"cannot lock the data dir {data_dir}: {exc.strerror or exc}") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def claim_server(host: str, port: int, data_dir: Path) -> ServerClaim:
    """Bind ``host:port`` and lock ``data_dir`` for one server, or say in one line why not.

    Args:
        host: Interface to bind.
        port: Port to bind (0 picks a free one).
        data_dir: The server's data dir (created when missing).

    Raises:
        ConfigurationError: The port is in use (or cannot be bound), another server holds the
            data dir (the message names its pid), or the data dir cannot be created or locked.
    """
    sock = _listen(host, port)
    try:
        fd = _lock(data_dir)
    except BaseException:
        sock.close()
        raise
    return ServerClaim(sock, data_dir, fd)
