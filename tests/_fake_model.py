"""Fake OpenAI-compatible ``/chat/completions`` endpoints on loopback, for jobs with model policies."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

__all__ = [
    "ModelHandler",
    "ReferenceModel",
    "reference_model",
    "serve_model",
    "text_reply",
    "tool_call_reply",
]


class ModelHandler(BaseHTTPRequestHandler):
    """A fake model: a subclass's :meth:`answer` picks each reply; every request is kept in
    ``requests`` (``path``, ``auth`` header and JSON ``body``)."""

    requests: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(
            {"path": self.path, "auth": self.headers.get("Authorization"), "body": body}
        )
        status, payload = self.answer(body)
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """The HTTP status and JSON reply to one chat-completions request."""
        raise NotImplementedError

    def log_message(self, format: str, *args: Any) -> None:
        pass


def tool_call_reply(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A chat-completions reply whose assistant message makes one tool call."""
    call = {"name": name, "arguments": json.dumps(arguments)}
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": call}],
    }
    return {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}


@contextlib.contextmanager
def serve_model(handler: type[ModelHandler]) -> Iterator[str]:
    """Serve ``handler`` on a loopback port (its ``requests`` emptied first); yields the base URL."""
    handler.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def text_reply(text: str) -> dict[str, Any]:
    """A chat-completions reply whose assistant message is plain text (no tool call)."""
    return {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]
    }


class ReferenceModel(ModelHandler):
    """A fake model that knows the tasks: it replays a task's reference solution, one step per
    request (the task is found by its prompt, the first user message), then stops.

    Subclass it with :func:`reference_model`. Episode requests (those offering tools) of a task in
    ``give_up`` get a text reply at once (graded, failed); of a task in ``failing``, a 500 (the
    episode errors). While ``gate`` is clear, episode requests wait for it (at most 120 s), which
    holds a run in the middle; the one-token probe before a run is never held, nor are the
    episodes of a task in ``ungated``. With ``admitted`` set, an episode's first request takes one
    of its permits, and once they are gone waits for ``released`` (at most 120 s): a run can then
    finish no more episodes than the permits, however fast its episodes are.
    """

    steps: ClassVar[dict[str, list[dict[str, Any]]]] = {}
    give_up: ClassVar[set[str]] = set()
    failing: ClassVar[set[str]] = set()
    ungated: ClassVar[set[str]] = set()
    gate: ClassVar[threading.Event] = threading.Event()
    admitted: ClassVar[threading.Semaphore | None] = None
    released: ClassVar[threading.Event] = threading.Event()

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if not body.get("tools"):
            return 200, text_reply("OK")
        messages = body["messages"]
        prompt = next(str(m["content"]) for m in messages if m["role"] == "user")
        turn = sum(1 for m in messages if m["role"] == "assistant")
        admitted = type(self).admitted
        if turn == 0 and admitted is not None and not admitted.acquire(blocking=False):
            type(self).released.wait(timeout=120)
        if prompt not in type(self).ungated:
            type(self).gate.wait(timeout=120)
        if prompt in type(self).failing:
            return 500, {"error": {"message": "the fake model is down for this task"}}
        steps = [] if prompt in type(self).give_up else type(self).steps.get(prompt, [])
        if turn >= len(steps):
            return 200, text_reply("I am done.")
        step = steps[turn]
        return 200, tool_call_reply(f"call_{turn}", str(step["tool"]), dict(step.get("params") or {}))


def reference_model(
    tasks: Iterable[Any],
    *,
    give_up: Iterable[str] = (),
    failing: Iterable[str] = (),
    ungated: Iterable[str] = (),
) -> type[ReferenceModel]:
    """A :class:`ReferenceModel` for ``tasks`` (``fleet_sdk.tasks.Task``), its gate open.

    Args:
        tasks: The tasks it may be asked about.
        give_up: Task keys it answers without acting.
        failing: Task keys it answers with a 500.
        ungated: Task keys whose episodes the gate never holds.
    """
    chosen = list(tasks)
    by_key = {t.task_key: t.prompt for t in chosen}
    gate = threading.Event()
    gate.set()
    return type(
        "Reference",
        (ReferenceModel,),
        {
            "steps": {t.prompt: list(t.metadata.get("reference_solution") or []) for t in chosen},
            "give_up": {by_key[k] for k in give_up},
            "failing": {by_key[k] for k in failing},
            "ungated": {by_key[k] for k in ungated},
            "gate": gate,
            "requests": [],
        },
    )
