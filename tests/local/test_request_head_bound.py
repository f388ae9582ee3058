"""A request's line and headers are bounded under either HTTP parser the server may run.

The server parses HTTP with httptools when it is installed and with h11 otherwise
(``fleet_local._server.http_protocol``). h11 refuses a head still incomplete after 16 KiB; uvicorn's
httptools protocol alone buffered a header block of any size (a 32 MiB header was accepted, after
seconds of CPU concatenating its pieces), so the server runs it with the same bound. These tests
hold whichever parser this interpreter has to the same answers, over a bare socket.
"""

from __future__ import annotations

import asyncio
import socket
import sys
from typing import Any

import pytest
from _waits import PATIENCE

from fleet_local import LocalFleet
from fleet_local._server import http_protocol

HEAD_LIMIT = 16 * 1024


def _connect(server: LocalFleet) -> socket.socket:
    host, port = server.base_url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=PATIENCE)


def _read_until_closed(sock: socket.socket) -> bytes:
    reply = b""
    while chunk := sock.recv(65536):
        reply += chunk
    return reply


def _responses(sock: socket.socket, count: int) -> list[tuple[int, bytes]]:
    """Read ``count`` responses with a ``Content-Length`` off a kept-alive connection."""
    buffer, found = b"", []
    while len(found) < count:
        if b"\r\n\r\n" in buffer:
            head, rest = buffer.split(b"\r\n\r\n", 1)
            length = next(
                int(value)
                for name, _, value in (line.partition(b":") for line in head.split(b"\r\n")[1:])
                if name.strip().lower() == b"content-length"
            )
            if len(rest) >= length:
                found.append((int(head.split(b" ", 2)[1]), rest[:length]))
                buffer = rest[length:]
                continue
        chunk = sock.recv(65536)
        assert chunk, f"the server closed the connection after {len(found)} of {count} responses"
        buffer += chunk
    return found


def _get(local: LocalFleet, extra: str = "") -> bytes:
    return (
        f"GET /v1/regions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {local.api_key}\r\n{extra}"
    ).encode()


@pytest.mark.parametrize(
    "unfinished",
    [b"X-Pad: " + b"a" * (20 * 1024), b"X-N: v\r\n" * 2600],
    ids=["one-long-header", "many-headers"],
)
def test_a_head_still_incomplete_past_16_kib_is_refused_and_the_connection_closed(
    local: LocalFleet, unfinished: bytes
) -> None:
    with _connect(local) as sock:
        sock.sendall(_get(local) + unfinished)  # one send, read whole: nothing left unread
        reply = _read_until_closed(sock)  # the server closes it: the head never has to end
    assert reply.startswith(b"HTTP/1.1 400 "), reply[:200]
    assert reply.endswith(b"Invalid HTTP request received."), reply[-200:]
    with _connect(local) as sock:  # and the server goes on answering
        sock.sendall(_get(local) + b"\r\n")
        assert _responses(sock, 1)[0][0] == 200


def test_a_complete_12_kib_header_block_is_served(local: LocalFleet) -> None:
    with _connect(local) as sock:
        sock.sendall(_get(local, "X-Pad: " + "a" * (12 * 1024) + "\r\n") + b"\r\n")
        [(status, body)] = _responses(sock, 1)
    assert status == 200 and body.startswith(b"[")


