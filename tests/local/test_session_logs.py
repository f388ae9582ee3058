"""``POST /v1/traces/logs``: a ``Session.log(history, response)`` in a model API's own shape becomes
an ingested session whose transcript is OpenAI multimodal messages (``fleet_local._session_logs``)."""

from __future__ import annotations

import base64
import datetime as dt
from typing import Any

import httpx

from fleet_local import LocalFleet
from fleet_local._session_logs import SessionLogNormalizer
from fleet_sdk import Fleet

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
PNG_B64 = base64.b64encode(PNG).decode()


def keep_inline(data: bytes, mime_type: str) -> str:
    return f"stored:{mime_type}:{len(data)}"


def normalized(history: list[Any], response: Any = None) -> list[dict[str, Any]]:
    normalizer = SessionLogNormalizer(keep_inline)
    return [*normalizer.history(history), *normalizer.response(response)]


def test_openai_history_and_chat_completion() -> None:
    completion = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "c1",
                            "type": "function",
                            "function": {"name": "list_orders", "arguments": "{}"},
                        }
                    ],
                },
            }
        ],
    }
    messages = normalized(
        [
            {"role": "developer", "content": "be brief"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "look"},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_B64}"}},
                ],
            },
        ],
        completion,
    )
    assert messages == [
        {"role": "system", "content": "be brief"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": f"stored:image/png:{len(PNG)}"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "list_orders", "arguments": "{}"}}
            ],
        },
    ]


def test_gemini_contents_pair_calls_without_ids_with_their_responses() -> None:
    """The public SDK's Gemini agent logs ``Content.model_dump()``: snake_case, unset fields null."""

    def part(**fields: Any) -> dict[str, Any]:
        blank = dict.fromkeys(("text", "thought", "inline_data", "function_call", "function_response"))
        return {**blank, **fields}

    history = [
        {
            "role": "user",
            "parts": [part(text="open it"), part(inline_data={"mime_type": "image/png", "data": PNG_B64})],
        },
        {
            "role": "model",
            "parts": [
                part(text="planning", thought=True),
                part(function_call={"name": "click", "args": {"x": 1}}),
            ],
        },
        {"role": "user", "parts": [part(function_response={"name": "click", "response": {"ok": True}})]},
    ]
    response = {"candidates": [{"content": {"role": "model", "parts": [part(text="done")]}}]}
    user, model, tool, answer = normalized(history, response)
    assert user == {
        "role": "user",
        "content": [
            {"type": "text", "text": "open it"},
            {"type": "image_url", "image_url": {"url": f"stored:image/png:{len(PNG)}"}},
        ],
    }
    call = model["tool_calls"][0]
    assert (model["role"], model["content"], model["thinking"]) == ("assistant", None, "planning")
    assert call["function"] == {"name": "click", "arguments": '{"x": 1}'}
    assert tool == {"role": "tool", "tool_call_id": call["id"], "name": "click", "content": '{"ok": true}'}
    assert answer == {"role": "assistant", "content": [{"type": "text", "text": "done"}]}


def test_anthropic_tool_use_and_results() -> None:
    history = [
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm"},
                {"type": "tool_use", "id": "tu_1", "name": "screenshot", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "tu_1",
                    "content": [
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": PNG_B64},
                        }
                    ],
                },
                {"type": "text", "text": "what now?"},
            ],
        },
    ]
    response = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "text": "ok"}],
    }
    assistant, tool, user, answer = normalized(history, response)
    assert assistant["tool_calls"] == [
        {"id": "tu_1", "type": "function", "function": {"name": "screenshot", "arguments": "{}"}}
    ]
    assert assistant["thinking"] == "hmm"
    assert tool == {
        "role": "tool",
        "tool_call_id": "tu_1",
        "content": [{"type": "image_url", "image_url": {"url": f"stored:image/png:{len(PNG)}"}}],
    }
    assert user == {"role": "user", "content": [{"type": "text", "text": "what now?"}]}
    assert answer == {"role": "assistant", "content": [{"type": "text", "text": "ok"}]}


def test_what_no_shape_describes_is_kept_as_json_text() -> None:
    assert normalized(["plain"], {"weird": [1, 2]}) == [
        {"role": "user", "content": "plain"},
        {"role": "assistant", "content": '{"weird": [1, 2]}'},
    ]
    responses_api = {"output": [{"type": "message", "content": [{"type": "output_text", "text": "hi"}]}]}
    assert normalized([], responses_api) == [
        {"role": "assistant", "content": [{"type": "text", "text": "hi"}]}
    ]


def test_a_logged_session_reads_back_and_completes(local: LocalFleet, fleet: Fleet) -> None:
    job_id = fleet.api.traces.create_trace_job(name="session-logs").job_id
    sessions = fleet.api.sessions
    first = sessions.log_session(
        job_id=job_id,
        model="openai/gpt-x",
        task_key="orderdesk-count-pending-orders",
        config={"temperature": 0},
        history=[{"role": "user", "parts": [{"inline_data": {"mime_type": "image/png", "data": PNG_B64}}]}],
        response="Looking.",
    )
    assert first.created_new_session and first.message_count == 2
    summary = sessions.get_job_sessions(job_id).tasks[0].sessions[0]
    assert (summary.session_id, summary.status, summary.model) == (first.session_id, "running", "gpt-x")

    done = sessions.log_session(
        session_id=first.session_id, status="completed", ended_at=dt.datetime(2025, 3, 1, 9, 30)
    )
    assert (done.session_id, done.message_count, done.created_new_session) == (first.session_id, 2, False)
    summary = sessions.get_job_sessions(job_id).tasks[0].sessions[0]
    assert summary.status == "completed"
    assert summary.ended_at == dt.datetime(2025, 3, 1, 9, 30, tzinfo=dt.UTC)

    transcript = sessions.get_session_transcript(first.session_id).transcript
    assert [m.role for m in transcript] == ["user", "assistant"]
    image = transcript[0].content
    assert isinstance(image, list) and image[0].type == "image_url"
    url = image[0].image_url.url
    assert url.startswith(f"{local.s3_url}/")  # stored on the local S3 endpoint, public
    assert httpx.get(url).content == PNG
    assert transcript[1].content == "Looking."
