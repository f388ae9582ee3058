"""Tool calls through the SDK against the raw ``mcp`` client, and client memory per env.

Two measurements, each interleaved (A/B/C/D blocks repeated in one run) and printed as ratios:

- ``latency``: ``AsyncEnv.call_tool`` vs a raw ``mcp.ClientSession`` kept open vs a new
  ``mcp`` session per call vs an ``mcp.ClientSession`` kept open over our own transport on
  the fleet's shared ``httpx`` pool (``_pool_transport.py``), on one local instance (median
  and p95 per call, and the client's CPU per call).
- ``rss``: client RSS growth for 256 envs with an open MCP session each vs 256 raw
  ``mcp`` sessions on one shared HTTP client vs 256 ``mcp.ClientSession`` over our
  transport on one shared ``httpx`` pool; each side runs in a fresh subprocess,
  alternating, so one side's garbage never counts against another.

``python benchmarks/bench_mcp.py [--rounds 6] [--block 25] [--envs 256]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from _pool_transport import pool_transport
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from fleet_local import LocalFleet
from fleet_sdk import AsyncFleet
from fleet_sdk._runtime._pool import async_pool_client

TOOL, ARGS = "get_order", {"order_id": 1012}


@asynccontextmanager
async def raw_session(url: str, http: Any = None) -> AsyncIterator[ClientSession]:
    """A raw ``mcp`` client session (1.x yields 3 streams, 2.x yields 2)."""
    kwargs = {"http_client": http} if http is not None else {}
    async with streamable_http_client(url, **kwargs) as streams, ClientSession(streams[0], streams[1]) as s:
        await s.initialize()
        yield s


@asynccontextmanager
async def pool_session(url: str, http: Any) -> AsyncIterator[ClientSession]:
    """An ``mcp`` client session over our transport on a shared ``httpx.AsyncClient``."""
    async with pool_transport(url, http) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        yield s


def shared_raw_client() -> Any:
    """The HTTP client type the installed ``mcp`` transport takes (httpx for 1.x, httpx2 for 2.x)."""
    import mcp.client.streamable_http as transport

    http: Any = getattr(transport, "httpx2", None) or getattr(transport, "httpx")  # noqa: B009
    # Unbounded: each raw session may hold a standalone GET stream on the shared client.
    limits = http.Limits(max_connections=None, max_keepalive_connections=None)
    return http.AsyncClient(limits=limits, timeout=http.Timeout(30, read=300))


async def timed(call: Callable[[], Awaitable[Any]], n: int) -> list[float]:
    out = []
    for _ in range(n):
        started = time.perf_counter()
        await call()
        out.append(time.perf_counter() - started)
    return out


def p95(xs: list[float]) -> float:
    return sorted(xs)[int(0.95 * (len(xs) - 1))]


async def latency(rounds: int, block: int) -> None:
    with LocalFleet(s3=False) as local:
        # The pool a fleet makes for itself, passed in so the pool-transport arm can share it.
        http = async_pool_client()
        fleet = local.async_fleet(http_client=http)
        env = await fleet.make("orderdesk")
        url = env.mcp.endpoints[0]
        await env.list_tools()
        async with raw_session(url) as raw, pool_session(url, http) as pooled:

            async def per_call() -> None:
                async with raw_session(url) as session:
                    await session.call_tool(TOOL, ARGS)

            paths: dict[str, Callable[[], Awaitable[Any]]] = {
                "AsyncEnv.call_tool": lambda: env.call_tool(TOOL, ARGS),
                "raw ClientSession kept open": lambda: raw.call_tool(TOOL, ARGS),
                "new mcp session per call": per_call,
                "ClientSession, pool transport": lambda: pooled.call_tool(TOOL, ARGS),
            }
            samples: dict[str, list[float]] = {name: [] for name in paths}
            cpu = dict.fromkeys(paths, 0.0)  # the server is a child process: this is client CPU
            for call in paths.values():  # warm up
                await timed(call, 5)
            names = list(paths)
            for r in range(rounds):
                # Rotate which arm follows which: session-per-call leaves the server busy
                # tearing sessions down, which would always tax the same next arm.
                for name in names[r % len(names) :] + names[: r % len(names)]:
                    call = paths[name]
                    started = time.process_time()
                    samples[name] += await timed(call, block)
                    cpu[name] += time.process_time() - started
        await env.close()
        await fleet.close()
        await http.aclose()
    sdk = statistics.median(samples["AsyncEnv.call_tool"])
    pool = statistics.median(samples["ClientSession, pool transport"])
    print(f"call_tool latency, {rounds} interleaved rounds of {block} calls per path:")
    for name, xs in samples.items():
        med = statistics.median(xs)
        print(
            f"  {name:30s} median {med * 1e3:6.2f} ms  p95 {p95(xs) * 1e3:6.2f} ms"
            f"  client CPU {cpu[name] / len(xs) * 1e3:5.2f} ms/call"
            f"  SDK/this = {sdk / med:5.2f}x  pool transport/this = {pool / med:5.2f}x"
        )


def rss_kb() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


async def rss_child(side: str, base_url: str, api_key: str, instance_id: str, n: int) -> None:
    """Open ``n`` sessions on one instance and print the RSS growth in KB (run in a subprocess)."""
    fleet = AsyncFleet(api_key, base_url=base_url, platform_url=base_url, browser_url=base_url)
    env = await fleet.instance(instance_id)
    url = env.mcp.endpoints[0]
    async with AsyncExitStack() as stack:
        shared = {"raw": shared_raw_client, "pool": async_pool_client}.get(side)
        http = await stack.enter_async_context(shared()) if shared is not None else None
        open_session = raw_session if side == "raw" else pool_session
        # One warm session first, so imports and first-use caches are in the baseline.
        if side == "sdk":
            await env.call_tool(TOOL, ARGS)
        else:
            warm = await stack.enter_async_context(open_session(url, http))
            await warm.call_tool(TOOL, ARGS)
        before = rss_kb()
        holders: list[Any] = []
        for _ in range(n):
            if side == "sdk":
                other = await fleet.instance(instance_id)
                await other.call_tool(TOOL, ARGS)
                holders.append(other)
            else:
                session = await stack.enter_async_context(open_session(url, http))
                await session.call_tool(TOOL, ARGS)
                holders.append(session)
        grown = rss_kb() - before
        for other in holders if side == "sdk" else []:
            await other.mcp.aclose()
    print(json.dumps({"side": side, "kb": grown}))
    await fleet.close()


def rss(envs: int, rounds: int) -> None:
    with LocalFleet(s3=False) as local, local.fleet() as fleet:
        from fleet_sdk.types import env_instance as models

        instance = fleet.api.control_plane.create_instance(models.InstanceRequest(env_key="orderdesk"))
        growth: dict[str, list[int]] = {"sdk": [], "raw": [], "pool": []}
        for _ in range(rounds):
            for side, sizes in growth.items():
                argv = [sys.executable, __file__, "--rss-child", side, local.base_url, local.api_key]
                argv += [instance.instance_id, str(envs)]
                out = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True).stdout
                sizes.append(json.loads(out.strip().splitlines()[-1])["kb"])
        fleet.api.control_plane.delete_instance(instance.instance_id)
    sdk, raw = statistics.median(growth["sdk"]), statistics.median(growth["raw"])
    pool = statistics.median(growth["pool"])
    print(f"client RSS growth for {envs} open sessions, {rounds} alternating subprocess runs each:")
    print(f"  SDK envs (one shared pool):              {sdk / 1024:6.1f} MB  {growth['sdk']}")
    print(f"  raw mcp sessions, one shared client:      {raw / 1024:6.1f} MB  {growth['raw']}")
    print(f"  ClientSession, pool transport, one pool:  {pool / 1024:6.1f} MB  {growth['pool']}")
    print(f"  SDK/raw = {sdk / raw:5.2f}x  SDK/pool transport = {sdk / pool:5.2f}x")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--rss-child":
        side, base_url, api_key, instance_id, n = sys.argv[2:7]
        asyncio.run(rss_child(side, base_url, api_key, instance_id, int(n)))
        sys.exit(0)
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--block", type=int, default=25)
    parser.add_argument("--envs", type=int, default=256)
    parser.add_argument("--rss-rounds", type=int, default=2)
    parser.add_argument("--only", choices=["latency", "rss"], default=None)
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        if args.only in (None, "latency"):
            asyncio.run(latency(args.rounds, args.block))
        if args.only in (None, "rss"):
            rss(args.envs, args.rss_rounds)
