"""What the trace viewer needs, as pure functions (docs/wire.md#traces).

The model's own chat history is never changed: ``rewrite_chat_history`` works on a
deep copy and returns new messages in the OpenAI multimodal shape that
``POST /v1/sessions/ingest`` takes (never the legacy Gemini ``history`` / ``parts`` /
``inline_data`` shape, whose images the server stored in a private bucket).

The rules, each learnt from a broken dashboard (docs/wire.md#traces):

1. every ``data:image/...;base64,`` URL is replaced by the public HTTPS URL it was
   uploaded to (the upload itself is ``_screenshots``' job; this module only maps);
   malformed data URLs, URLs that failed to upload and ``https://`` URLs stay as they are;
2. a ``user`` message whose content holds an image becomes ``role: "tool"`` with a
   ``tool_call_id`` (the viewer strips images from user messages): the id of the latest
   assistant ``tool_calls[0]``, else a synthesized ``call_<uuid>``;
3. assistant ``tool_calls`` are forwarded as they are, never added when absent and never
   put on other roles; a ``tool`` message keeps its ``tool_call_id``;
4. text blocks that are only a turn footer (``[Turn 3/64]``) are dropped (the viewer
   nests a screenshot with a sibling footer inside a JSON tree); other text survives.
"""

from __future__ import annotations

import base64
import binascii
import copy
import hashlib
import json
import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "KEY_PREFIX",
    "DataImage",
    "collect_data_images",
    "extension_for",
    "image_urls",
    "is_turn_footer",
    "parse_data_url",
    "rewrite_chat_history",
    "screenshot_key",
]

KEY_PREFIX = "harness/screenshot/"
"""Prefix of every screenshot object key in the public bucket."""

_DATA_URL = re.compile(r"^data:(image/[A-Za-z0-9.+-]+)((?:;[^;,]*)*?);base64,(.*)$", re.DOTALL)
_FOOTER = re.compile(r"^\s*\[\s*Turn\s+\d+\s*/\s*\d+\s*\]\s*$", re.IGNORECASE)
_JPEG_MIMES = frozenset({"image/jpeg", "image/jpg"})


@dataclass(frozen=True)
class DataImage:
    """An image decoded from a ``data:`` URL.

    Attributes:
        mime: The MIME type, lowercased (``image/png``).
        data: The image bytes.
        key: Its object key, ``harness/screenshot/<sha256(data)[:24]>.<png|jpeg>``.
    """

    mime: str
    data: bytes
    key: str


def extension_for(mime: str) -> str:
    """The key extension for a MIME type: ``jpeg`` for JPEG (``image/jpeg``, ``image/jpg``), else ``png``.

    Args:
        mime: The image MIME type.
    """
    return "jpeg" if mime.strip().lower() in _JPEG_MIMES else "png"


def screenshot_key(data: bytes, mime: str) -> str:
    """The content-addressed object key of a screenshot.

    The same bytes always give the same key, so a repeated screenshot is stored once.

    Args:
        data: The image bytes.
        mime: The image MIME type (decides ``.jpeg`` or ``.png``).
    """
    digest = hashlib.sha256(data).hexdigest()[:24]
    return f"{KEY_PREFIX}{digest}.{extension_for(mime)}"


def parse_data_url(url: str) -> DataImage | None:
    """Decode a ``data:image/<type>[;params];base64,<payload>`` URL.

    Args:
        url: The URL of an ``image_url`` block.

    Returns:
        The decoded image, or None when the URL is not a well-formed base64 image data URL
        (an ``https://`` URL, a missing ``;base64``, bad base64, an empty payload).
    """
    match = _DATA_URL.match(url.strip())
    if match is None:
        return None
    mime, _params, payload = match.groups()
    payload = "".join(payload.split())
    if not payload:
        return None
    try:
        data = base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        return None
    if not data:
        return None
    mime = mime.lower()
    return DataImage(mime=mime, data=data, key=screenshot_key(data, mime))


def is_turn_footer(text: str) -> bool:
    """Whether a text is only a turn footer such as ``[Turn 3/64]``, `` [Turn 12/64] `` or ``[Turn 64 / 64]``.

    Args:
        text: The text of a text block.
    """
    return isinstance(text, str) and _FOOTER.match(text) is not None


def _block_url(block: Mapping[str, Any]) -> str | None:
    """The URL of an ``image_url`` block (object or bare-string form), else None."""
    if block.get("type") != "image_url":
        return None
    image = block.get("image_url")
    if isinstance(image, str):
        return image
    if isinstance(image, Mapping) and isinstance(image.get("url"), str):
        return str(image["url"])
    return None


