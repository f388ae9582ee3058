"""Traces with screenshots, without a network: the chat-history rewrite (docs/wire.md#traces),
the screenshot upload step with a fake store, and the two HTTP calls against an
``httpx.MockTransport`` that pins the exact URLs and auth.

Every seed commit about traces has a regression test here whose docstring names it.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import logging
import sys
import threading
from typing import Any

import httpx
import pytest

from fleet_sdk import AsyncFleet
from fleet_sdk.traces import (
    DEFAULT_PUBLIC_URL_BASE,
    ScreenshotStore,
    collect_data_images,
    extension_for,
    is_turn_footer,
    parse_data_url,
    rewrite_chat_history,
    screenshot_key,
)

PLATFORM_JOBS_URL = "https://api.internal.fleet-platform.fleetai.com/v1/traces/jobs"
ORCHESTRATOR_INGEST_URL = "https://orchestrator.fleetai.com/v1/sessions/ingest"
API_KEY = "sk-test-traces-0000"

PNG_BYTES = b"\x89PNG\r\n\x1a\n" + b"fake-png-payload"
JPEG_BYTES = b"\xff\xd8\xff\xe0" + b"fake-jpeg-payload"


def data_url(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def image_block(url: str) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": url}}


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def tool_call(call_id: str, name: str = "computer", arguments: str = '{"action": "click"}') -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def sha24(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:24]


class FakeStore:
    """A ``ScreenshotSink`` that records uploads and can fail chosen keys."""

    max_concurrency = 4

    def __init__(self, fail: set[str] | None = None, base: str = "https://cdn.example.test") -> None:
        self.fail = fail or set()
        self.base = base
        self.calls: list[tuple[str, bytes, str]] = []
        self._lock = threading.Lock()

    def upload(self, key: str, data: bytes, mime: str) -> str:
        with self._lock:
            self.calls.append((key, data, mime))
        if key in self.fail or "*" in self.fail:
            raise RuntimeError("S3 is down")
        return f"{self.base}/{key}"


class FakeS3Client:
    """Enough of a boto3 S3 client for ``ScreenshotStore``: head_object / put_object on a dict."""

    def __init__(self) -> None:
        from botocore.exceptions import ClientError

        self._error = ClientError
        self.objects: dict[str, bytes] = {}
        self.heads = 0
        self.puts: list[dict[str, Any]] = []

    def head_object(self, *, Bucket: str, Key: str) -> dict[str, Any]:
        self.heads += 1
        if Key not in self.objects:
            raise self._error({"Error": {"Code": "404", "Message": "Not Found"}}, "HeadObject")
        return {"ContentLength": len(self.objects[Key])}

    def put_object(self, **params: Any) -> dict[str, Any]:
        self.puts.append(params)
        self.objects[params["Key"]] = params["Body"]
        return {}


# -- rule 1: data URLs -> public URLs ------------------------------------------------------


def test_parse_data_url_png_and_jpeg_keys() -> None:
    png = parse_data_url(data_url(PNG_BYTES))
    jpeg = parse_data_url(data_url(JPEG_BYTES, "image/jpeg"))
    jpg = parse_data_url(data_url(JPEG_BYTES, "image/jpg"))
    assert png is not None and jpeg is not None and jpg is not None
    assert png.data == PNG_BYTES and png.mime == "image/png"
    assert png.key == f"harness/screenshot/{sha24(PNG_BYTES)}.png"
    assert jpeg.key == f"harness/screenshot/{sha24(JPEG_BYTES)}.jpeg"
    assert jpg.key == jpeg.key


@pytest.mark.parametrize(
    ("mime", "ext"),
    [
        ("image/png", "png"),
        ("image/jpeg", "jpeg"),
        ("image/jpg", "jpeg"),
        ("IMAGE/JPEG", "jpeg"),
        ("image/webp", "png"),
        ("image/gif", "png"),
    ],
)
def test_extension_is_jpeg_only_for_jpeg_mimes(mime: str, ext: str) -> None:
    assert extension_for(mime) == ext
    assert screenshot_key(b"x", mime).endswith(f".{ext}")


def test_key_is_content_addressed() -> None:
    assert screenshot_key(PNG_BYTES, "image/png") == screenshot_key(PNG_BYTES, "image/png")
    assert screenshot_key(PNG_BYTES, "image/png") != screenshot_key(PNG_BYTES + b"!", "image/png")
    assert len(screenshot_key(PNG_BYTES, "image/png").split("/")[-1].split(".")[0]) == 24


@pytest.mark.parametrize(
    "url",
    [
        "https://fleet-sessions-images.s3.us-east-1.amazonaws.com/harness/screenshot/abc.png",
        "http://example.test/a.png",
        "data:image/png,notbase64marker",
        "data:image/png;base64,",
        "data:image/png;base64,@@@not-base64@@@",
        "data:text/plain;base64,aGVsbG8=",
        "data:;base64,aGVsbG8=",
        "not a url",
    ],
)
def test_malformed_and_remote_urls_are_not_parsed(url: str) -> None:
    assert parse_data_url(url) is None


def test_data_url_with_parameters_and_line_breaks_is_parsed() -> None:
    encoded = base64.b64encode(PNG_BYTES).decode()
    image = parse_data_url(f"data:image/png;name=shot.png;base64,{encoded[:8]}\n{encoded[8:]}")
    assert image is not None and image.data == PNG_BYTES


def test_rewrite_replaces_data_urls_and_keeps_the_rest() -> None:
    """Seed 6dc3fd1 (private bucket): "/v1/traces/logs ... stored the base64 payload in the
    PRIVATE bucket s3://theseus-model-traces, so every <img src=...> tag the Fleet UI rendered
    returned HTTP 403". Data URLs become public HTTPS URLs; malformed data URLs and
    already-https URLs stay as they are."""
    good = data_url(PNG_BYTES)
    bad = "data:image/png;base64,@@@"
    remote = "https://elsewhere.example/x.png"
    history = [
        {"role": "tool", "tool_call_id": "c1", "content": [image_block(u) for u in (good, bad, remote)]}
    ]
    public = "https://fleet-sessions-images.s3.us-east-1.amazonaws.com/harness/screenshot/k.png"
    out = rewrite_chat_history(history, {good: public})
    assert [b["image_url"]["url"] for b in out[0]["content"]] == [public, bad, remote]


def test_bare_string_image_url_form_is_normalized() -> None:
    good = data_url(PNG_BYTES)
    out = rewrite_chat_history(
        [{"role": "tool", "tool_call_id": "c", "content": [{"type": "image_url", "image_url": good}]}],
        {good: "https://x.test/k.png"},
    )
    assert out[0]["content"] == [image_block("https://x.test/k.png")]


def test_collect_data_images_dedups_and_skips_malformed() -> None:
    good = data_url(PNG_BYTES)
    history = [
        {"role": "user", "content": [image_block(good), image_block("data:image/png;base64,%%")]},
        {"role": "user", "content": [image_block(good), image_block("https://x.test/a.png")]},
        {"role": "user", "content": "plain text"},
    ]
    images = collect_data_images(history)
    assert list(images) == [good]


# -- rule 2: user message with an image -> tool --------------------------------------------


def test_user_with_image_becomes_tool_with_latest_assistant_call_id() -> None:
    """Seed "role:'tool' for image observations": "role:'user' content arrays get
    text-stripped and the screenshot is lost"; a tool message carrying the latest
    assistant.tool_calls[0].id renders it inline."""
    history = [
        {"role": "user", "content": "Do the task."},
        {"role": "assistant", "content": None, "tool_calls": [tool_call("call_A"), tool_call("call_B")]},
        {"role": "user", "content": [image_block("https://x.test/1.png"), text_block("clicked")]},
        {"role": "assistant", "content": None, "tool_calls": [tool_call("call_C")]},
        {"role": "user", "content": [image_block("https://x.test/2.png")]},
    ]
    out = rewrite_chat_history(history)
    assert out[0] == {"role": "user", "content": "Do the task."}
    assert out[2]["role"] == "tool" and out[2]["tool_call_id"] == "call_A"
    assert out[4]["role"] == "tool" and out[4]["tool_call_id"] == "call_C"


def test_user_with_image_and_no_assistant_call_gets_a_synthesized_id() -> None:
    """Seed "...role:'tool' for image observations": Kimi's inline tool calls leave no
    structured tool_calls, so a call_<uuid> is synthesized for the viewer to bind against."""
    history = [
        {"role": "assistant", "content": "<tool_call>click</tool_call>"},
        {"role": "user", "content": [image_block("https://x.test/1.png")]},
    ]
    out = rewrite_chat_history(history)
    assert out[1]["role"] == "tool"
    assert out[1]["tool_call_id"].startswith("call_") and len(out[1]["tool_call_id"]) > len("call_")
    assert "tool_calls" not in out[0]


def test_user_text_messages_stay_user() -> None:
    """Seed "...role:'tool' for image observations": only user messages carrying an image move."""
    history = [
        {"role": "assistant", "content": None, "tool_calls": [tool_call("call_A")]},
        {"role": "user", "content": [text_block("no image here")]},
        {"role": "user", "content": "plain"},
    ]
    out = rewrite_chat_history(history)
    assert [m["role"] for m in out] == ["assistant", "user", "user"]
    assert "tool_call_id" not in out[1] and "tool_call_id" not in out[2]


def test_tool_message_keeps_its_tool_call_id() -> None:
    """Seed "...role:'tool' for image observations": an existing tool role is preserved."""
    history = [
        {"role": "assistant", "content": None, "tool_calls": [tool_call("call_A")]},
        {"role": "tool", "tool_call_id": "call_own", "content": [image_block("https://x.test/1.png")]},
    ]
    out = rewrite_chat_history(history)
    assert out[1] == {
        "role": "tool",
        "tool_call_id": "call_own",
        "content": [image_block("https://x.test/1.png")],
    }


# -- rule 3: tool_calls forwarded as they are ----------------------------------------------


def test_assistant_tool_calls_are_forwarded() -> None:
    """Seed "preserve tool_calls": "_assemble_messages's forward branch did
    messages.append({"role": role, "content": content}) — stripping every field except role
    and content", so the viewer showed Tool Calls=0 and could not link screenshots."""
    calls = [tool_call("call_A", "computer", '{"action": "screenshot"}')]
    history = [
        {"role": "assistant", "content": "clicking", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "call_A", "content": [image_block("https://x.test/1.png")]},
    ]
    out = rewrite_chat_history(history)
    assert out[0]["tool_calls"] == calls
    assert out[1]["tool_call_id"] == out[0]["tool_calls"][0]["id"]


