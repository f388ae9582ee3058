"""``POST /v1/traces/logs`` (``log_session`` in ``schemas/sessions-ingest.yaml``): the public SDK's
``Session.log(history, response)``, turned into an ingested session.

The public SDK sends the messages as its caller built them for the model's API and leaves "format
normalization" to the server, so this module reads the three shapes its examples use and writes
``SessionIngestMessage`` dicts (OpenAI multimodal) into the same session store as
``POST /v1/sessions/ingest`` (``_sessions``):

* OpenAI chat messages: ``role`` (``developer`` read as ``system``), ``content`` as text or parts,
  ``tool_calls``, ``tool_call_id``, ``name``;
* Anthropic messages: ``content`` blocks ``text``, ``image``, ``tool_use`` (an assistant tool call),
  ``tool_result`` (a ``tool`` message of its own), ``thinking``;
* Gemini ``Content``: ``role`` ``user`` / ``model``, ``parts`` with ``text`` (``thought`` marks
  reasoning), ``inline_data``, ``file_data``, ``function_call``, ``function_response`` (a call
  without an id gets one, and the next response of that tool answers it).

A response may also be a string, an OpenAI chat completion (``choices``), an OpenAI Responses
result (``output``) or a Gemini ``GenerateContentResponse`` (``candidates``). What none of these
describes becomes a message holding its JSON text: nothing sent is dropped. Inline images (base64
blocks, ``inline_data``, ``data:`` URLs) go to the local S3 endpoint and are referenced by their
public URL, because viewers cannot render ``data:`` URLs; a server without S3 keeps the data URL.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio
from fastapi import APIRouter
from pydantic import ValidationError

from fleet_sdk.types import sessions_ingest as smodels

from . import _s3, _sessions
from ._episodes import session_records
from ._state import LocalState

__all__ = ["SessionLogNormalizer", "router"]

IMAGE_PREFIX = "traces/image/"
"""Key prefix of logged images in the local S3 bucket (keys are content hashes)."""

_ROLES = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "model": "assistant",
    "tool": "tool",
    "function": "tool",
}
_TEXT_PARTS = frozenset({"text", "input_text", "output_text"})
_ANTHROPIC_BLOCKS = frozenset({"image", "tool_use", "tool_result", "thinking", "redacted_thinking"})
_IMAGE_EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}

Message = dict[str, Any]
StoreImage = Callable[[bytes, str], str]
"""Stores an image's bytes with their MIME type and returns the URL to reference it by."""


def _field(value: Mapping[str, Any], *names: str) -> Any:
    """The first of ``names`` (snake_case and camelCase spellings) that is set and not null."""
    for name in names:
        found = value.get(name)
        if found is not None:
            return found
    return None


def _json_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str, sort_keys=True)


