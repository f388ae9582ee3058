"""Every attempt says which retry it is (``X-Fleet-Retry-Count``) beside the stable ``X-Request-ID``.

A server behind several answers of 503 sees one request id and the counts 0, 1, 2: it can tell
a retry from a new call, as openai-python's ``x-stainless-retry-count`` lets its API do. The
server here is a real one on loopback (the standard library's), so what is checked is what
went over the wire on each attempt, not a request object the client reuses.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from fleet_sdk._runtime import (
    REQUEST_ID_HEADER,
    RETRY_COUNT_HEADER,
    AsyncHTTPClient,
    CallPolicy,
    HTTPClient,
    RetryPolicy,
)

POLICY = CallPolicy(retry=RetryPolicy(max_retries=3, backoff_base=0.01, backoff_max=0.02))


class _Flaky(ThreadingHTTPServer):
    """Answers 503 to the first ``failures`` requests, then 200; records each request's headers."""

    def __init__(self, failures: int) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.failures = failures
        self.seen: list[dict[str, str]] = []


class _Handler(BaseHTTPRequestHandler):
    server: _Flaky

    def do_GET(self) -> None:
        self.server.seen.append(dict(self.headers.items()))
        failed = len(self.server.seen) <= self.server.failures
        body = b'{"detail": "warming up"}' if failed else b'{"ok": true}'
        self.send_response(503 if failed else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def flaky() -> Iterator[_Flaky]:
    server = _Flaky(failures=2)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _url(server: _Flaky) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def _assert_counted(seen: list[dict[str, str]], retries_taken: int) -> None:
    assert [headers[RETRY_COUNT_HEADER] for headers in seen] == ["0", "1", "2"]
    assert len({headers[REQUEST_ID_HEADER] for headers in seen}) == 1
    assert retries_taken == 2


def test_the_sync_client_counts_its_retries_on_the_wire(flaky: _Flaky) -> None:
    with HTTPClient(_url(flaky), api_key="k-0123456789", policy=POLICY) as client:
        raw = client.request_raw("GET", "/v1/ping", cast_to=dict)
    _assert_counted(flaky.seen, raw.retries_taken)


async def test_the_async_client_counts_its_retries_on_the_wire(flaky: _Flaky) -> None:
    async with AsyncHTTPClient(_url(flaky), api_key="k-0123456789", policy=POLICY) as client:
        raw = await client.request_raw("GET", "/v1/ping", cast_to=dict)
    _assert_counted(flaky.seen, raw.retries_taken)
    # A new call starts at 0 again, under a new request id.
    flaky.failures = 0
    async with AsyncHTTPClient(_url(flaky), api_key="k-0123456789", policy=POLICY) as client:
        await client.request_raw("GET", "/v1/ping", cast_to=dict)
    assert flaky.seen[-1][RETRY_COUNT_HEADER] == "0"
    assert flaky.seen[-1][REQUEST_ID_HEADER] != flaky.seen[0][REQUEST_ID_HEADER]
