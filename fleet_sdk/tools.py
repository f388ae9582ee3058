"""Tools as an agent sees them, and their OpenAI / Anthropic shapes (docs/wire.md#mcp)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Tool"]


class Tool(BaseModel):
    """One MCP tool of an environment instance.

    Attributes:
        name: Tool name (unique within an instance).
        description: What it does, for the model.
        input_schema: JSON Schema of its arguments (``type: object``).
        endpoint: The MCP endpoint that owns the tool (the first one that listed it).
    """

    # Its schema is built on first use, not when the SDK is imported (benchmarks/bench_startup.py).
    model_config = ConfigDict(frozen=True, defer_build=True)

    name: str
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    endpoint: str | None = None

    def _parameters(self) -> dict[str, Any]:
        schema = dict(self.input_schema or {})
        return {
            "type": "object",
            "properties": schema.get("properties", {}),
            "required": list(schema.get("required", [])),
        }

    def to_openai(self) -> dict[str, Any]:
        """``{"type": "function", "function": {"name", "description", "parameters"}}``."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self._parameters(),
            },
        }

    def to_anthropic(self) -> dict[str, Any]:
        """``{"name", "description", "input_schema"}``."""
        return {"name": self.name, "description": self.description, "input_schema": self._parameters()}