def test_tool_calls_are_not_added_when_absent_nor_put_on_other_roles() -> None:
    """Seed "preserve tool_calls": "absent-tool_calls case stays absent (don't add empty
    list)", "tool_calls not promoted onto non-assistant messages", and "Targeted, not a
    {**msg, ...} spread"."""
    history = [
        {"role": "assistant", "content": "thinking"},
        {"role": "assistant", "content": "x", "tool_calls": []},
        {"role": "user", "content": "hi", "tool_calls": [tool_call("call_X")], "junk": 1},
        {"role": "tool", "tool_call_id": "call_Y", "content": "ok", "tool_calls": [tool_call("call_Z")]},
        {"role": "system", "content": "sys", "tool_call_id": "nope"},
    ]
    out = rewrite_chat_history(history)
    assert "tool_calls" not in out[0] and "tool_calls" not in out[1]
    assert out[2] == {"role": "user", "content": "hi"}
    assert out[3] == {"role": "tool", "tool_call_id": "call_Y", "content": "ok"}
    assert out[4] == {"role": "system", "content": "sys"}


def test_object_arguments_become_json_text() -> None:
    history = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": {"a": 1}}}],
        }
    ]
    out = rewrite_chat_history(history)
    assert out[0]["tool_calls"] == [
        {"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
    ]


# -- rule 4: turn footers ------------------------------------------------------------------


@pytest.mark.parametrize("footer", ["[Turn 3/64]", " [Turn 12/64] ", "[Turn 64 / 64]", "[Turn 1/64]\n"])
def test_turn_footers_are_dropped(footer: str) -> None:
    """Seed "strip [Turn N/M] footer": the viewer "renders a content array of
    [image_url, footer_text] as siblings of a JSON tree, nesting the screenshot inside the
    tree"; footers are stripped only at upload time."""
    assert is_turn_footer(footer)
    history = [
        {"role": "tool", "tool_call_id": "c", "content": [image_block("https://x/1.png"), text_block(footer)]}
    ]
    out = rewrite_chat_history(history)
    assert out[0]["content"] == [image_block("https://x/1.png")]


@pytest.mark.parametrize(
    "text",
    ["Turn 3/64", "[Turn 3/64] clicked the button", "Search results: [Turn 3/64]", "[Turn x/64]", "ok"],
)
def test_other_text_survives(text: str) -> None:
    assert not is_turn_footer(text)
    out = rewrite_chat_history([{"role": "tool", "tool_call_id": "c", "content": [text_block(text)]}])
    assert out[0]["content"] == [text_block(text)]


# -- shape and purity ----------------------------------------------------------------------


def test_output_is_openai_shape_never_gemini() -> None:
    """Seeds "Gemini inline_data shape" ("/v1/traces/logs binds each parts[*] as a Gemini
    Part") and 6dc3fd1 (that path put images in a private bucket): the upload is OpenAI
    multimodal messages, never history/parts/inline_data."""
    good = data_url(PNG_BYTES)
    history = [
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": None, "tool_calls": [tool_call("c1")]},
        {"role": "user", "content": [image_block(good), text_block("[Turn 1/5]")]},
    ]
    out = rewrite_chat_history(history, {good: "https://x.test/k.png"})
    dumped = json.dumps(out)
    for legacy in ('"history"', '"parts"', '"inline_data"', '"mime_type"'):
        assert legacy not in dumped
    assert all(set(m) <= {"role", "content", "tool_calls", "tool_call_id", "name"} for m in out)


def test_callers_history_is_never_mutated() -> None:
    """Seed "...role:'tool' for image observations": the model's chat_history MUST keep
    role:'user' (Kimi's chat template); the rename happens only in the upload copy."""
    good = data_url(PNG_BYTES)
    history = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": {}}}],
        },
        {"role": "user", "content": [image_block(good), text_block("[Turn 1/64]")]},
    ]
    before = copy.deepcopy(history)
    out = rewrite_chat_history(history, {good: "https://x.test/k.png"})
    assert history == before
    out[1]["content"].append("changed")
    out[0]["tool_calls"][0]["id"] = "changed"
    assert history == before


