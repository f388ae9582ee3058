"""uvicorn's httptools protocol with h11's bound on a request's head.

The server parses HTTP with ``httptools`` (llhttp, in C) when it is installed: it costs less CPU
per request than uvicorn's pure-Python ``h11`` parser. The two differ in one way that matters
here: h11 refuses (400) a request whose line and headers are still incomplete after 16 KiB have
arrived, while uvicorn's httptools protocol buffers a header block of any size (a 32 MiB header
is accepted, and concatenating its pieces costs seconds of CPU). This subclass adds h11's rule.

Importing this module needs ``httptools``; ``_server.py`` imports it only when it is installed.
"""

from __future__ import annotations

import asyncio
import enum
import inspect

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["MAX_HEAD_BYTES", "BoundedHttpToolsProtocol", "uvicorn_mismatches"]

MAX_HEAD_BYTES = 16 * 1024
"""The most bytes of a request line and headers the server holds while they are still incomplete
(h11's default ``max_incomplete_event_size``): a head that arrives whole in one read may be
longer, as under h11."""

_INVALID = "Invalid HTTP request received."  # uvicorn's own words for a 400, under either parser


# What the bound hooks into: the parser calls these on the protocol it was built with (uvicorn
# builds ``httptools.HttpRequestParser(self)``), and every read arrives through
# ``data_received``. A uvicorn that renamed one, or read through ``BufferedProtocol``'s
# ``buffer_updated``, would leave the subclass's counting uncalled: the bound silently gone.
_HOOKS = (
    "data_received",
    "on_message_begin",
    "on_headers_complete",
    "on_message_complete",
    "send_400_response",
)


def uvicorn_mismatches() -> list[str]:
    """What the bound needs of uvicorn's ``HttpToolsProtocol`` and this uvicorn lacks (empty when
    it fits): the methods it overrides or calls, plain ``data_received`` reads, and uvicorn's
    own 400 text. ``_server.http_protocol`` falls back to h11 when this is not empty."""
    found = [
        f"HttpToolsProtocol.{name} is gone"
        for name in _HOOKS
        # uvicorn's own: asyncio.Protocol's empty data_received would not feed the parser
        if not any(
            name in vars(cls) for cls in HttpToolsProtocol.__mro__ if cls.__module__.startswith("uvicorn.")
        )
    ]
    if issubclass(HttpToolsProtocol, asyncio.BufferedProtocol):
        found.append("HttpToolsProtocol reads through buffer_updated, not data_received")
    try:
        source = inspect.getsource(HttpToolsProtocol)
    except (OSError, TypeError):  # no source shipped (a compiled or zipped install)
        source = None
    if source is not None:
        if "HttpRequestParser(self)" not in source:
            found.append("HttpToolsProtocol no longer hands itself to httptools' parser as its callbacks")
        if _INVALID not in source:
            found.append(f"HttpToolsProtocol no longer answers {_INVALID!r}")
    return found


class _Part(enum.Enum):
    IDLE = "between requests"
    HEAD = "in a request's line and headers"
    BODY = "past the headers"


class BoundedHttpToolsProtocol(HttpToolsProtocol):
    """``HttpToolsProtocol`` answering 400 and closing the connection once more than
    ``MAX_HEAD_BYTES`` of a request's head have arrived without the head being complete.

    A read that starts between requests or inside a head is counted exactly. When one read holds
    the end of a request and the start of the next (pipelining, which no common client does), the
    next head is counted from the following read on, so a head is held to at most
    ``MAX_HEAD_BYTES`` plus one read (at most 256 KiB).
    """

    _part = _Part.IDLE
    _head_bytes = 0
    _heads_begun = 0

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._part = _Part.HEAD
        self._heads_begun += 1

    def on_headers_complete(self) -> None:
        self._part = _Part.BODY
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._part = _Part.IDLE

    def data_received(self, data: bytes) -> None:
        before = self._part
        self._heads_begun = 0
        super().data_received(data)
        if self._part is not _Part.HEAD or self.transport.is_closing():
            return
        if self._heads_begun == 0:  # the whole read belongs to the head already under way
            self._head_bytes += len(data)
        elif self._heads_begun == 1 and before is _Part.IDLE:  # the read started this head
            self._head_bytes = len(data)
        else:  # the read also ended an earlier request: its share is unknown
            self._head_bytes = 0
        if self._head_bytes > MAX_HEAD_BYTES:
            self.logger.warning(_INVALID)
            self.send_400_response(_INVALID)