class SessionLogNormalizer:
    """Turns one ``Session.log`` call's history and response into ``SessionIngestMessage`` dicts.

    One normalizer per call: it pairs Gemini function calls that carry no id with the responses
    that follow them.

    Args:
        store_image: Where inline images go (their bytes and MIME type in, a URL out).
    """

    def __init__(self, store_image: StoreImage) -> None:
        self._store_image = store_image
        self._unanswered: dict[str, list[str]] = {}
        self._generated = 0

    # ------------------------------------------------------------ entry points

    def history(self, items: Sequence[Any]) -> list[Message]:
        """The messages of ``history`` (a bare string is a user message)."""
        return [message for item in items for message in self.message(item, default_role="user")]

    def response(self, response: Any) -> list[Message]:
        """The messages of the model's answer (none for null)."""
        if response is None:
            return []
        if isinstance(response, str):
            return [{"role": "assistant", "content": response}]
        if isinstance(response, list):
            return [m for item in response for m in self.message(item, default_role="assistant")]
        if not isinstance(response, Mapping):
            return [self._opaque("assistant", response)]
        choices = response.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], Mapping):
            chosen = choices[0].get("message")
            if isinstance(chosen, Mapping):
                return self.message(chosen, default_role="assistant")
        candidates = response.get("candidates")
        if isinstance(candidates, list) and candidates and isinstance(candidates[0], Mapping):
            content = candidates[0].get("content")
            if isinstance(content, Mapping):
                return self.message(content, default_role="assistant")
        output = response.get("output")
        if isinstance(output, list):
            return self._responses_output(output)
        return self.message(response, default_role="assistant")

    def message(self, item: Any, *, default_role: str) -> list[Message]:
        """One history item as zero or more messages (a tool result is a message of its own)."""
        if isinstance(item, str):
            return [{"role": default_role, "content": item}]
        if not isinstance(item, Mapping):
            return [self._opaque(default_role, item)]
        parts = item.get("parts")
        raw_role = item.get("role")
        role = _ROLES.get(str(raw_role)) if raw_role is not None else default_role
        if isinstance(parts, list):
            return self._gemini(role or default_role, parts)
        if role is None or ("content" not in item and "tool_calls" not in item):
            return [self._opaque(default_role, item)]
        content = item.get("content")
        if isinstance(content, list) and any(
            isinstance(block, Mapping) and block.get("type") in _ANTHROPIC_BLOCKS for block in content
        ):
            return self._anthropic(role, content)
        return [self._openai(role, item)]

    # ------------------------------------------------------------ shapes

    def _openai(self, role: str, item: Mapping[str, Any]) -> Message:
        message: Message = {"role": role, "content": self._openai_content(item.get("content"))}
        calls = item.get("tool_calls")
        if isinstance(calls, list) and calls:
            message["tool_calls"] = [self._openai_call(call) for call in calls if isinstance(call, Mapping)]
        for name in ("tool_call_id", "name"):
            if isinstance(item.get(name), str):
                message[name] = item[name]
        thinking = _field(item, "thinking", "reasoning_content")
        if isinstance(thinking, str):
            message["thinking"] = thinking
        return message

    def _openai_content(self, content: Any) -> Any:
        if content is None or isinstance(content, str):
            return content
        if not isinstance(content, list):
            return _json_text(content)
        blocks: list[dict[str, Any]] = []
        for part in content:
            if isinstance(part, str):
                blocks.append({"type": "text", "text": part})
            elif (
                isinstance(part, Mapping)
                and part.get("type") in _TEXT_PARTS
                and isinstance(part.get("text"), str)
            ):
                blocks.append({"type": "text", "text": part["text"]})
            elif isinstance(part, Mapping) and part.get("type") in ("image_url", "input_image"):
                image = part.get("image_url")
                url = image.get("url") if isinstance(image, Mapping) else image
                if isinstance(url, str):
                    blocks.append(self._image_block(url))
                else:
                    blocks.append({"type": "text", "text": _json_text(part)})
            else:
                blocks.append({"type": "text", "text": _json_text(part)})
        return blocks

    def _openai_call(self, call: Mapping[str, Any]) -> dict[str, Any]:
        function = call.get("function")
        if not isinstance(function, Mapping):
            function = call
        return self._tool_call(call.get("id"), function.get("name"), function.get("arguments"))

    def _anthropic(self, role: str, blocks: list[Any]) -> list[Message]:
        results: list[Message] = []
        content: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        thinking: list[str] = []
        for block in blocks:
            kind = block.get("type") if isinstance(block, Mapping) else None
            if isinstance(block, str):
                content.append({"type": "text", "text": block})
            elif kind == "text" and isinstance(block.get("text"), str):
                content.append({"type": "text", "text": block["text"]})
            elif kind == "image" and isinstance(block.get("source"), Mapping):
                content.append(self._anthropic_image(block["source"]))
            elif kind == "tool_use":
                calls.append(self._tool_call(block.get("id"), block.get("name"), block.get("input")))
            elif kind == "tool_result":
                result = self._openai_content(self._anthropic_result(block.get("content")))
                results.append(
                    {"role": "tool", "tool_call_id": str(block.get("tool_use_id")), "content": result}
                )
            elif kind == "thinking" and isinstance(block.get("thinking"), str):
                thinking.append(block["thinking"])
            else:
                content.append({"type": "text", "text": _json_text(block)})
        return _assemble(role, results, content, calls, thinking)

    def _anthropic_result(self, content: Any) -> Any:
        """A ``tool_result``'s content as OpenAI content (its image blocks become image URLs)."""
        if not isinstance(content, list):
            return content
        return [
            self._anthropic_image(block["source"])
            if isinstance(block, Mapping)
            and block.get("type") == "image"
            and isinstance(block.get("source"), Mapping)
            else block
            for block in content
        ]

    def _anthropic_image(self, source: Mapping[str, Any]) -> dict[str, Any]:
        if source.get("type") == "base64" and isinstance(source.get("data"), str):
            return self._inline_image(source["data"], str(source.get("media_type") or "image/png"))
        if isinstance(source.get("url"), str):
            return self._image_block(source["url"])
        return {"type": "text", "text": _json_text(source)}

    def _gemini(self, role: str, parts: list[Any]) -> list[Message]:
        results: list[Message] = []
        content: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        thinking: list[str] = []
        for part in parts:
            if not isinstance(part, Mapping):
                content.append({"type": "text", "text": _json_text(part)})
                continue
            text = part.get("text")
            inline = _field(part, "inline_data", "inlineData")
            stored = _field(part, "file_data", "fileData")
            call = _field(part, "function_call", "functionCall")
            answer = _field(part, "function_response", "functionResponse")
            if isinstance(text, str) and part.get("thought"):
                thinking.append(text)
            elif isinstance(text, str):
                content.append({"type": "text", "text": text})
            elif isinstance(inline, Mapping) and isinstance(inline.get("data"), str):
                content.append(
                    self._inline_image(inline["data"], str(_field(inline, "mime_type", "mimeType")))
                )
            elif isinstance(stored, Mapping) and isinstance(_field(stored, "file_uri", "fileUri"), str):
                content.append(self._image_block(str(_field(stored, "file_uri", "fileUri"))))
            elif isinstance(call, Mapping):
                name = str(call.get("name") or "")
                made = self._tool_call(call.get("id"), name, call.get("args"))
                self._unanswered.setdefault(name, []).append(made["id"])
                calls.append(made)
            elif isinstance(answer, Mapping):
                name = str(answer.get("name") or "")
                waiting = self._unanswered.get(name) or []
                call_id = answer.get("id") or (waiting.pop(0) if waiting else self._new_call_id(name))
                results.append(
                    {
                        "role": "tool",
                        "tool_call_id": str(call_id),
                        "name": name,
                        "content": _json_text(answer.get("response")),
                    }
                )
            else:
                content.append(
                    {"type": "text", "text": _json_text({k: v for k, v in part.items() if v is not None})}
                )
        return _assemble(role, results, content, calls, thinking)

    def _responses_output(self, output: list[Any]) -> list[Message]:
        """An OpenAI Responses result's ``output`` items as one assistant message."""
        content: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        for item in output:
            kind = item.get("type") if isinstance(item, Mapping) else None
            if kind == "message" and isinstance(item.get("content"), list):
                converted = self._openai_content(item["content"])
                content.extend(converted if isinstance(converted, list) else [])
            elif kind == "function_call":
                calls.append(
                    self._tool_call(
                        item.get("call_id") or item.get("id"), item.get("name"), item.get("arguments")
                    )
                )
            elif kind != "reasoning":
                content.append({"type": "text", "text": _json_text(item)})
        message: Message = {"role": "assistant", "content": content or None}
        if calls:
            message["tool_calls"] = calls
        return [message]

    # ------------------------------------------------------------ pieces

    def _tool_call(self, call_id: Any, name: Any, arguments: Any) -> dict[str, Any]:
        tool = str(name or "")
        return {
            "id": str(call_id) if call_id else self._new_call_id(tool),
            "type": "function",
            "function": {"name": tool, "arguments": _json_text(arguments if arguments is not None else {})},
        }

    def _new_call_id(self, name: str) -> str:
        self._generated += 1
        return f"call_{name or 'tool'}_{self._generated}"

    def _image_block(self, url: str) -> dict[str, Any]:
        if url.startswith("data:") and ";base64," in url:
            header, _, data = url.partition(";base64,")
            return self._inline_image(data, header[len("data:") :] or "image/png")
        return {"type": "image_url", "image_url": {"url": url}}

    def _inline_image(self, data: str, mime_type: str) -> dict[str, Any]:
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            return {"type": "text", "text": f"[inline {mime_type} data that is not base64]"}
        return {"type": "image_url", "image_url": {"url": self._store_image(raw, mime_type)}}

    @staticmethod
    def _opaque(role: str, value: Any) -> Message:
        """A value no shape describes, kept as its JSON text."""
        return {"role": role if role in _ROLES.values() else "user", "content": _json_text(value)}