def test_unknown_blocks_and_non_string_content_become_text() -> None:
    out = rewrite_chat_history(
        [
            {"role": "tool", "tool_call_id": "c", "content": [{"type": "input_audio", "data": "x"}]},
            {"role": "tool", "tool_call_id": "d", "content": {"rows": [1, 2]}},
        ]
    )
    assert out[0]["content"] == [text_block('{"type": "input_audio", "data": "x"}')]
    assert out[1]["content"] == '{"rows": [1, 2]}'


# -- the upload step (fake store, fake S3 client) ------------------------------------------


def fleet_with(handler: Any) -> AsyncFleet:
    return AsyncFleet(
        API_KEY, http_client=httpx.AsyncClient(transport=httpx.MockTransport(handler)), environ={}
    )


class Recorder:
    def __init__(self, *, ingest_status: int = 200) -> None:
        self.requests: list[httpx.Request] = []
        self.ingest_status = ingest_status

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        url = str(request.url)
        if url == PLATFORM_JOBS_URL:
            return httpx.Response(200, json={"job_id": "job-1", "name": "run", "status": "active"})
        if url == ORCHESTRATOR_INGEST_URL:
            if self.ingest_status != 200:
                return httpx.Response(self.ingest_status, json={"detail": "boom"})
            return httpx.Response(
                200,
                json={
                    "success": True,
                    "session_id": "sess-1",
                    "message_count": 3,
                    "created_new_session": True,
                },
            )
        return httpx.Response(404, json={"detail": f"unexpected {request.method} {url}"})

    def bodies(self) -> list[Any]:
        return [json.loads(r.content) for r in self.requests if r.content]


