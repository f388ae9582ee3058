"""Turn an MCP ``CallToolResult`` into the value an agent sees (docs/wire.md#mcp).

- ``isError`` -> ``{"error": <first text or "Tool execution failed">}``;
- image content -> OpenAI ``image_url`` blocks with a data URL, text and images
  kept in their original order;
- one text block holding JSON -> the parsed value; a dict with a non-null
  ``base64_image`` -> an image block; ``{"base64_image": null}`` -> an error,
  never a block whose URL is null (it crashed SkyRL's image extraction);
- plain text -> the string; several texts -> their list; else ``structuredContent``.
"""

from __future__ import annotations

import json
from typing import Any

NULL_SCREENSHOT = "Screenshot capture failed (null image)"
TOOL_FAILED = "Tool execution failed"


def _image_block(data: str, mime: str | None) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:{mime or _sniff_mime(data)};base64,{data}"}}


def _sniff_mime(data: str) -> str:
    if data.startswith("/9j/"):
        return "image/jpeg"
    if data.startswith("R0lGOD"):
        return "image/gif"
    if data.startswith("UklGR"):
        return "image/webp"
    return "image/png"


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def _from_json_value(value: Any) -> Any:
    if isinstance(value, dict) and "base64_image" in value:
        image = value["base64_image"]
        if image is None:
            return {"error": NULL_SCREENSHOT}
        if isinstance(image, str) and image:
            return [_image_block(image, value.get("mime_type"))]
    return value


def extract_tool_result(result: Any) -> Any:
    """The agent-facing value of a ``CallToolResult`` (or its dict form).

    Args:
        result: An ``mcp.types.CallToolResult`` (either ``mcp`` major) or its wire dict.
    """
    if not isinstance(result, dict) and hasattr(result, "model_dump"):
        # An ``mcp`` model: its wire (camelCase) form is the same under mcp 1.x and 2.x.
        result = result.model_dump(by_alias=True, mode="json", exclude_none=True)
    content = list(_field(result, "content") or [])
    texts = [str(_field(c, "text")) for c in content if _field(c, "type") == "text"]
    if _field(result, "isError"):
        return {"error": texts[0] if texts and texts[0] else TOOL_FAILED}

    if any(_field(c, "type") == "image" for c in content):
        blocks: list[dict[str, Any]] = []
        for item in content:
            kind = _field(item, "type")
            if kind == "image":
                blocks.append(_image_block(str(_field(item, "data")), _field(item, "mimeType")))
            elif kind == "text":
                blocks.append({"type": "text", "text": str(_field(item, "text"))})
        return blocks

    if len(texts) == 1:
        try:
            parsed = json.loads(texts[0])
        except (json.JSONDecodeError, ValueError):
            return texts[0]
        return _from_json_value(parsed)
    if len(texts) > 1:
        return texts
    structured = _field(result, "structuredContent")
    return _from_json_value(structured) if structured is not None else None