def _assemble(
    role: str,
    results: list[Message],
    content: list[dict[str, Any]],
    calls: list[dict[str, Any]],
    thinking: list[str],
) -> list[Message]:
    """The tool results of a block-structured message, then the message itself (unless the tool
    results were all it held)."""
    messages = list(results)
    if content or calls or thinking or not results:
        message: Message = {"role": role, "content": content or None}
        if calls:
            message["tool_calls"] = calls
        if thinking:
            message["thinking"] = "\n".join(thinking)
        messages.append(message)
    return messages


def _image_store(state: LocalState) -> StoreImage:
    def store(data: bytes, mime_type: str) -> str:
        if state.s3_url is None:  # no S3 endpoint: keep the image where it came from
            return f"data:{mime_type};base64,{base64.b64encode(data).decode('ascii')}"
        extension = _IMAGE_EXTENSIONS.get(mime_type, "bin")
        key = f"{IMAGE_PREFIX}{hashlib.sha256(data).hexdigest()}.{extension}"
        return _s3.put_public_object(state, key, data, mime_type)

    return store


def _checked(messages: list[Message]) -> list[smodels.SessionIngestMessage]:
    """The messages as ingest models; one the schema refuses is kept as its JSON text instead."""
    checked = []
    for message in messages:
        try:
            checked.append(smodels.SessionIngestMessage.model_validate(message))
        except ValidationError:
            role = message.get("role") if message.get("role") in _ROLES.values() else "user"
            checked.append(smodels.SessionIngestMessage(role=role, content=_json_text(message)))
    return checked


