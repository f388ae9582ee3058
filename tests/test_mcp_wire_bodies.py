"""MCP answers the client reads: SSE streams as the mcp server sends them, and non-JSON bodies.

A real ``mcp`` server (FastMCP, ``json_response=False``) runs on loopback: its SSE stream ends
lines in CRLF and carries a log notification before the tool's response.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from _waits import PATIENCE, wait_until
from starlette.types import Receive, Scope, Send

try:  # mcp 2.x renamed FastMCP to MCPServer
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver import MCPServer as Server

    MCP_V2 = True
except ImportError:  # mcp 1.x
    from mcp.server.fastmcp import Context  # type: ignore[no-redef]
    from mcp.server.fastmcp import FastMCP as Server  # type: ignore[no-redef]

    MCP_V2 = False

from fleet_sdk import MCPError
from fleet_sdk.mcp import MCPClient

HTML = b"<!doctype html><html><body>login</body></html>"


def _app() -> object:
    if MCP_V2:
        server: Any = Server("sse-wire")
    else:
        server = Server("sse-wire", json_response=False, stateless_http=True)

    @server.tool()  # type: ignore[misc]
    async def greet(name: str, ctx: Context) -> str:
        await ctx.info(f"greeting {name}")  # a notification on the stream, before the response
        return f"hello {name}"

    if MCP_V2:
        mcp_app = server.streamable_http_app(json_response=False, stateless_http=True)
    else:
        mcp_app = server.streamable_http_app()

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == "/html":
            await send(
                {"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/html")]}
            )
            await send({"type": "http.response.body", "body": HTML})
            return
        await mcp_app(scope, receive, send)

    return app


@pytest.fixture(scope="module")
def base_url() -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = uvicorn.Config(_app(), host="127.0.0.1", port=port, log_level="warning")  # type: ignore[arg-type]
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    wait_until(lambda: server.started, "the MCP server started")
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(PATIENCE)


async def test_a_crlf_sse_stream_with_a_notification_first_yields_the_response(base_url: str) -> None:
    client = MCPClient([f"{base_url}/mcp"])
    try:
        assert await client.call_tool("greet", {"name": "ada"}, deadline=20) == "hello ada"
    finally:
        await client.aclose()


async def test_an_html_answer_is_a_typed_error_naming_the_endpoint_and_content_type(base_url: str) -> None:
    client = MCPClient([f"{base_url}/html"])
    try:
        with pytest.raises(MCPError, match=r"/html \(text/html\) is not JSON"):
            await client.list_tools()
    finally:
        await client.aclose()


async def test_listing_tolerates_one_endpoint_that_answers_html(base_url: str) -> None:
    client = MCPClient([f"{base_url}/html", f"{base_url}/mcp"])
    try:
        assert [tool.name for tool in await client.list_tools()] == ["greet"]
    finally:
        await client.aclose()
