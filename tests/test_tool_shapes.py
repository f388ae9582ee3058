"""Tools as models see them (OpenAI / Anthropic shapes) and filtering by task modality."""

from __future__ import annotations

import pytest

from fleet_sdk import (
    ToolNotFoundError,
)
from fleet_sdk.env import filter_tools
from fleet_sdk.tools import Tool


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


def test_the_sdks_own_tools_are_valid_tools() -> None:
    """The submit and context tools are built without validation (so importing the SDK does not
    build Tool's schema): each must be exactly what validating its fields gives."""
    from fleet_sdk.context import CONTEXT_TOOLS
    from fleet_sdk.protocol import SUBMIT_TOOL

    for tool in (SUBMIT_TOOL, *CONTEXT_TOOLS):
        assert Tool.model_validate(tool.model_dump()) == tool
        assert tool.input_schema["type"] == "object" and tool.description