def log_session(state: LocalState, body: smodels.SessionLogRequest) -> smodels.SessionIngestResponse:
    """Store one ``Session.log`` call (blocking: images are written to disk; run in a worker thread).

    Args:
        state: Server state.
        body: The call.
    """
    normalizer = SessionLogNormalizer(_image_store(state))
    messages = [*normalizer.history(body.history or []), *normalizer.response(body.response)]
    known = body.session_id is not None and session_records(state).get(body.session_id) is not None
    metadata = None
    if not known and body.config is not None:
        metadata = smodels.SessionMetadata.model_validate({"score": None, "config": body.config})
    # The ingest model needs a message; complete()/fail() send none, so it is built unvalidated
    # from fields already checked against the schema.
    ingest = smodels.SessionIngestRequest.model_construct(
        messages=_checked(messages),
        session_id=body.session_id,
        job_id=body.job_id,
        task_key=body.task_key,
        model=body.model,
        instance_id=body.instance_id,
        status=body.status or (None if known else "running"),
        metadata=metadata,
        ended_at=body.ended_at,
        verifier_execution_id=body.verifier_execution_id,
    )
    return _sessions.ingest(state, ingest)


def router(state: LocalState) -> APIRouter:
    """The ``log_session`` route (bearer auth and body validation are added by the app)."""
    api = APIRouter(tags=["sessions"])

    @api.post("/v1/traces/logs", response_model=smodels.SessionIngestResponse)
    async def log_session_route(body: smodels.SessionLogRequest) -> smodels.SessionIngestResponse:
        """Normalize a ``Session.log`` call's history and response into the session's messages."""
        return await anyio.to_thread.run_sync(log_session, state, body)

    return api
