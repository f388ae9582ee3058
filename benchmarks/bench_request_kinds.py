"""The local server's own CPU per request, by kind of request, to nanoseconds.

``bench_server_cpu.py`` and ``bench_episodes.py`` read the server's CPU from ``/proc/<pid>/stat``,
which counts in 10 ms clock ticks; a change of a tenth of a millisecond per request is lost in
them on a busy machine. This benchmark sums the scheduler's own run time of every live thread
of the server (``/proc/<pid>/task/*/schedstat``, nanoseconds) over blocks of one kind of
request, each sent one at a time with a bare ``httpx`` client, as the SDK sends it in a scripted
episode (recorded once, as ``bench_server_cpu.py`` records it):

- ``regions``: ``GET /v1/regions``, the floor of a keyed route (uvicorn, the middleware, routing);
- ``tools/call``: one tool call of an open MCP session (the endpoint's short path);
- ``mcp session``: a session's ``initialize``, ``notifications/initialized`` and ``DELETE``;
- ``create+delete``: an instance made and deleted (a pair, per pair);
- ``verify``: ``POST /v1/verifiers/execute`` of the episode's verifier on a live instance.

A thread that ends inside a block is not counted (asyncio's watcher thread of each verifier
run among them), nor is any child process (``bwrap``, the jailed interpreter): ``verify`` is the
server's own part of a run. Linux only.

``--baseline DIR`` (``git archive <rev> | tar -x -C DIR``) runs the same blocks against a server
of that checkout, the sides alternating round by round, and prints each kind's median ratio
this/baseline with its quartiles and range.

``python benchmarks/bench_request_kinds.py [--requests 600] [--rounds 4] [--baseline DIR]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

from fleet_local import LocalFleet

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _side import alternate, spread
from bench_server_cpu import _INSTANCE, Recorded, record

KINDS = ("regions", "tools/call", "mcp session", "create+delete", "verify")
SHARE = {"regions": 1, "tools/call": 2, "mcp session": 8, "create+delete": 8, "verify": 16}
"""One block of each kind sends ``--requests`` divided by this (slower kinds, fewer)."""


def threads_cpu(pid: int) -> float:
    """CPU seconds of the live threads of process ``pid`` (nanosecond resolution)."""
    total = 0
    for thread in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{thread}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):  # ended meanwhile
            pass
    return total / 1e9


class Kinds:
    """The recorded episode's requests, sent kind by kind against one server."""

    def __init__(self, local: LocalFleet, requests: list[Recorded]) -> None:
        self.local = local
        self.http = httpx.AsyncClient(base_url=local.base_url, timeout=120)
        by_phase = {r.phase: r for r in reversed(requests)}  # the first of each phase
        self.create, self.delete = by_phase["create"], by_phase["delete"]
        self.verifier, self.close = by_phase["verify"], by_phase["mcp close"]
        self.opens = [r for r in requests if r.phase == "mcp open"]
        self.calls = [r for r in requests if r.phase == "tool calls"]
        self.instance = ""
        self.session: str | None = None

    async def send(self, request: Recorded, instance: str, session: str | None = None) -> httpx.Response:
        headers = dict(request.headers)
        if session is not None:
            headers["mcp-session-id"] = session
        response = await self.http.request(
            request.method,
            _INSTANCE.sub(instance, request.path),
            content=_INSTANCE.sub(instance, request.body.decode()).encode(),
            headers=headers,
        )
        if response.status_code >= 400:
            answer = f"{response.status_code} {response.text[:300]}"
            raise RuntimeError(f"{request.method} {request.path}: {answer}")
        return response

    async def open_session(self) -> str:
        session = (await self.send(self.opens[0], self.instance)).headers["mcp-session-id"]
        for request in self.opens[1:]:
            await self.send(request, self.instance, session)
        return str(session)

    async def start(self) -> None:
        """An instance with an open session, its tools called once (the verifier then passes)."""
        self.instance = str((await self.send(self.create, "inst_0")).json()["instance_id"])
        self.session = await self.open_session()
        for request in self.calls:
            await self.send(request, self.instance, self.session)

    async def regions(self) -> None:
        headers = {"authorization": self.create.headers["authorization"]}
        (await self.http.get("/v1/regions", headers=headers)).raise_for_status()

    async def tool_call(self) -> None:
        await self.send(self.calls[0], self.instance, self.session)

    async def mcp_session(self) -> None:
        await self.send(self.close, self.instance, await self.open_session())

    async def create_delete(self) -> None:
        instance = str((await self.send(self.create, "inst_0")).json()["instance_id"])
        await self.send(self.delete, instance)

    async def verify(self) -> None:
        assert (await self.send(self.verifier, self.instance)).json().get("result") == 1.0

    async def block(self, kind: str, count: int) -> float:
        """Server CPU ms per request of ``kind`` over ``count`` of them."""
        send: Callable[[], Awaitable[None]] = {
            "regions": self.regions,
            "tools/call": self.tool_call,
            "mcp session": self.mcp_session,
            "create+delete": self.create_delete,
            "verify": self.verify,
        }[kind]
        pid = self.local.pid
        assert pid is not None
        before = threads_cpu(pid)
        for _ in range(count):
            await send()
        return (threads_cpu(pid) - before) / count * 1e3


async def side_worker() -> None:
    """One server of this interpreter's checkout; each line ``REQUESTS`` on stdin is answered
    with one round's figures (ms per request of each kind) as a JSON line."""
    async with LocalFleet(s3=False) as local:
        kinds = Kinds(local, (await record(local)).requests)
        await kinds.start()
        for kind in KINDS:  # warm up
            await kinds.block(kind, 4)
        print("ready", flush=True)
        loop = asyncio.get_running_loop()
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            requests = int(line)
            figures = {kind: await kinds.block(kind, max(4, requests // SHARE[kind])) for kind in KINDS}
            print(json.dumps(figures), flush=True)
        await kinds.http.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--baseline", type=Path, default=None)
    args = parser.parse_args()
    runs = alternate("bench_request_kinds", args.baseline, args.rounds, args.requests)
    print("server CPU ms per request, median of the rounds" + (" (this / baseline)" if len(runs) > 1 else ""))
    for kind in KINDS:
        line = "  ".join(f"{name} {statistics.median(r[kind] for r in rs):6.3f}" for name, rs in runs.items())
        if len(runs) > 1:
            ratios = [a[kind] / b[kind] for a, b in zip(runs["this"], runs["baseline"], strict=True)]
            line += f"  {spread(ratios)})"
        print(f"  {kind:14s} {line}")


if __name__ == "__main__":
    main()