def image_urls(messages: Sequence[Mapping[str, Any]]) -> Iterator[str]:
    """Every image URL in the messages' content blocks, in order (repeats included).

    Args:
        messages: OpenAI-shape chat messages.
    """
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else None
        if not isinstance(content, list):
            continue
        for block in content:
            if isinstance(block, Mapping):
                url = _block_url(block)
                if url is not None:
                    yield url


def collect_data_images(messages: Sequence[Mapping[str, Any]]) -> dict[str, DataImage]:
    """The well-formed image data URLs of the messages, each decoded once.

    Args:
        messages: OpenAI-shape chat messages.

    Returns:
        ``{data_url: DataImage}`` for every distinct well-formed data URL; malformed ones and
        ``http(s)`` URLs are left out (they stay as they are).
    """
    found: dict[str, DataImage] = {}
    for url in image_urls(messages):
        if url in found or not url.startswith("data:"):
            continue
        image = parse_data_url(url)
        if image is not None:
            found[url] = image
    return found


def _has_image(content: Any) -> bool:
    return isinstance(content, list) and any(
        isinstance(block, Mapping) and block.get("type") == "image_url" for block in content
    )


def _rewrite_block(block: Any, url_map: Mapping[str, str]) -> dict[str, Any] | None:
    """One content block in the ingest shape, or None to drop it (a turn footer)."""
    if isinstance(block, str):
        return None if is_turn_footer(block) else {"type": "text", "text": block}
    if not isinstance(block, Mapping):
        return {"type": "text", "text": json.dumps(block, default=str)}
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return None if is_turn_footer(block["text"]) else {"type": "text", "text": block["text"]}
    url = _block_url(block)
    if url is not None:
        image = block.get("image_url")
        out: dict[str, Any] = {"url": url_map.get(url, url)}
        if isinstance(image, Mapping) and image.get("detail") in ("auto", "low", "high"):
            out["detail"] = image["detail"]
        return {"type": "image_url", "image_url": out}
    # Not a block the ingest knows (text/image_url): keep its information as text.
    return {"type": "text", "text": json.dumps(block, default=str)}


def _rewrite_content(content: Any, url_map: Mapping[str, str]) -> Any:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        blocks = (_rewrite_block(block, url_map) for block in content)
        return [block for block in blocks if block is not None]
    return json.dumps(content, default=str)


def _normalize_call(call: Any) -> Any:
    """A tool call as forwarded: unchanged, except JSON-object arguments become their JSON text."""
    if not isinstance(call, dict):
        return call
    function = call.get("function")
    if isinstance(function, dict) and not isinstance(function.get("arguments"), str | None):
        call["function"] = {**function, "arguments": json.dumps(function["arguments"], default=str)}
    if "type" not in call:
        call["type"] = "function"
    return call


def _tool_calls(message: Mapping[str, Any]) -> list[Any] | None:
    calls = message.get("tool_calls")
    return [_normalize_call(call) for call in calls] if isinstance(calls, list) and calls else None


def _first_call_id(calls: list[Any] | None) -> str | None:
    if not calls:
        return None
    first = calls[0]
    call_id = first.get("id") if isinstance(first, Mapping) else getattr(first, "id", None)
    return call_id if isinstance(call_id, str) and call_id else None


def rewrite_chat_history(
    chat_history: Sequence[Mapping[str, Any]], url_map: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """The chat history as the trace viewer needs it (the four rules of the module docstring).

    Pure: the input is deep-copied and never changed; nothing is uploaded here.

    Args:
        chat_history: The model's chat history (OpenAI shape: ``role``, ``content`` as a string
            or blocks, ``tool_calls`` on assistant messages, ``tool_call_id`` on tool messages).
        url_map: ``{data_url: public_url}`` of the screenshots already uploaded; a data URL
            missing from it (a failed upload) stays as it was.

    Returns:
        New messages ``{role, content, tool_calls?, tool_call_id?, name?}``.
    """
    mapping = dict(url_map or {})
    history: list[Any] = copy.deepcopy(list(chat_history))
    out: list[dict[str, Any]] = []
    last_call_id: str | None = None
    for message in history:
        if not isinstance(message, Mapping):
            continue
        role = message.get("role")
        content = message.get("content")
        rewritten: dict[str, Any] = {"role": role, "content": _rewrite_content(content, mapping)}
        if role == "assistant":
            calls = _tool_calls(message)
            last_call_id = _first_call_id(calls)
            if calls is not None:
                rewritten["tool_calls"] = calls
        elif role == "tool":
            if message.get("tool_call_id") is not None:
                rewritten["tool_call_id"] = message["tool_call_id"]
        elif role == "user" and _has_image(content):
            rewritten["role"] = "tool"
            rewritten["tool_call_id"] = last_call_id or f"call_{uuid.uuid4().hex}"
        name = message.get("name")
        if isinstance(name, str) and name:
            rewritten["name"] = name
        out.append(rewritten)
    return out
