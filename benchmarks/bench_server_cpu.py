"""Where the local server's CPU goes in a scripted episode, phase by phase.

One scripted ``TaskEnv`` episode is recorded once (every request the SDK sends, with its body),
then replayed phase by phase with a bare ``httpx`` client, one episode at a time, against a
server in its own process: the server's CPU time (``utime + stime`` of the server and of the
children it waited for, from ``/proc``; the jailed verifier's own interpreter is not among them,
see below) is read
before and after each phase of a block of episodes and divided by the episodes. CPU time is
far less disturbed by a busy machine than wall time. The phases, in an episode's order:

- ``create``: ``POST /v1/env/instances`` (seed copy, action log, the stored document);
- ``mcp open``: every ``initialize`` and ``notifications/initialized`` the SDK sends;
- ``tools/list``: every ``tools/list``;
- ``tool calls``: the task's reference solution, one ``tools/call`` each;
- ``verify``: ``POST /v1/verifiers/execute`` with the bundle (up to the jailed interpreter);
- ``mcp close``: every session's ``DELETE``;
- ``delete``: ``DELETE /v1/env/instances/{id}``;

and ``request floor``: the server's CPU per request of its cheapest keyed route (HTTP parsing,
the middleware stack and routing; ``GET /v1/regions`` one at a time on one connection);
``idle``: the server's own CPU over as long a wall time with nothing sent (timers, the
reaper), per episode of the block; and ``jailed verifier``: the CPU of the jailed interpreters
themselves. bubblewrap's inner process outlives the ``bwrap`` the server waits for, so that CPU
reaches no ancestor's ``cutime`` (nor ``bench_episodes.py``'s server figure); this benchmark
makes itself their subreaper (``PR_SET_CHILD_SUBREAPER``) and counts them as it reaps them.
The server's phases and idle time are compared with whole ``TaskEnv`` episodes
measured in the same rounds (the SDK client's own share runs in this process and is not
counted).

``--baseline DIR`` (``git archive <rev> | tar -x -C DIR``) runs the same phases against a
server of that checkout, in alternating rounds, and prints each phase's ratio this/baseline.

``python benchmarks/bench_server_cpu.py [--episodes 48] [--rounds 4] [--baseline DIR]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from fleet_local import LocalFleet
from fleet_sdk import AsyncFleet

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _side import Side
from bench_episodes import (
    adopt_orphans,
    episode,
    orphans_cpu,
    process_cpu,
    reap_orphans,
    tool_use_tasks,
    zygote_cpu,
)

PHASES = ("create", "mcp open", "tools/list", "tool calls", "verify", "mcp close", "delete")
SERVER = (*PHASES, "idle")  # what the server process and the children it waits for spend
_INSTANCE = re.compile(r"inst_[0-9a-f]+")


@dataclass
class Recorded:
    """One request of the recorded episode."""

    method: str
    path: str
    body: bytes
    headers: dict[str, str]
    phase: str
    session_path: str | None = None  # which MCP endpoint's session the request belongs to


@dataclass
class Script:
    """The recorded episode, as requests with the instance id left as a placeholder."""

    requests: list[Recorded] = field(default_factory=list)


def _phase(method: str, path: str, body: bytes) -> str:
    if path == "/v1/env/instances":
        return "create"
    if path.startswith("/v1/env/instances/"):
        return "delete"
    if path == "/v1/verifiers/execute":
        return "verify"
    if not path.startswith("/instances/"):
        return "other"  # not part of an episode (the task list): not replayed
    if method == "DELETE":
        return "mcp close"
    message = json.loads(body)
    name = message.get("method")
    return {
        "initialize": "mcp open",
        "notifications/initialized": "mcp open",
        "tools/list": "tools/list",
    }.get(name, "tool calls")


async def record(local: LocalFleet) -> Script:
    """Every request one scripted episode sends, with its body and headers."""
    script = Script()

    async def hook(request: httpx.Request) -> None:
        headers = {
            k: v
            for k, v in request.headers.items()
            if k.lower() in ("authorization", "accept", "content-type", "mcp-protocol-version")
        }
        body = request.content
        script.requests.append(
            Recorded(
                request.method,
                request.url.path,
                body,
                headers,
                _phase(request.method, request.url.path, body),
            )
        )

    async with httpx.AsyncClient(event_hooks={"request": [hook]}, timeout=120) as client:
        fleet = local.async_fleet(http_client=client)
        tasks = await tool_use_tasks(fleet)
        task = next(t for t in tasks if t.task_key == "orderdesk-refund-late-order") if tasks else None
        assert task is not None, "the bundled orderdesk-refund-late-order task is missing"
        script.requests.clear()
        for _ in range(2):  # the second time: after the verifier bundle is known to the server
            script.requests.clear()
            assert await episode(fleet, task) == 1.0
        await fleet.close()
    return script


class Replayer:
    """Replays the recorded episode's requests phase by phase on a server of its own."""

    def __init__(self, local: LocalFleet, script: Script) -> None:
        self.local = local
        self.script = script
        self.client = httpx.AsyncClient(base_url=local.base_url, timeout=120)

    async def _send(self, request: Recorded, instance_id: str, sessions: dict[str, str]) -> httpx.Response:
        path = _INSTANCE.sub(instance_id, request.path)
        body = _INSTANCE.sub(instance_id, request.body.decode()).encode()
        headers = dict(request.headers)
        endpoint = path if path.startswith("/instances/") else None
        if endpoint is not None and endpoint in sessions:
            headers["mcp-session-id"] = sessions[endpoint]
        response = await self.client.request(request.method, path, content=body, headers=headers)
        if response.status_code >= 400:
            raise RuntimeError(f"{request.method} {path}: {response.status_code} {response.text[:300]}")
        if endpoint is not None and "mcp-session-id" in response.headers:
            sessions[endpoint] = response.headers["mcp-session-id"]
        return response

    async def phases(self, episodes: int) -> dict[str, float]:
        """Server CPU ms per episode of each phase, over ``episodes`` sequential episodes."""
        cpu = dict.fromkeys(PHASES, 0.0)
        pid = self.local.pid
        for _ in range(episodes):
            instance_id = ""
            sessions: dict[str, str] = {}
            for phase in PHASES:
                before = process_cpu(pid)
                for request in self.script.requests:
                    if request.phase != phase:
                        continue
                    response = await self._send(request, instance_id or "inst_0", sessions)
                    if phase == "create":
                        instance_id = str(response.json()["instance_id"])
                    if phase == "verify":
                        assert response.json().get("result") == 1.0, response.text[:300]
                cpu[phase] += process_cpu(pid) - before
        return {phase: seconds / episodes * 1e3 for phase, seconds in cpu.items()}

    async def aclose(self) -> None:
        await self.client.aclose()