def test_pipelined_requests_after_a_large_body_are_all_answered(local: LocalFleet) -> None:
    """A read holding the end of one request's body and the start of the next head must not
    count the body against the next head (it is a 12 KiB head, under the bound)."""
    body = b"x" * (128 * 1024)
    first = _get(local, f"Content-Length: {len(body)}\r\n") + b"\r\n" + body
    second = _get(local, "X-Pad: " + "a" * (12 * 1024) + "\r\n") + b"\r\n"
    with _connect(local) as sock:
        sock.sendall(first + second[: len(second) // 2])
        sock.sendall(second[len(second) // 2 :] + _get(local) + b"\r\n")
        answers = _responses(sock, 3)
    assert [status for status, _ in answers] == [200, 200, 200]


def test_without_httptools_the_server_parses_with_h11(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "httptools", None)  # as if it were not installed
    assert http_protocol() == "h11"


def test_with_httptools_the_server_parses_with_it_under_the_head_bound() -> None:
    # httptools comes with the server extra, which the test extra installs: no skip without it.
    from fleet_local._httptools_protocol import MAX_HEAD_BYTES, BoundedHttpToolsProtocol

    assert http_protocol() is BoundedHttpToolsProtocol
    assert MAX_HEAD_BYTES == HEAD_LIMIT


# ---------------------------------------------------------------- read by read, under httptools
# The server's own protocol on a real socket pair, fed by the test itself so that where each read
# ends is chosen, not left to the kernel; the answers are read off the socket's other end.


async def _ok(scope: dict[str, Any], receive: Any, send: Any) -> None:
    more = True
    while more:
        more = (await receive()).get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


async def _fed(reads: list[bytes], answers: int) -> tuple[list[int], list[bool]]:
    """Feed ``reads`` one ``data_received`` each to the server's httptools protocol; return the
    statuses of up to ``answers`` responses and whether the connection was closing after each read."""
    import uvicorn
    from uvicorn.server import ServerState

    from fleet_local._httptools_protocol import BoundedHttpToolsProtocol

    config = uvicorn.Config(_ok, http=BoundedHttpToolsProtocol, lifespan="off", log_level="error")
    config.load()
    state = ServerState()
    loop = asyncio.get_running_loop()
    ours, theirs = socket.socketpair()
    theirs.setblocking(False)
    transport, protocol = await loop.connect_accepted_socket(
        lambda: BoundedHttpToolsProtocol(config=config, server_state=state, app_state={}), ours
    )
    closing = []
    for read in reads:
        protocol.data_received(read)
        closing.append(transport.is_closing())
    received = b""
    try:
        async with asyncio.timeout(PATIENCE):
            while received.count(b"HTTP/1.1 ") < answers or not received.endswith((b"ok", b"received.")):
                chunk = await loop.sock_recv(theirs, 65536)
                if not chunk:
                    break
                received += chunk
    finally:
        transport.close()
        theirs.close()
    statuses = [int(part.split(b" ", 1)[0]) for part in received.split(b"HTTP/1.1 ")[1:]]
    return statuses, closing


async def test_a_head_arriving_in_reads_is_refused_once_it_passes_16_kib_incomplete() -> None:
    start = b"GET / HTTP/1.1\r\nHost: x\r\nX-Pad: "
    pad = start + b"a" * (HEAD_LIMIT - len(start))  # exactly the bound: still held
    statuses, closing = await _fed([pad[:8192], pad[8192:], b"a"], 1)
    assert closing == [False, False, True]
    assert statuses == [400]


async def test_a_20_kib_head_arriving_whole_in_one_read_is_served_as_under_h11() -> None:
    head = b"GET / HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * (20 * 1024) + b"\r\n\r\n"
    statuses, closing = await _fed([head], 1)
    assert (statuses, closing) == ([200], [False])


async def test_a_read_ending_a_large_body_does_not_count_it_against_the_next_head() -> None:
    """A pipelined read holding 60 KiB of one request's body and the first 12 KiB of the next
    head: only the head counts (counting the whole read would refuse a valid request)."""
    body = b"x" * (100 * 1024)
    first = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body)
    second = b"GET / HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * (14 * 1024) + b"\r\n\r\n"
    reads = [first + body[:40960], body[40960:] + second[:12288], second[12288:]]
    statuses, closing = await _fed(reads, 2)
    assert (statuses, closing) == ([200, 200], [False, False, False])


# ---------------------------------------------------------------- the bound against uvicorn's code
# The bound subclasses uvicorn's httptools protocol, whose internals are not a public API. These
# fail loudly when a uvicorn upgrade moves what it hooks into, instead of leaving it uncalled.


async def test_uvicorn_still_has_what_the_head_bound_hooks_into() -> None:
    """If this fails after a uvicorn upgrade, the server runs h11 (and warns) until
    ``fleet_local/_httptools_protocol.py`` is fitted to the new uvicorn."""
    import uvicorn
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    from fleet_local._httptools_protocol import BoundedHttpToolsProtocol, _Part, uvicorn_mismatches

    assert uvicorn_mismatches() == [], f"uvicorn {uvicorn.__version__}"
    overridden = ["data_received", "on_message_begin", "on_headers_complete", "on_message_complete"]
    assert all(name in vars(HttpToolsProtocol) for name in overridden)
    # and the parser calls the subclass's overrides: a head's first read is counted
    from uvicorn.server import ServerState

    config = uvicorn.Config(_ok, http=BoundedHttpToolsProtocol, lifespan="off", log_level="error")
    config.load()
    ours, theirs = socket.socketpair()
    transport, protocol = await asyncio.get_running_loop().connect_accepted_socket(
        lambda: BoundedHttpToolsProtocol(config=config, server_state=ServerState(), app_state={}), ours
    )
    try:
        head = b"GET / HTTP/1.1\r\nHost: x\r\nX-Pad: aaaa"
        protocol.data_received(head)
        assert (protocol._part, protocol._head_bytes) == (_Part.HEAD, len(head))
    finally:
        transport.close()
        theirs.close()


@pytest.mark.parametrize(
    "hook",
    ["data_received", "on_message_begin", "on_headers_complete", "on_message_complete", "send_400_response"],
)
def test_a_uvicorn_without_a_hook_of_the_bound_gets_h11_and_a_warning(
    hook: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    monkeypatch.delattr(HttpToolsProtocol, hook)  # as a uvicorn that renamed it would be
    with caplog.at_level("WARNING", logger="fleet_local._server"):
        assert http_protocol() == "h11"
    assert f"HttpToolsProtocol.{hook} is gone" in caplog.text


def test_a_uvicorn_reading_through_buffer_updated_gets_h11(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A ``BufferedProtocol`` never calls ``data_received``: the bound would never count a read."""
    import uvicorn.protocols.http.httptools_impl as impl

    class Buffered(impl.HttpToolsProtocol, asyncio.BufferedProtocol):
        pass

    monkeypatch.setattr("fleet_local._httptools_protocol.HttpToolsProtocol", Buffered)
    with caplog.at_level("WARNING", logger="fleet_local._server"):
        assert http_protocol() == "h11"
    assert "reads through buffer_updated" in caplog.text
