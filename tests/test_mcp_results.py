"""From an MCP ``CallToolResult`` to the value an agent sees: text, JSON, errors, images."""

from __future__ import annotations

import json

from mcp.types import CallToolResult, ImageContent, TextContent

from fleet_sdk._mcp_results import NULL_SCREENSHOT, extract_tool_result


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