FLOOR_REQUESTS = 2000  # about 40 of the kernel's 10 ms CPU ticks per block


async def request_floor(local: LocalFleet, client: httpx.AsyncClient) -> float:
    """Server CPU ms per request of the cheapest keyed route (``GET /v1/regions``, sent one at a
    time on one kept-alive connection): HTTP parsing, the middleware stack and routing."""
    headers = {"Authorization": f"Bearer {local.api_key}"}
    before = process_cpu(local.pid)
    for _ in range(FLOOR_REQUESTS):
        response = await client.get("/v1/regions", headers=headers)
        response.raise_for_status()
    return (process_cpu(local.pid) - before) / FLOOR_REQUESTS * 1e3


async def idle_cpu(local: LocalFleet, seconds: float) -> float:
    """The server's CPU seconds over ``seconds`` of wall time with nothing sent."""
    before = process_cpu(local.pid)
    await asyncio.sleep(seconds)
    return process_cpu(local.pid) - before


async def whole(fleet: AsyncFleet, local: LocalFleet, episodes: int) -> float:
    """Server CPU ms per whole scripted ``TaskEnv`` episode, one at a time."""
    tasks = [t for t in await tool_use_tasks(fleet) if t.task_key == "orderdesk-refund-late-order"]
    before = process_cpu(local.pid)
    for _ in range(episodes):
        assert await episode(fleet, tasks[0]) == 1.0
    return (process_cpu(local.pid) - before) / episodes * 1e3


