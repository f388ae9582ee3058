"""Facade pieces that need no server: specs, task files, tool shapes, MCP result
extraction, modality filtering, provisioning-error classification and the loop bridge."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import httpx
import pytest
from mcp.types import CallToolResult, ImageContent, TextContent

from fleet_sdk import (
    APIConnectionError,
    EnvNotFoundError,
    InternalServerError,
    TaskConfigError,
    ToolNotFoundError,
    VersionNotFoundError,
)
from fleet_sdk._client import is_transient_provisioning_error
from fleet_sdk._exceptions import RateLimitError, status_error_class
from fleet_sdk._mcp_results import NULL_SCREENSHOT, extract_tool_result
from fleet_sdk._runtime._bridge import run_sync
from fleet_sdk.env import filter_tools
from fleet_sdk.specs import normalize_version, parse_spec
from fleet_sdk.tasks import Task, load_tasks, parse_tasks
from fleet_sdk.tools import Tool

# -- specs -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "key", "version"),
    [
        ("fira", "fira", None),
        ("fira:1.2.3", "fira", "v1.2.3"),
        ("fira:v1.2.3", "fira", "v1.2.3"),
        ("fira:latest", "fira", "latest"),
    ],
)
def test_env_spec_adds_v_to_numeric_versions(spec: str, key: str, version: str | None) -> None:
    assert parse_spec(spec) == (key, version)


def test_data_spec_is_one_key_version_string() -> None:
    """Regression: data_key and data_version as separate arguments broke callers; a spec string works."""
    assert parse_spec("orders:2.0", what="data") == ("orders", "v2.0")
    assert parse_spec("orders", version="2.0", what="data") == ("orders", "v2.0")
    with pytest.raises(ValueError, match="data spec"):
        parse_spec("orders:2.0", version="3.0", what="data")
    with pytest.raises(ValueError, match="key:version"):
        parse_spec("orders:", what="data")
    assert normalize_version("") is None


# -- tasks -----------------------------------------------------------------------------------


def test_task_aliases_are_accepted() -> None:
    task = Task.model_validate(
        {
            "key": "t1",
            "prompt": "p",
            "env_id": "fira",
            "version": "1.0",
            "data_id": "d",
            "data_version": "2",
            "verifier_func": "def verify(env):\n    return 1\n",
        }
    )
    assert (task.task_key, task.env_key, task.env_version, task.data_key) == ("t1", "fira", "1.0", "d")
    assert task.verifier_code is not None
    assert task.env_spec == "fira:v1.0"
    assert task.data_spec == "d:v2"
    assert task.task_modality == "tool_use"


def test_load_tasks_accepts_wrapped_and_bare_lists(tmp_path: Path) -> None:
    one = {"task_key": "a", "prompt": "p", "env_key": "e"}
    (tmp_path / "wrapped.json").write_text(json.dumps({"tasks": [one]}))
    (tmp_path / "bare.json").write_text(json.dumps([one]))
    assert load_tasks(tmp_path / "wrapped.json") == load_tasks(tmp_path / "bare.json")


def test_bad_task_file_names_index_and_field(tmp_path: Path) -> None:
    good = {"task_key": "a", "prompt": "p", "env_key": "e"}
    bad = {"task_key": "b", "env_key": "e", "task_modality": "telepathy"}
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps({"tasks": [good, bad]}))
    with pytest.raises(TaskConfigError) as info:
        load_tasks(path)
    message = str(info.value)
    assert "task 1 ('b')" in message
    assert "'prompt'" in message and "'task_modality'" in message


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("{not json", "not valid JSON at line 1"),
        ('{"items": []}', 'expected {"tasks": [...]}'),
        ('{"tasks": {}}', "'tasks' must be a list"),
        ("[1]", "task 0 must be an object"),
    ],
)
def test_malformed_task_files_get_clear_errors(tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "t.json"
    path.write_text(content)
    with pytest.raises(TaskConfigError, match=r"t\.json") as info:
        load_tasks(path)
    assert expected in str(info.value)


def test_duplicate_task_keys_and_missing_file(tmp_path: Path) -> None:
    one = {"task_key": "a", "prompt": "p", "env_key": "e"}
    with pytest.raises(TaskConfigError, match="duplicate task_key 'a'"):
        parse_tasks([one, one])
    with pytest.raises(TaskConfigError, match="cannot read"):
        load_tasks(tmp_path / "missing.json")


# -- tools -----------------------------------------------------------------------------------


def test_tool_formats_for_models() -> None:
    tool = Tool(
        name="get_order",
        description="Fetch an order",
        input_schema={
            "type": "object",
            "properties": {"id": {"type": "integer"}},
            "required": ["id"],
            "additionalProperties": False,
        },
    )
    assert tool.to_openai() == {
        "type": "function",
        "function": {
            "name": "get_order",
            "description": "Fetch an order",
            "parameters": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
        },
    }
    assert tool.to_anthropic() == {
        "name": "get_order",
        "description": "Fetch an order",
        "input_schema": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
    }


def test_modality_filtering() -> None:
    """Regression: computer_use tasks got API tools (or none at all)."""
    tools = [Tool(name="computer"), Tool(name="search"), Tool(name="create")]
    assert [t.name for t in filter_tools(tools, "tool_use")] == ["search", "create"]
    assert [t.name for t in filter_tools(tools, "computer_use")] == ["computer"]
    assert [t.name for t in filter_tools(tools, "browser_use")] == ["computer"]
    with pytest.raises(ToolNotFoundError, match="'computer' tool"):
        filter_tools(tools[1:], "computer_use")


# -- MCP results (regression: agents were handed CallToolResult reprs) ------------------------------


def text(value: str) -> TextContent:
    return TextContent(type="text", text=value)


def test_result_is_never_a_repr() -> None:
    """Regression: agents saw "meta=None content=[TextContent(...)]" instead of the text."""
    value = extract_tool_result(CallToolResult(content=[text("hello")]))
    assert value == "hello"


def test_json_text_is_parsed_and_several_texts_listed() -> None:
    assert extract_tool_result(CallToolResult(content=[text('{"id": 3, "ok": true}')])) == {
        "id": 3,
        "ok": True,
    }
    assert extract_tool_result(CallToolResult(content=[text("a"), text("b")])) == ["a", "b"]


def test_error_results() -> None:
    assert extract_tool_result(CallToolResult(content=[text("order 9 not found")], isError=True)) == {
        "error": "order 9 not found"
    }
    assert extract_tool_result(CallToolResult(content=[], isError=True)) == {"error": "Tool execution failed"}


def test_structured_content_fallback_and_empty() -> None:
    assert extract_tool_result(CallToolResult(content=[], structuredContent={"rows": 2})) == {"rows": 2}
    assert extract_tool_result(CallToolResult(content=[])) is None


def test_images_become_openai_blocks_in_order() -> None:
    result = CallToolResult(
        content=[
            text("before"),
            ImageContent(type="image", data="iVBORw0KGgo=", mimeType="image/png"),
            text("after"),
        ]
    )
    assert extract_tool_result(result) == [
        {"type": "text", "text": "before"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "text", "text": "after"},
    ]


def test_base64_image_json_becomes_an_image_block() -> None:
    value = extract_tool_result(CallToolResult(content=[text(json.dumps({"base64_image": "/9j/4AAQ"}))]))
    assert value == [{"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQ"}}]


def test_null_screenshot_is_an_error_not_a_null_url() -> None:
    """Regression: {"base64_image": null} produced an image_url block with url=None and crashed SkyRL."""
    value = extract_tool_result(CallToolResult(content=[text('{"base64_image": null}')]))
    assert value == {"error": NULL_SCREENSHOT}


# -- provisioning errors ---------------------------------------------------------------------


def status_error(code: int, body: object) -> Exception:
    request = httpx.Request("POST", "https://orchestrator.fleetai.com/v1/env/instances")
    response = httpx.Response(code, json=body, request=request)
    cls = status_error_class(code, body)
    return cls("x", method="POST", url=str(request.url), request_id="r", response=response, body=body)


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (APIConnectionError("refused", method="POST", url="u", request_id="r"), True),
        (status_error(503, {"detail": "health check failed"}), True),
        (status_error(429, {"detail": "too many in-flight"}), True),
        (status_error(500, {"detail": "x", "code": "provisioning_failed", "retryable": True}), True),
        (status_error(500, {"detail": "x", "code": "provisioning_failed", "retryable": False}), False),
        (status_error(503, {"detail": "x", "retryable": False}), False),
        (status_error(404, {"detail": "env_key not found", "code": "env_not_found"}), False),
        (status_error(404, {"detail": "no such version", "code": "version_not_found"}), False),
        (status_error(400, {"detail": "bad"}), False),
        (ValueError("not an API error"), False),
    ],
)
def test_transient_provisioning_errors_by_type_and_body(error: Exception, transient: bool) -> None:
    assert is_transient_provisioning_error(error) is transient


def test_permanent_provisioning_error_classes() -> None:
    assert isinstance(status_error(404, {"code": "env_not_found", "detail": ""}), EnvNotFoundError)
    assert isinstance(status_error(404, {"code": "version_not_found", "detail": ""}), VersionNotFoundError)
    assert isinstance(status_error(429, {"detail": ""}), RateLimitError)
    assert isinstance(status_error(502, {"detail": ""}), InternalServerError)


# -- the loop bridge -------------------------------------------------------------------------


async def _which_loop() -> int:
    await asyncio.sleep(0)
    return id(asyncio.get_running_loop())


def test_bridge_from_a_plain_script_and_threads() -> None:
    loops = {run_sync(_which_loop())}
    results: list[int] = []
    threads = [threading.Thread(target=lambda: results.append(run_sync(_which_loop()))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(results) == 4
    assert set(results) == loops  # one SDK loop, whoever calls


async def test_bridge_inside_a_running_loop_does_not_raise() -> None:
    """Regression: sync wrappers called asyncio.run()/run_until_complete() inside a running loop."""
    caller = id(asyncio.get_running_loop())
    assert run_sync(_which_loop()) != caller


def test_bridge_timeout_cancels() -> None:
    async def forever() -> None:
        await asyncio.sleep(3600)

    with pytest.raises(TimeoutError, match=r"0\.2s"):
        run_sync(forever(), timeout=0.2)


def test_bridge_propagates_exceptions() -> None:
    async def boom() -> None:
        raise KeyError("x")

    with pytest.raises(KeyError):
        run_sync(boom())


# -- with_options ----------------------------------------------------------------------------


def test_with_options_shares_settings_and_pool_and_overrides_policy() -> None:
    from fleet_sdk import AsyncFleet, Fleet, RetryPolicy

    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(503, json={"detail": "busy"})

    pool = httpx.Client(transport=httpx.MockTransport(handler))
    fleet = Fleet("sk-test-123456", base_url="http://orchestrator.test", http_client=pool)
    quick = fleet.with_options(retry=RetryPolicy(max_retries=0), deadline=5.0)
    assert isinstance(quick, Fleet)
    assert quick.config == fleet.config
    assert quick._pool is fleet._pool
    with pytest.raises(InternalServerError):
        quick.api.control_plane.list_envs()
    assert len(seen) == 1  # no retries on the copy
    assert repr(quick) == repr(fleet)
    assert isinstance(AsyncFleet("sk-test-123456").with_options(deadline=1.0), AsyncFleet)


def test_an_async_pool_used_from_two_running_loops_fails_clearly() -> None:
    """Regression: loop-bound objects used from a second loop failed with obscure RuntimeErrors."""
    from fleet_sdk import AsyncFleet, ConfigurationError

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=[])

    fleet = AsyncFleet(
        "sk-test-123456", http_client=httpx.AsyncClient(transport=httpx.MockTransport(handler))
    )
    first = asyncio.new_event_loop()
    try:
        assert first.run_until_complete(fleet.list_envs()) == []
        # The bridge's loop is another loop: the same pool must not be used there.
        with pytest.raises(ConfigurationError, match=r"another \(still open\) event loop"):
            run_sync(fleet.list_envs())
    finally:
        first.close()
    # Once the first loop is closed the pool may move on (asyncio.run() twice, for example).
    assert run_sync(fleet.list_envs()) == []
