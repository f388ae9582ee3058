"""MCP access to an environment instance: tool listing as a union over endpoints,
and tool calls with retries inside a wall-clock deadline (PROTOCOL section 4).

- Tools are the union over the endpoints that answer, de-duplicated by name, the
  first endpoint to list a tool owning it. An endpoint that fails is tolerated
  only if another returned tools, and the partial union is logged as a warning
  (one tool out of 157 once went unnoticed); an empty union is an error.
- A tool that does not exist is never retried. Transport failures are retried
  with exponential backoff, but never past the call's deadline (one dead call
  once retried for 8.5 minutes against a 120 s step budget).

The ``mcp`` package is imported on first use, not with ``fleet_sdk``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import httpx

from ._exceptions import MCPError, ToolNotFoundError, ToolsUnavailableError
from ._mcp_results import extract_tool_result
from ._runtime import Deadline, RetryPolicy
from .tools import Tool

__all__ = ["MCPClient", "extract_tool_result"]

log = logging.getLogger("fleet_sdk.mcp")

DEFAULT_CALL_DEADLINE = 120.0
DEFAULT_LIST_DEADLINE = 60.0


def _describe(exc: BaseException) -> str:
    # anyio task groups wrap failures in ExceptionGroups; report the leaves.
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}"


class MCPClient:
    """Async MCP client over streamable HTTP for one instance's endpoints.

    Args:
        endpoints: MCP URLs in priority order, e.g. ``[root + "mcp", root + "api/v1/mcp"]``.
        headers: Extra HTTP headers for every MCP request.
        retry: Backoff policy for transport failures.
        call_deadline: Default wall-clock seconds per tool call, retries included.
        list_deadline: Wall-clock seconds for listing tools.
        attempt_timeout: Seconds for one HTTP attempt.
    """

    def __init__(
        self,
        endpoints: Sequence[str],
        *,
        headers: Mapping[str, str] | None = None,
        retry: RetryPolicy | None = None,
        call_deadline: float = DEFAULT_CALL_DEADLINE,
        list_deadline: float = DEFAULT_LIST_DEADLINE,
        attempt_timeout: float = 30.0,
    ) -> None:
        if not endpoints:
            raise ValueError("MCPClient needs at least one endpoint")
        self.endpoints = list(endpoints)
        self._headers = dict(headers or {})
        self._retry = retry or RetryPolicy(max_retries=3, backoff_base=1.0, backoff_max=8.0)
        self.call_deadline = call_deadline
        self.list_deadline = list_deadline
        self.attempt_timeout = attempt_timeout
        self._tools: dict[str, Tool] | None = None
        # One pool per client, created on first use so it binds to the loop that uses it.
        self._http: httpx.AsyncClient | None = None

    async def aclose(self) -> None:
        """Close the HTTP pool."""
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    def __repr__(self) -> str:
        return f"MCPClient(endpoints={self.endpoints!r})"

    async def _session_call(self, endpoint: str, op: str, *args: Any, seconds: float) -> Any:
        from datetime import timedelta

        from mcp import ClientSession
        from mcp.client.streamable_http import streamable_http_client

        if self._http is None:
            self._http = httpx.AsyncClient(
                headers=self._headers, timeout=httpx.Timeout(self.attempt_timeout, connect=10.0)
            )
        with anyio.fail_after(seconds):
            async with (
                streamable_http_client(endpoint, http_client=self._http) as (read, write, _),
                ClientSession(read, write, read_timeout_seconds=timedelta(seconds=seconds)) as session,
            ):
                await session.initialize()
                if op == "list":
                    result = await session.list_tools()
                    return list(result.tools)
                return await session.call_tool(*args)

    async def _with_retries(self, endpoint: str, op: str, *args: Any, deadline: Deadline) -> Any:
        attempt = 0
        while True:
            remaining = deadline.remaining()
            if remaining is not None and remaining <= 0:
                raise MCPError(f"MCP {op} on {endpoint} ran past its deadline after {attempt} attempts")
            try:
                return await self._session_call(
                    endpoint, op, *args, seconds=remaining or self.attempt_timeout
                )
            except Exception as exc:
                from mcp.shared.exceptions import McpError

                if isinstance(exc, McpError):  # a JSON-RPC error from the server: retrying cannot help
                    raise MCPError(f"MCP {op} on {endpoint} was refused: {exc}") from exc
                attempt += 1
                wait = self._retry.backoff(attempt)
                if attempt > self._retry.max_retries or not deadline.allows(wait):
                    raise MCPError(
                        f"MCP {op} on {endpoint} failed after {attempt} attempts: {_describe(exc)}"
                    ) from exc
                log.warning(
                    "MCP %s on %s failed (%s); retry %d in %.1fs", op, endpoint, _describe(exc), attempt, wait
                )
                await anyio.sleep(wait)

    async def list_tools(self, *, refresh: bool = False) -> list[Tool]:
        """The union of tools over all endpoints.

        Args:
            refresh: Ask the endpoints again instead of using the cached union.

        Raises:
            ToolsUnavailableError: No endpoint listed any tool.
        """
        if self._tools is not None and not refresh:
            return list(self._tools.values())
        deadline = Deadline(self.list_deadline)
        results: dict[str, list[Any] | BaseException] = {}

        async def list_one(endpoint: str) -> None:
            try:
                results[endpoint] = await self._with_retries(endpoint, "list", deadline=deadline)
            except MCPError as exc:
                results[endpoint] = exc

        async with anyio.create_task_group() as group:
            for endpoint in self.endpoints:
                group.start_soon(list_one, endpoint)

        union: dict[str, Tool] = {}
        failures: list[str] = []
        for endpoint in self.endpoints:  # priority order decides ownership
            outcome = results[endpoint]
            if isinstance(outcome, BaseException):
                failures.append(f"{endpoint}: {outcome}")
                continue
            for tool in outcome:
                if tool.name not in union:
                    union[tool.name] = Tool(
                        name=tool.name,
                        description=tool.description or "",
                        input_schema=dict(tool.inputSchema or {}),
                        endpoint=endpoint,
                    )
        if not union:
            detail = "; ".join(failures) or "every endpoint answered with no tools"
            raise ToolsUnavailableError(f"no MCP tools found on {self.endpoints}: {detail}")
        if failures:
            log.warning(
                "partial MCP tool list: %d tools from the endpoints that answered; failed: %s",
                len(union),
                "; ".join(failures),
            )
        self._tools = union
        return list(union.values())

    async def call_tool(
        self, name: str, arguments: Mapping[str, Any] | None = None, *, deadline: float | None = None
    ) -> Any:
        """Call a tool and return its agent-facing value (see ``extract_tool_result``).

        Args:
            name: Tool name; must be in ``list_tools()``.
            arguments: Tool arguments.
            deadline: Wall-clock seconds for the call, retries included (default ``call_deadline``).

        Raises:
            ToolNotFoundError: The tool does not exist (not retried).
            MCPError: Transport failures outlasted the deadline or the retries.
        """
        tools = {tool.name: tool for tool in await self.list_tools()}
        tool = tools.get(name)
        if tool is None:
            raise ToolNotFoundError(f"tool {name!r} not found; available: {sorted(tools)}")
        endpoint = tool.endpoint or self.endpoints[0]
        result = await self._with_retries(
            endpoint, "call", name, dict(arguments or {}), deadline=Deadline(deadline or self.call_deadline)
        )
        return extract_tool_result(result)