def screenshot_history(*shots: bytes) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = [{"role": "user", "content": "Do the task."}]
    for i, shot in enumerate(shots, 1):
        history.append({"role": "assistant", "content": None, "tool_calls": [tool_call(f"call_{i}")]})
        history.append(
            {"role": "user", "content": [image_block(data_url(shot)), text_block(f"[Turn {i}/{len(shots)}]")]}
        )
    return history


async def test_create_job_on_platform_host_and_ingest_on_orchestrator_with_bearer() -> None:
    """Seeds "create_trace_job and upload_trace were hitting orchestrator.fleetai.com" /
    "Regression from 6dc3fd1: I collapsed both endpoints" (wrong host: every job 404'd and a
    run uploaded zero sessions) and "The previous SDK call also used X-API-Key" (answered
    "Authentication required. Provide either API key or JWT token with team ID"). Exact URLs,
    different hosts, Bearer only."""
    recorder = Recorder()
    fleet = fleet_with(recorder)
    fleet.traces.screenshot_store = FakeStore()
    try:
        job_id = await fleet.traces.create_job("run")
        session_id = await fleet.traces.upload_session(
            job_id=job_id, task_key="t1", model="m", chat_history=screenshot_history(PNG_BYTES), reward=1.0
        )
    finally:
        await fleet.close()
    assert (job_id, session_id) == ("job-1", "sess-1")
    assert [(r.method, str(r.url)) for r in recorder.requests] == [
        ("POST", PLATFORM_JOBS_URL),
        ("POST", ORCHESTRATOR_INGEST_URL),
    ]
    assert httpx.URL(PLATFORM_JOBS_URL).host != httpx.URL(ORCHESTRATOR_INGEST_URL).host
    for request in recorder.requests:
        assert request.headers["Authorization"] == f"Bearer {API_KEY}"
        assert "x-api-key" not in request.headers
    assert recorder.bodies()[0] == {"name": "run"}


