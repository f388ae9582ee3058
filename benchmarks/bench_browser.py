"""Browser leases on the local server: start-up time, screenshot latency (action to PNG) and
memory per live lease.

Start-up is a lease's first ``computer`` call, from the create to its PNG: Chromium's start (and
its confinement), the Playwright attach and one screenshot; each lease is deleted before the next.
Latency is measured over MCP, as an agent sees it, and printed as a ratio to a plain tool call on
the instance's own MCP endpoint measured in the same rounds (A/B/A/B). Memory is the proportional
set size (PSS, so shared pages are not counted twice) of every process in the leases' Chromium
process groups, divided by the number of live leases.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from pathlib import Path

from fleet_local import LocalFleet
from fleet_sdk import AsyncFleet
from fleet_sdk.mcp import MCPClient
from fleet_sdk.types import browser_lease as bm


def pss_kib(data_dir: Path) -> tuple[int, int]:
    """(total PSS in KiB, process count) of the Chromium process groups this server started."""
    groups: set[int] = set()
    procs = [p for p in Path("/proc").iterdir() if p.name.isdigit()]
    for proc in procs:
        try:
            cmdline = (proc / "cmdline").read_bytes()
            if str(data_dir).encode() in cmdline and b"chromium" in cmdline:
                groups.add(os.getpgid(int(proc.name)))
        except (OSError, ProcessLookupError):
            continue
    total = count = 0
    for proc in procs:
        try:
            if os.getpgid(int(proc.name)) not in groups:
                continue
            for line in (proc / "smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
                    count += 1
        except (OSError, ProcessLookupError):
            continue
    return total, count


async def timed(client: MCPClient, name: str, args: dict[str, object]) -> float:
    started = time.perf_counter()
    value = await client.call_tool(name, args)
    elapsed = time.perf_counter() - started
    assert not (isinstance(value, dict) and "error" in value), value
    return elapsed


async def startup(fleet: AsyncFleet, starts: int) -> None:
    """Time ``starts`` cold starts: create a lease, take its first screenshot, delete it."""
    times = []
    for _ in range(starts + 1):  # the first also starts the Playwright driver: not counted
        started = time.perf_counter()
        lease = await fleet.api.browser.create_browser_lease(bm.BrowserLeaseRequest(ttl_seconds=300))
        client = MCPClient([lease.mcp_url or ""])
        try:
            await timed(client, "computer", {"action": "screenshot"})
            times.append(time.perf_counter() - started)
        finally:
            await client.aclose()
            await fleet.api.browser.delete_browser_lease(lease.lease_id)
    counted = sorted(times[1:])
    p90 = counted[min(len(counted) - 1, int(len(counted) * 0.9))]
    median = statistics.median(counted)
    print(
        f"start-up (create to first PNG), {starts} starts: median {median * 1000:6.0f} ms, "
        f"p90 {p90 * 1000:6.0f} ms, min {counted[0] * 1000:6.0f} ms"
    )


async def main(rounds: int, levels: list[int], starts: int) -> None:
    async with LocalFleet() as local:
        fleet: AsyncFleet = local.async_fleet()
        if starts:
            await startup(fleet, starts)
        env = await fleet.make("orderdesk")
        page = f"{env.instance.urls.app[0]}orders"
        tool = (env.mcp, "get_order", {"order_id": 1013})
        try:
            for level in levels:
                leases = [
                    await fleet.api.browser.create_browser_lease(bm.BrowserLeaseRequest(ttl_seconds=300))
                    for _ in range(level)
                ]
                clients = [MCPClient([lease.mcp_url or ""]) for lease in leases]
                await asyncio.gather(
                    *(c.call_tool("computer", {"action": "navigate", "url": page}) for c in clients)
                )
                await timed(*tool)  # warm up
                shots, clicks, calls = [], [], []
                for _ in range(rounds):  # A/B/A/B: one lease's actions, then the plain tool call
                    shots.append(await timed(clients[0], "computer", {"action": "screenshot"}))
                    calls.append(await timed(*tool))
                    clicks.append(
                        await timed(clients[0], "computer", {"action": "left_click", "x": 700, "y": 20})
                    )
                    calls.append(await timed(*tool))
                pss, procs = pss_kib(local.data_dir)
                base = statistics.median(calls)
                shot, click = statistics.median(shots), statistics.median(clicks)
                print(
                    f"{level} live lease(s): screenshot {shot * 1000:6.1f} ms "
                    f"({shot / base:4.1f}x a tool call), left_click+PNG {click * 1000:6.1f} ms "
                    f"({click / base:4.1f}x); tool call {base * 1000:5.1f} ms; "
                    f"memory {pss / 1024 / level:6.1f} MiB PSS per lease ({procs} processes)"
                )
                for client, lease in zip(clients, leases, strict=True):
                    await client.aclose()
                    await fleet.api.browser.delete_browser_lease(lease.lease_id)
        finally:
            await env.close()
            await fleet.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--leases", default="1,2,4", help="live leases per measurement, comma-separated")
    parser.add_argument("--starts", type=int, default=10, help="cold starts to time (0: none)")
    args = parser.parse_args()
    levels = [int(x) for x in args.leases.split(",") if x]
    asyncio.run(main(args.rounds, levels, args.starts))