async def side_worker() -> None:
    """One server of this interpreter's checkout; each line ``EPISODES`` on stdin is answered
    with one round's figures as a JSON line."""
    adopting = adopt_orphans()
    async with LocalFleet(s3=False) as local:
        script = await record(local)
        replayer = Replayer(local, script)
        fleet = local.async_fleet()
        await replayer.phases(4)  # warm up
        await whole(fleet, local, 4)
        print("ready", flush=True)
        loop = asyncio.get_running_loop()
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            episodes = int(line)
            reap_orphans(local.pid)
            jailed = orphans_cpu() + zygote_cpu(local.pid)  # a zygote's runs: see bench_episodes.py
            started = time.perf_counter()
            figures = await replayer.phases(episodes)
            wall = time.perf_counter() - started
            await asyncio.sleep(0.5)  # the last run's inner process exits just after its bwrap
            reap_orphans(local.pid)
            jailed = orphans_cpu() + zygote_cpu(local.pid) - jailed
            figures["jailed verifier"] = jailed / episodes * 1e3 if adopting else float("nan")
            figures["idle"] = await idle_cpu(local, min(wall, 5.0)) * (wall / min(wall, 5.0)) / episodes * 1e3
            # Right after the idle window, while nothing else runs in the server.
            figures["request floor"] = await request_floor(local, replayer.client)
            figures["episode"] = await whole(fleet, local, episodes)
            print(json.dumps(figures), flush=True)
        await replayer.aclose()
        await fleet.close()


def report(runs: dict[str, list[dict[str, Any]]]) -> None:
    names = [*PHASES, "idle", "jailed verifier"]
    for side, rs in runs.items():
        print(f"{side}: server CPU ms per episode, median of {len(rs)} rounds")
        total = 0.0
        for name in names:
            value = statistics.median(r[name] for r in rs)
            total += value if name in SERVER else 0.0
            print(f"  {name:15s} {value:6.2f}")
        print(f"  {'sum (server)':15s} {total:6.2f}")
        whole = statistics.median(r["episode"] for r in rs)
        print(f"  {'episode':15s} {whole:6.2f}  (whole TaskEnv episodes: the server and its waited children)")
        floor = statistics.median(r["request floor"] for r in rs)
        print(f"  {'request floor':15s} {floor:6.3f}  (per GET /v1/regions, one at a time)")
    if len(runs) == 2:
        this, base = runs["this"], runs["baseline"]
        print("this / baseline, median of the rounds' ratios (range):")
        for name in [*names, "episode", "request floor"]:
            ratios = [a[name] / b[name] for a, b in zip(this, base, strict=True) if b[name] > 0]
            if ratios:
                print(
                    f"  {name:15s} {statistics.median(ratios):5.2f}x ({min(ratios):4.2f}-{max(ratios):4.2f})"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=48)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--baseline", type=Path, default=None)
    args = parser.parse_args()
    here = Path(__file__).resolve().parent.parent
    sides = {"this": Side(here, "bench_server_cpu")}
    if args.baseline is not None:
        sides["baseline"] = Side(args.baseline.resolve(), "bench_server_cpu")
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
    try:
        for round_ in range(args.rounds):
            order = list(sides.items()) if round_ % 2 == 0 else list(reversed(sides.items()))
            for name, side in order:
                figures = side.run(args.episodes)
                runs[name].append(figures)
                shown = " ".join(f"{k}={v:.2f}" for k, v in figures.items())
                print(f"round {round_ + 1} {name}: {shown}", flush=True)
    finally:
        for side in sides.values():
            side.close()
    report(runs)


if __name__ == "__main__":
    main()
