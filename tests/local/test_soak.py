"""A short soak: a few hundred trainer-shaped episodes (``benchmarks/bench_soak.py``'s load), then
nothing may be left on the server once the leaked instances' TTL has passed."""

from __future__ import annotations

import httpx
from _waits import wait_until_async

from benchmarks.bench_soak import DEFAULT_MIX, Tally, drive, parse_metrics, tool_use_tasks, total
from fleet_local import LocalFleet

EPISODES = 150
LEAK_TTL = 5


async def test_after_a_short_soak_nothing_is_left_once_the_ttl_passed() -> None:
    async with LocalFleet(s3=False, reaper_interval=0.5) as local:
        fleet = local.async_fleet()
        metrics = httpx.AsyncClient(
            base_url=local.base_url, headers={"Authorization": f"Bearer {local.api_key}"}, timeout=30
        )

        async def scrape() -> dict[str, float]:
            response = await metrics.get("/metrics")
            response.raise_for_status()
            return parse_metrics(response.text)

        try:
            tasks = await tool_use_tasks(fleet)
            tally = Tally()
            await drive(
                fleet,
                tasks,
                concurrency=8,
                mix=DEFAULT_MIX.split(","),
                ttl=LEAK_TTL,
                tally=tally,
                until=lambda: tally.total + tally.errors >= EPISODES,
            )
            assert tally.errors == 0, tally.last_error
            assert tally.wrong_rewards == 0
            assert all(tally.episodes[kind] >= EPISODES // 8 for kind in tally.episodes), tally.episodes
            page = await scrape()
            assert total(page, "fleet_local_instances_ended_total") < total(
                page, "fleet_local_instances_created_total"
            )  # the leaked ones are still live

            async def nothing_left() -> dict[str, float] | None:
                page = await scrape()
                live = (
                    "fleet_local_instances_live",
                    "fleet_local_mcp_sessions",
                    "fleet_local_browser_leases_live",
                    "fleet_local_verifier_runs_running",
                    "fleet_local_verifier_runs_queued",
                )
                return page if not any(total(page, name) for name in live) else None

            page = await wait_until_async(
                nothing_left, "no instance, MCP session, lease or verifier run left"
            )
            assert total(page, "fleet_local_instances_ended_total") == total(
                page, "fleet_local_instances_created_total"
            )
            assert (
                total(page, 'fleet_local_instances_ended_total{reason="expired"}') >= tally.episodes["leaked"]
            )
            assert await fleet.api.control_plane.list_instances(status="running") == []
            assert list((local.data_dir / "instances").iterdir()) == []  # no instance's files either
        finally:
            await metrics.aclose()
            await fleet.close()
