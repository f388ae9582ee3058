"""A ``tools/call`` of a fully open MCP session is answered by the instance endpoint itself, and
answered exactly as the ``mcp`` package answers it (on either major).

The endpoint takes only a plain call (``jsonrpc``, ``id``, ``method``, ``params`` with ``name`` and
``arguments``) on a session whose ``notifications/initialized`` the package accepted, on the
2025-11-25 revision. The same call with an empty ``_meta`` in its params is left to the package,
so each call is made both ways on one session and the answers compared: status, headers and
JSON-RPC body. ``fleet_local_mcp_short_calls_total`` on ``GET /metrics`` shows which way each
went. The idle timer the short path holds is covered by ``tests/e2e/test_mcp_session_reuse.py``
(sessions still end after their idle timeout once calls went this way).
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from _http import metric_value

from fleet_local import LocalFleet
from fleet_sdk.types import env_instance as models

JSON_AND_SSE = "application/json, text/event-stream"


class RawSession:
    """One MCP session spoken by hand, so each request's exact fields are chosen by the test."""

    def __init__(self, http: httpx.AsyncClient, url: str) -> None:
        self.http = http
        self.url = url
        self.session_id: str | None = None
        self.revision: str | None = None
        self._ids = itertools.count(1)

    def headers(self) -> dict[str, str]:
        headers = {"accept": JSON_AND_SSE, "content-type": "application/json"}
        if self.session_id is not None:
            headers["mcp-session-id"] = self.session_id
        if self.revision is not None:
            headers["mcp-protocol-version"] = self.revision
        return headers

    async def open(self, revision: str = "2025-11-25", *, initialized: bool = True) -> None:
        params = {
            "protocolVersion": revision,
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        }
        answer = await self.http.post(
            self.url,
            json={"jsonrpc": "2.0", "id": next(self._ids), "method": "initialize", "params": params},
            headers=self.headers(),
        )
        assert answer.status_code == 200, answer.text
        self.session_id = answer.headers["mcp-session-id"]
        self.revision = answer.json()["result"]["protocolVersion"]
        if initialized:
            done = await self.http.post(
                self.url,
                json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                headers=self.headers(),
            )
            assert done.status_code == 202, done.text

    async def call(self, name: str, arguments: dict[str, Any], *, meta: bool = False) -> httpx.Response:
        params: dict[str, Any] = {"name": name, "arguments": arguments}
        if meta:
            params["_meta"] = {}  # a field the short path does not take: the package answers
        message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}
        return await self.http.post(self.url, json=message, headers=self.headers())

    async def close(self) -> None:
        if self.session_id is not None:
            await self.http.delete(self.url, headers=self.headers())


async def short_calls(local: LocalFleet) -> float:
    """``fleet_local_mcp_short_calls_total``: calls the endpoint answered itself."""
    return await metric_value(local, "fleet_local_mcp_short_calls_total")


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=30) as client:
        yield client


def answer(response: httpx.Response) -> tuple[int, str, str | None, Any]:
    """What a client sees of an answer: status, content type, session id and the JSON body."""
    return (
        response.status_code,
        response.headers.get("content-type", ""),
        response.headers.get("mcp-session-id"),
        response.json(),
    )


READS = [
    ("get_order", {"order_id": 1012}),  # an object: text and structuredContent
    ("export_inventory_ledger", {}),  # a string: text only
    ("list_orders", {"status": "pending"}),
    ("get_order", {"order_id": 999999}),  # a tool error: isError
    ("get_order", {}),  # a missing argument: isError
]


async def test_short_answers_equal_the_packages(
    local: LocalFleet, instance: models.InstanceResponse, http: httpx.AsyncClient
) -> None:
    assert instance.urls is not None
    for url in (f"{instance.urls.root}mcp", f"{instance.urls.root}api/v1/mcp/"):
        session = RawSession(http, url)
        await session.open()
        try:
            for name, arguments in READS:
                before = await short_calls(local)
                short = await session.call(name, arguments)
                assert await short_calls(local) == before + 1, "the endpoint answered"
                package = await session.call(name, arguments, meta=True)
                assert await short_calls(local) == before + 1, "the package answered"
                assert answer(short) == answer(package), (name, arguments)
                assert short.json()["id"] == 7 and "result" in short.json()
            # A write: the same shape either way (its row ids and times differ).
            note = {"order_id": 1012, "body": "from the short path"}
            short, package = (
                await session.call("add_order_note", note),
                await session.call("add_order_note", note, meta=True),
            )
            assert short.status_code == package.status_code == 200
            short_result, package_result = short.json()["result"], package.json()["result"]
            assert short_result.keys() == package_result.keys() and short_result["isError"] is False
            assert short_result["structuredContent"].keys() == package_result["structuredContent"].keys()
        finally:
            await session.close()


async def test_what_the_short_path_leaves_to_the_package(
    local: LocalFleet, instance: models.InstanceResponse, http: httpx.AsyncClient
) -> None:
    assert instance.urls is not None
    url = f"{instance.urls.root}mcp"
    before = await short_calls(local)
    # An unknown tool: the package's JSON-RPC error.
    session = RawSession(http, url)
    await session.open()
    unknown = (await session.call("no_such_tool", {})).json()
    assert unknown["error"]["code"] == -32602 and "no_such_tool" in unknown["error"]["message"]
    # A request id that is not an integer or string (the count at the end shows who answered).
    await http.post(
        url,
        json={"jsonrpc": "2.0", "id": None, "method": "tools/call", "params": {"name": "get_order"}},
        headers=session.headers(),
    )
    # A call before ``notifications/initialized``: each major answers it its own way.
    early = RawSession(http, url)
    await early.open(initialized=False)
    await early.call("get_order", {"order_id": 1012})
    await early.close()
    # A session that ended: the package's 404.
    await session.close()
    assert (await session.call("get_order", {"order_id": 1012})).status_code == 404
    # An older revision: the package shapes the answer for it.
    older = RawSession(http, url)
    await older.open("2025-06-18")
    assert older.revision == "2025-06-18"
    assert (await older.call("get_order", {"order_id": 1012})).status_code == 200
    await older.close()
    assert await short_calls(local) == before
