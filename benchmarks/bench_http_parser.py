"""The server's CPU per request of uvicorn's HTTP layer alone: h11, httptools, and uvloop.

Each variant is a uvicorn server in its own process, configured as the local server configures
its own (``fleet_local._server``: keep-alive 75 s, no access log; httptools with the server's
bound on a request's head) and serving a bare ASGI app that answers at once, so what is measured
is the parser, uvicorn's protocol and the event loop. A client in this process sends requests
one at a time on one kept-alive connection, shaped as an episode's: an MCP ``tools/call`` (a
POST with a JSON body of about 300 bytes and five headers, answered with about 600 bytes of JSON).
The server's CPU time (``/proc``, ``utime + stime``) per request is read around each block;
the variants run in alternating order, round after round, and each is printed with its median
and its ratio to h11 per round (median and range).

A variant whose package is not installed (``httptools``, ``uvloop``) is left out. Run it with
an interpreter that has them, e.g. a venv of its own: installing them into a shared one changes
every server started from it (uvicorn's ``"auto"`` picks them up).

``python benchmarks/bench_http_parser.py [--requests 2000] [--rounds 6]``
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

import httpx

VARIANTS = {  # name: (uvicorn's http, its loop)
    "h11": ("h11", "asyncio"),
    "httptools": ("bounded-httptools", "asyncio"),
    "httptools+uvloop": ("bounded-httptools", "uvloop"),
}
BODY = (
    json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {"name": "refund_order", "arguments": {"order_id": "ord_1042", "reason": "late"}},
        }
    ).encode()
    + b" " * 160
)
HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2025-06-18",
    "mcp-session-id": "4f1c2a9b8e7d6c5b4a39281706f5e4d3",
}
ANSWER = json.dumps({"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "x" * 500}]}})

SERVER = """
import socket, sys
import uvicorn

answer = sys.argv[3].encode()

async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": [
        (b"content-type", b"application/json"), (b"content-length", str(len(answer)).encode())]})
    await send({"type": "http.response.body", "body": answer})

http, loop = sys.argv[1], sys.argv[2]
if http == "bounded-httptools":
    from fleet_local._httptools_protocol import BoundedHttpToolsProtocol as http
sock = socket.socket()
# As the local server's own socket (fleet_local._claim): asyncio sets TCP_NODELAY only on the
# sockets it creates, and without it a response's body waits for the ACK of its head (40 ms).
sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
sock.bind(("127.0.0.1", 0))
sock.listen(64)
print(sock.getsockname()[1], flush=True)
config = uvicorn.Config(app, http=http, loop=loop, log_level="warning", access_log=False,
                        lifespan="off", timeout_keep_alive=75)
uvicorn.Server(config).run(sockets=[sock])
"""


def process_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Variant:
    def __init__(self, name: str) -> None:
        http, loop = VARIANTS[name]
        self.process = subprocess.Popen(
            [sys.executable, "-c", SERVER, http, loop, ANSWER], stdout=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        port = int(self.process.stdout.readline())
        self.client = httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=HEADERS, timeout=30)
        deadline = time.monotonic() + 30
        while True:
            try:
                self.client.post("/instances/inst_1/mcp", content=BODY).raise_for_status()
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def block(self, requests: int) -> float:
        """Server CPU ms per request over ``requests`` requests."""
        before = process_cpu(self.process.pid)
        for _ in range(requests):
            response = self.client.post("/instances/inst_1/mcp", content=BODY)
            assert response.status_code == 200 and len(response.content) == len(ANSWER)
        return (process_cpu(self.process.pid) - before) / requests * 1e3

    def close(self) -> None:
        self.client.close()
        self.process.terminate()
        self.process.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    names = [
        name
        for name, (http, loop) in VARIANTS.items()
        if (http == "h11" or importlib.util.find_spec("httptools") is not None)
        and (loop == "asyncio" or importlib.util.find_spec("uvloop") is not None)
    ]
    variants = {name: Variant(name) for name in names}
    figures: dict[str, list[float]] = {name: [] for name in names}
    try:
        for round_ in range(args.rounds):
            order = names if round_ % 2 == 0 else list(reversed(names))
            for name in order:
                figures[name].append(variants[name].block(args.requests))
            shown = " ".join(f"{name}={figures[name][-1]:.3f}" for name in names)
            print(f"round {round_ + 1}: server CPU ms per request {shown}", flush=True)
    finally:
        for variant in variants.values():
            variant.close()
    print(f"server CPU ms per request, median of {args.rounds} rounds of {args.requests}; ratio to h11")
    for name in names:
        ratios = [a / b for a, b in zip(figures[name], figures["h11"], strict=True) if b > 0]
        print(
            f"  {name:17s} {statistics.median(figures[name]):6.3f}"
            f"  {statistics.median(ratios):4.2f}x ({min(ratios):4.2f}-{max(ratios):4.2f})"
        )


if __name__ == "__main__":
    main()
