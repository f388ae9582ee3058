"""Fake OpenAI-compatible ``/chat/completions`` endpoints on loopback, for jobs with model policies."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

__all__ = ["ModelHandler", "serve_model", "tool_call_reply"]


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
