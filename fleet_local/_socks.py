"""The SOCKS5 proxy every connection of a lease's Chromium goes through: only its allowed hosts.

Chromium is started with ``--proxy-server=socks5://127.0.0.1:<port>`` and ``<-loopback>`` in its
bypass list, so every connection it makes (pages, sub-resources, WebSockets, loopback included)
asks this proxy for a host and a port, by name: the proxy connects only when
:func:`~fleet_local._hosts.host_port_allowed` says the lease may, and refuses the rest (SOCKS reply
2, "not allowed by ruleset"). The listener lives inside the browser's network namespace
(``_chromium_confine``), where nothing else listens and no interface leads out, so a browser context
made with ``proxyServer: "direct://"`` reaches nothing. One connection is one tunnel to one host,
so no request on a kept-alive connection can change its destination.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
from collections.abc import Sequence

from ._hosts import host_port_allowed

__all__ = ["SocksProxy"]

logger = logging.getLogger(__name__)

HANDSHAKE_TIMEOUT = 10.0
"""Seconds a client gets to say where it connects."""
CONNECT_TIMEOUT = 15.0
"""Seconds to reach an allowed host."""
_CHUNK = 64 * 1024

_SUCCEEDED, _NOT_ALLOWED, _UNREACHABLE, _REFUSED, _UNSUPPORTED, _BAD_ADDRESS = 0, 2, 4, 5, 7, 8


class _Refused(Exception):
    def __init__(self, reply: int) -> None:
        super().__init__(reply)
        self.reply = reply


def _reply(code: int) -> bytes:
    return bytes([5, code, 0, 1, 0, 0, 0, 0, 0, 0])


class SocksProxy:
    """Serve SOCKS5 ``CONNECT`` on a listening socket, to ``allowed_hosts`` only.

    Args:
        listener: A listening TCP socket (the server takes it over).
        allowed_hosts: The lease's hosts.
    """

    def __init__(self, listener: socket.socket, allowed_hosts: Sequence[str]) -> None:
        self._listener = listener
        self._allowed = list(allowed_hosts)
        self._server: asyncio.Server | None = None
        self._tunnels: set[asyncio.Task[None]] = set()
        self.refused: list[str] = []
        """``host:port`` of every connection refused (newest last; the last 100)."""

    @property
    def port(self) -> int:
        """The listener's port (in the browser's network namespace when it has one)."""
        return int(self._listener.getsockname()[1])

    async def start(self) -> None:
        """Accept connections from now on."""
        self._server = await asyncio.start_server(self._serve, sock=self._listener)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tunnels.add(task)
        upstream: asyncio.StreamWriter | None = None
        try:
            try:
                async with asyncio.timeout(HANDSHAKE_TIMEOUT):
                    host, port = await self._handshake(reader, writer)
                if not host_port_allowed(host, port, self._allowed):
                    self.refused = [*self.refused[-99:], f"{host}:{port}"]
                    logger.info("lease proxy refused %s:%s: not in allowed_hosts", host, port)
                    raise _Refused(_NOT_ALLOWED)
                try:
                    async with asyncio.timeout(CONNECT_TIMEOUT):
                        up_reader, upstream = await asyncio.open_connection(host, port)
                except TimeoutError:
                    raise _Refused(_UNREACHABLE) from None
                except OSError:
                    raise _Refused(_REFUSED) from None
            except _Refused as refused:
                writer.write(_reply(refused.reply))
                return
            writer.write(_reply(_SUCCEEDED))
            await asyncio.gather(_pipe(reader, upstream), _pipe(up_reader, writer))
        except (OSError, asyncio.IncompleteReadError, TimeoutError):
            return
        finally:
            self._tunnels.discard(task)
            for stream in (writer, upstream):
                if stream is not None:
                    stream.close()

    @staticmethod
    async def _handshake(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> tuple[str, int]:
        version, count = await reader.readexactly(2)
        methods = await reader.readexactly(count)
        if version != 5 or 0 not in methods:
            writer.write(b"\x05\xff")  # no acceptable method: only "no authentication" is offered
            raise ConnectionAbortedError("not a SOCKS5 client without authentication")
        writer.write(b"\x05\x00")
        version, command, _, kind = await reader.readexactly(4)
        if kind == 1:
            host = str(ipaddress.IPv4Address(await reader.readexactly(4)))
        elif kind == 4:
            host = str(ipaddress.IPv6Address(await reader.readexactly(16)))
        elif kind == 3:
            length = (await reader.readexactly(1))[0]
            try:
                host = (await reader.readexactly(length)).decode("ascii")
            except UnicodeDecodeError:
                raise _Refused(_BAD_ADDRESS) from None
        else:
            raise _Refused(_BAD_ADDRESS)
        port = int.from_bytes(await reader.readexactly(2), "big")
        if version != 5 or command != 1:  # CONNECT only: no BIND, no UDP ASSOCIATE
            raise _Refused(_UNSUPPORTED)
        return host, port

    async def aclose(self) -> None:
        """Stop accepting and cut every tunnel."""
        if self._server is not None:
            self._server.close()
        else:
            self._listener.close()
        for task in list(self._tunnels):
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*self._tunnels, return_exceptions=True)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until end of file, then pass the half close on."""
    try:
        while chunk := await reader.read(_CHUNK):
            writer.write(chunk)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except OSError:
        writer.close()
