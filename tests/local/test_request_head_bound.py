"""A request's line and headers are bounded under either HTTP parser the server may run.

The server parses HTTP with httptools when it is installed and with h11 otherwise
(``fleet_local._server.http_protocol``). h11 refuses a head still incomplete after 16 KiB; uvicorn's
httptools protocol alone buffered a header block of any size (a 32 MiB header was accepted, after
seconds of CPU concatenating its pieces), so the server runs it with the same bound. These tests
hold whichever parser this interpreter has to the same answers, over a bare socket.
"""

from __future__ import annotations

import socket
import sys

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
    pytest.importorskip("httptools", reason="httptools (the server extra) is not installed here")
    from fleet_local._httptools_protocol import MAX_HEAD_BYTES, BoundedHttpToolsProtocol

    assert http_protocol() is BoundedHttpToolsProtocol
    assert MAX_HEAD_BYTES == HEAD_LIMIT
