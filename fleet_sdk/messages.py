"""Chat histories in the OpenAI and Anthropic message formats.

``TaskEnv`` keeps its history as OpenAI chat-completions messages (``system``, ``user``,
``assistant`` with ``tool_calls``, ``tool``). :func:`to_anthropic` renders such a history as the
arguments of Anthropic's Messages API (:class:`AnthropicRequest`): a ``system`` string and
``messages`` that alternate ``user`` / ``assistant``, tool calls as ``tool_use`` blocks and
results as ``tool_result`` blocks. :data:`ContentBlock` is the OpenAI content block an image
observation is made of (``image_url`` with a data URL, and ``text``).
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal, TypedDict

__all__ = [
    "AnthropicMessage",
    "AnthropicRequest",
    "ContentBlock",
    "ImageBlock",
    "ImageURL",
    "TextBlock",
    "to_anthropic",
    "to_openai",
]


class TextBlock(TypedDict):
    """An OpenAI text content block."""

    type: Literal["text"]
    text: str


class ImageURL(TypedDict):
    """Where an image block's image is: a ``data:`` URL (base64) or an http(s) URL."""

    url: str


class ImageBlock(TypedDict):
    """An OpenAI image content block (``{"type": "image_url", "image_url": {"url": ...}}``)."""

    type: Literal["image_url"]
    image_url: ImageURL


ContentBlock = TextBlock | ImageBlock
"""One block of an OpenAI message's list ``content``: what a screenshot observation is made of."""


class AnthropicMessage(TypedDict):
    """One message of Anthropic's Messages API: its role and its content blocks.

    Attributes:
        role: ``user`` or ``assistant`` (they alternate).
        content: ``text``, ``image``, ``tool_use`` and ``tool_result`` blocks.
    """

    role: Literal["user", "assistant"]
    content: list[dict[str, Any]]


class AnthropicRequest(TypedDict):
    """A history rendered for Anthropic's Messages API (``TaskEnv.messages("anthropic")``).

    Attributes:
        system: The system and developer messages joined, or None when there were none.
        messages: The rest, alternating ``user`` / ``assistant``.
    """

    system: str | None
    messages: list[AnthropicMessage]


_DATA_URL = re.compile(r"^data:(?P<mime>[\w/+.-]+);base64,(?P<data>.*)$", re.DOTALL)


def to_openai(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A deep copy of OpenAI-format messages (safe to send or change).

    Args:
        messages: The history.
    """
    return [copy.deepcopy(dict(m)) for m in messages]


def _image(block: Mapping[str, Any]) -> dict[str, Any]:
    url = str((block.get("image_url") or {}).get("url", ""))
    match = _DATA_URL.match(url)
    if match:
        return {
            "type": "image",
            "source": {"type": "base64", "media_type": match["mime"], "data": match["data"]},
        }
    return {"type": "image", "source": {"type": "url", "url": url}}


def _blocks(content: Any) -> list[dict[str, Any]]:
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        blocks: list[dict[str, Any]] = []
        for block in content:
            if isinstance(block, Mapping) and block.get("type") == "image_url":
                blocks.append(_image(block))
            elif isinstance(block, Mapping) and block.get("type") == "text":
                blocks.append({"type": "text", "text": str(block.get("text", ""))})
            else:
                blocks.append({"type": "text", "text": json.dumps(block, default=str)})
        return blocks
    return [{"type": "text", "text": json.dumps(content, default=str)}]


def _arguments(raw: Any) -> dict[str, Any]:
    if isinstance(raw, Mapping):
        return dict(raw)
    try:
        value = json.loads(raw) if isinstance(raw, str) and raw.strip() else {}
    except json.JSONDecodeError:
        return {"_raw_arguments": raw}
    return value if isinstance(value, dict) else {"_value": value}


def to_anthropic(messages: Iterable[Mapping[str, Any]]) -> AnthropicRequest:
    """Render OpenAI-format messages for Anthropic's Messages API.

    Consecutive messages of one role are merged (Anthropic needs alternating roles); tool
    results become ``tool_result`` blocks of a ``user`` message; images with data URLs become
    base64 image sources.

    Args:
        messages: The history.

    Returns:
        ``{"system": str | None, "messages": [...]}``, ready as keyword arguments.
    """
    system: list[str] = []
    rendered: list[AnthropicMessage] = []

    def append(role: Literal["user", "assistant"], blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if rendered and rendered[-1]["role"] == role:
            rendered[-1]["content"].extend(blocks)
        else:
            rendered.append({"role": role, "content": blocks})

    for message in messages:
        role = message.get("role")
        content = message.get("content")
        if role in ("system", "developer"):
            system.extend(b["text"] for b in _blocks(content) if b["type"] == "text")
        elif role == "user":
            append("user", _blocks(content))
        elif role == "assistant":
            blocks = _blocks(content)
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call.get("id"),
                        "name": function.get("name"),
                        "input": _arguments(function.get("arguments")),
                    }
                )
            append("assistant", blocks)
        elif role == "tool":
            result: dict[str, Any] = {
                "type": "tool_result",
                "tool_use_id": message.get("tool_call_id"),
                "content": content if isinstance(content, str) else _blocks(content),
            }
            append("user", [result])
        else:
            raise ValueError(f"cannot render a message with role {role!r} for Anthropic")
    return {"system": "\n\n".join(system) if system else None, "messages": rendered}