async def test_ingest_body_is_openai_shape_with_public_urls_score_and_verifier_id() -> None:
    """Seed 6dc3fd1 ("payload is OpenAI shape with `messages`", "reward survives on
    metadata.score", "image URLs are HTTPS not data:") and the verifier linkage seed
    ("aggregation reads score ONLY from sessions that have a linked verifier_execution_id")."""
    recorder = Recorder()
    fleet = fleet_with(recorder)
    store = FakeStore()
    history = screenshot_history(PNG_BYTES, JPEG_BYTES)
    try:
        session_id = await fleet.traces.upload_session(
            job_id="job-1",
            task_key="t1",
            model="anthropic/claude-x",
            chat_history=history,
            reward=0.5,
            instance_id="inst-1",
            metadata={"score": 99, "run": "r1"},
            verifier_execution_id="vex-1",
            screenshot_store=store,
        )
    finally:
        await fleet.close()
    assert session_id == "sess-1"
    (body,) = recorder.bodies()
    assert set(body) >= {"messages", "job_id", "task_key", "model", "metadata", "verifier_execution_id"}
    assert "history" not in body and "parts" not in json.dumps(body)
    assert body["metadata"] == {"score": 0.5, "run": "r1"}
    assert body["verifier_execution_id"] == "vex-1"
    assert body["instance_id"] == "inst-1"
    tools = [m for m in body["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tools] == ["call_1", "call_2"]
    urls = [m["content"][0]["image_url"]["url"] for m in tools]
    assert urls == [
        f"https://cdn.example.test/harness/screenshot/{sha24(PNG_BYTES)}.png",
        f"https://cdn.example.test/harness/screenshot/{sha24(JPEG_BYTES)}.png",
    ]
    assert all(len(m["content"]) == 1 for m in tools)  # footers dropped
    assistants = [m for m in body["messages"] if m["role"] == "assistant"]
    assert [a["tool_calls"][0]["id"] for a in assistants] == ["call_1", "call_2"]
    assert history == screenshot_history(PNG_BYTES, JPEG_BYTES)  # caller's copy untouched


async def test_unknown_reward_stays_null() -> None:
    """docs/wire.md#verifiers: None means unknown and must not become 0.0."""
    recorder = Recorder()
    fleet = fleet_with(recorder)
    try:
        await fleet.traces.upload_session(
            job_id="j", task_key="t", model="m", chat_history=[{"role": "user", "content": "x"}], reward=None
        )
    finally:
        await fleet.close()
    (body,) = recorder.bodies()
    assert body["metadata"] == {"score": None}
    assert "verifier_execution_id" not in body


async def test_failed_screenshot_upload_passes_the_block_through() -> None:
    """Seed 6dc3fd1: "S3 upload failures degrade gracefully — the block is left alone, the
    session ingest still proceeds"."""
    recorder = Recorder()
    fleet = fleet_with(recorder)
    bad_key = screenshot_key(JPEG_BYTES, "image/png")
    store = FakeStore(fail={bad_key})
    try:
        session_id = await fleet.traces.upload_session(
            job_id="j",
            task_key="t",
            model="m",
            chat_history=screenshot_history(PNG_BYTES, JPEG_BYTES),
            reward=0.0,
            screenshot_store=store,
        )
    finally:
        await fleet.close()
    assert session_id == "sess-1"
    (body,) = recorder.bodies()
    urls = [m["content"][0]["image_url"]["url"] for m in body["messages"] if m["role"] == "tool"]
    assert urls[0].startswith("https://cdn.example.test/")
    assert urls[1] == data_url(JPEG_BYTES)


async def test_repeated_screenshot_is_uploaded_once() -> None:
    """Seed 6dc3fd1: content-addressed dedup, a repeated screenshot gives one upload."""
    recorder = Recorder()
    fleet = fleet_with(recorder)
    store = FakeStore()
    try:
        await fleet.traces.upload_session(
            job_id="j",
            task_key="t",
            model="m",
            chat_history=screenshot_history(PNG_BYTES, PNG_BYTES, JPEG_BYTES, PNG_BYTES),
            reward=1.0,
            screenshot_store=store,
        )
    finally:
        await fleet.close()
    assert sorted(key for key, _, _ in store.calls) == sorted(
        {screenshot_key(PNG_BYTES, "image/png"), screenshot_key(JPEG_BYTES, "image/png")}
    )


def test_screenshot_store_heads_first_and_caches() -> None:
    """Seed 6dc3fd1: "re-uploads short-circuit on head_object"; plus an in-process cache."""
    s3 = FakeS3Client()
    store = ScreenshotStore(client=s3)
    key = screenshot_key(PNG_BYTES, "image/png")
    url = store.upload(key, PNG_BYTES, "image/png")
    assert url == f"{DEFAULT_PUBLIC_URL_BASE}/{key}"
    assert url == f"https://fleet-sessions-images.s3.us-east-1.amazonaws.com/{key}"
    assert store.upload(key, PNG_BYTES, "image/png") == url  # cache: no second head
    assert (s3.heads, len(s3.puts), store.uploads) == (1, 1, 1)
    put = s3.puts[0]
    assert (put["Bucket"], put["Key"], put["ContentType"], put["ACL"]) == (
        "fleet-sessions-images",
        key,
        "image/png",
        "public-read",
    )
    # Another process (a fresh store) finds it with head_object and does not put it again.
    other = ScreenshotStore(client=s3)
    assert other.upload(key, PNG_BYTES, "image/png") == url
    assert (len(s3.puts), other.uploads, other.existing) == (1, 0, 1)


def test_screenshot_store_drops_acl_when_bucket_rejects_it() -> None:
    from botocore.exceptions import ClientError

    s3 = FakeS3Client()
    real_put = s3.put_object

    def put(**params: Any) -> dict[str, Any]:
        if "ACL" in params:
            raise ClientError({"Error": {"Code": "AccessControlListNotSupported"}}, "PutObject")
        return real_put(**params)

    s3.put_object = put  # type: ignore[method-assign]
    store = ScreenshotStore(client=s3)
    store.upload("harness/screenshot/a.png", PNG_BYTES, "image/png")
    assert store.acl is None and "ACL" not in s3.puts[0]


def test_screenshot_store_config_and_repr_without_secrets() -> None:
    store = ScreenshotStore.for_endpoint(
        "http://127.0.0.1:9000/", aws_access_key_id="AKIA-SECRET", aws_secret_access_key="SECRET-VALUE"
    )
    assert store.public_url("harness/screenshot/a.png") == (
        "http://127.0.0.1:9000/fleet-sessions-images/harness/screenshot/a.png"
    )
    assert store.addressing_style == "path" and store.endpoint_url == "http://127.0.0.1:9000"
    assert "SECRET" not in repr(store)
    assert ScreenshotStore().public_url_base == "https://fleet-sessions-images.s3.us-east-1.amazonaws.com"
    with pytest.raises(ValueError):
        ScreenshotStore(max_concurrency=0)


def test_import_fleet_sdk_does_not_import_boto3() -> None:
    import subprocess

    code = "import sys, fleet_sdk, fleet_sdk.traces; fleet_sdk.AsyncFleet; print('boto3' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


# -- the upload never raises ---------------------------------------------------------------


@pytest.mark.parametrize("status", [500, 422, 401, 404])
async def test_http_failure_returns_none_and_logs_no_secret(
    status: int, caplog: pytest.LogCaptureFixture
) -> None:
    """docs/wire.md#traces: "Upload never fails a rollout: errors are logged and the call returns None"."""
    recorder = Recorder(ingest_status=status)
    fleet = fleet_with(recorder)
    try:
        with caplog.at_level(logging.WARNING, logger="fleet_sdk"):
            result = await fleet.traces.upload_session(
                job_id="j",
                task_key="t",
                model="m",
                chat_history=[{"role": "user", "content": "x"}],
                reward=1.0,
            )
    finally:
        await fleet.close()
    assert result is None
    assert "trace upload of task t" in caplog.text
    assert API_KEY not in caplog.text


async def test_connection_error_and_validation_error_return_none() -> None:
    def down(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    fleet = fleet_with(down)
    try:
        assert (
            await fleet.traces.upload_session(
                job_id="j",
                task_key="t",
                model="m",
                chat_history=[{"role": "user", "content": "x"}],
                reward=1.0,
            )
            is None
        )
        # No messages at all: the ingest needs at least one; validation fails, still no raise.
        assert (
            await fleet.traces.upload_session(
                job_id="j", task_key="t", model="m", chat_history=[], reward=1.0
            )
            is None
        )
        bad_role = [{"role": "narrator", "content": "x"}]
        assert (
            await fleet.traces.upload_session(
                job_id="j", task_key="t", model="m", chat_history=bad_role, reward=1.0
            )
            is None
        )
    finally:
        await fleet.close()


async def test_every_screenshot_failing_still_uploads_the_session() -> None:
    recorder = Recorder()
    fleet = fleet_with(recorder)
    try:
        session_id = await fleet.traces.upload_session(
            job_id="j",
            task_key="t",
            model="m",
            chat_history=screenshot_history(PNG_BYTES, JPEG_BYTES),
            reward=1.0,
            screenshot_store=FakeStore(fail={"*"}),
        )
    finally:
        await fleet.close()
    assert session_id == "sess-1"


async def test_create_job_raises_so_a_run_does_not_upload_nothing_silently() -> None:
    """Seed "Regression from 6dc3fd1": "got 404 Not Found ... The outer try/except logged the
    warning ... zero Fleet UI sessions were created"; ``create_job`` raises instead."""
    from fleet_sdk import NotFoundError

    fleet = fleet_with(lambda request: httpx.Response(404, json={"detail": "Not Found"}))
    try:
        with pytest.raises(NotFoundError):
            await fleet.traces.create_job("run")
    finally:
        await fleet.close()


def test_sync_fleet_has_traces() -> None:
    from fleet_sdk import Fleet
    from fleet_sdk.traces import Traces

    with Fleet(API_KEY, environ={}) as fleet:
        assert isinstance(fleet.traces, Traces)
        store = FakeStore()
        fleet.traces.screenshot_store = store
        assert fleet.traces.screenshot_store is store


# -- TaskEnv records the episode and uploads it (fake instance, mock HTTP) --------------------


class FakeMCP:
    async def list_tools(self) -> list[Any]:
        from fleet_sdk.tools import Tool

        return [Tool(name="computer", description="mouse and keyboard", input_schema={"type": "object"})]


class FakeInstance:
    """Stands in for an ``AsyncEnv``: a computer tool whose screenshots cycle through two images."""

    instance_id = "inst-fake"

    def __init__(self) -> None:
        self.mcp = FakeMCP()
        self.calls = 0

    async def reset(self, seed: int | None = None) -> None:
        return None

    async def call_tool(self, name: str, params: Any, *, deadline: float | None = None) -> Any:
        self.calls += 1
        shot = PNG_BYTES if self.calls % 2 else JPEG_BYTES
        return [image_block(data_url(shot, "image/png" if self.calls % 2 else "image/jpeg"))]

    async def close(self) -> None:
        return None


async def test_task_env_records_a_multimodal_episode_and_uploads_it_after_the_episode() -> None:
    """TaskEnv keeps the model's history (tool results with the [Turn N/M] footer) and uploads
    the rewritten copy once the episode ends; an unknown reward goes up as null."""
    from fleet_sdk.task_env import TaskEnv

    recorder = Recorder()
    fleet = fleet_with(recorder)
    store = FakeStore()
    task = {
        "task_key": "cu-1",
        "prompt": "Click the button.",
        "env_key": "e",
        "task_modality": "computer_use",
    }
    env = TaskEnv(
        task, fleet=fleet, max_steps=2, trace_job_id="job-1", trace_model="m", screenshot_store=store
    )
    env.env = FakeInstance()  # type: ignore[assignment]
    try:
        await env.reset_async()
        await env.step_async({"tool": "computer", "params": {"action": "click"}, "tool_call_id": "call_x"})
        _, reward, done, _ = await env.step_async({"tool": "computer", "params": {"action": "screenshot"}})
    finally:
        await fleet.close()
    assert done and reward is None and env.done_reason == "max_steps"
    assert env.trace_session_id == "sess-1"
    roles = [m["role"] for m in env.chat_history]
    assert roles == ["user", "user", "assistant", "tool", "assistant", "tool"]
    assert env.chat_history[3]["tool_call_id"] == "call_x"
    assert env.chat_history[3]["content"][-1] == text_block("[Turn 1/2]")  # the model still sees it
    assert env.chat_history[1]["content"][0]["image_url"]["url"].startswith("data:")

    (body,) = recorder.bodies()
    assert body["job_id"] == "job-1" and body["task_key"] == "cu-1" and body["instance_id"] == "inst-fake"
    assert body["metadata"]["score"] is None and body["metadata"]["done_reason"] == "max_steps"
    messages = body["messages"]
    assert [m["role"] for m in messages] == ["user", "tool", "assistant", "tool", "assistant", "tool"]
    assert messages[1]["tool_call_id"].startswith("call_")  # initial screenshot: synthesized id
    assert messages[3]["tool_call_id"] == "call_x"
    assert messages[5]["tool_call_id"] == messages[4]["tool_calls"][0]["id"]
    for message in (messages[1], messages[3], messages[5]):
        assert len(message["content"]) == 1  # footer dropped
        assert message["content"][0]["image_url"]["url"].startswith(
            "https://cdn.example.test/harness/screenshot/"
        )
    assert len({key for key, _, _ in store.calls}) == 2 and len(store.calls) == 2
