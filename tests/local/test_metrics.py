"""``GET /metrics``: the server's state in the Prometheus text format, read by a real parser.

Every figure is read as a difference between two scrapes of the shared server, so what other
tests left on it does not matter.
"""

from __future__ import annotations

import httpx
import pytest
from _waits import wait_until_async
from prometheus_client.parser import text_string_to_metric_families

from fleet_local import LocalFleet
from fleet_local._metrics import route_group
from fleet_sdk import AsyncFleet

Scrape = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: str) -> Scrape:
    """Every sample of a page, by name and sorted labels."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def scrape(local: LocalFleet) -> Scrape:
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.get(
            f"{local.base_url}/metrics", headers={"Authorization": f"Bearer {local.api_key}"}
        )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return parse(response.text)


def value(page: Scrape, name: str, **labels: str) -> float:
    return page.get((name, tuple(sorted(labels.items()))), 0.0)


async def test_metrics_need_the_key(local: LocalFleet) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        refused = await http.get(f"{local.base_url}/metrics")
        wrong = await http.get(f"{local.base_url}/metrics", headers={"Authorization": "Bearer nope"})
    assert refused.status_code == 401
    assert wrong.status_code == 401


async def test_the_process_figures_are_there(local: LocalFleet) -> None:
    page = await scrape(local)
    assert value(page, "process_resident_memory_bytes") > 10 * 2**20
    assert value(page, "process_open_fds") > 0
    assert value(page, "fleet_local_process_threads") >= 1
    assert ("fleet_local_verifier_runs_queued", ()) in page
    assert ("fleet_local_browser_leases_live", ()) in page


async def test_figures_move_with_an_instance_its_mcp_session_and_a_verifier_run(
    local: LocalFleet, afleet: AsyncFleet
) -> None:
    before = await scrape(local)
    env = await afleet.make("orderdesk")
    try:
        await env.mcp.call_tool("list_orders", {})
        made = await scrape(local)
        assert value(made, "fleet_local_instances_live") == value(before, "fleet_local_instances_live") + 1
        assert value(made, "fleet_local_instances_created_total") == (
            value(before, "fleet_local_instances_created_total") + 1
        )
        # The SDK opens a session on each of the instance's two MCP endpoints it uses.
        mcp = value(made, "fleet_local_mcp_sessions", endpoint="instance")
        assert mcp > value(before, "fleet_local_mcp_sessions", endpoint="instance")
        control = ("fleet_local_request_duration_seconds_count", (("group", "control"), ("status", "2xx")))
        assert made[control] > before.get(control, 0.0)
        calls = ("fleet_local_request_duration_seconds_count", (("group", "mcp"), ("status", "2xx")))
        assert made[calls] > before.get(calls, 0.0)

        # Code of its own: verifier ids are content-addressed, and the server is shared.
        verify = f"def verify(env, final_answer=None):\n    return 1.0  # {env.instance_id}\n"
        from fleet_sdk.remote_verifier import run_remote

        outcome = await run_remote(afleet, verify, key="metrics-check", instance_id=env.instance_id)
        assert outcome.score == 1.0
        graded = await scrape(local)
        assert value(graded, "fleet_local_verifier_runs_finished_total", outcome="passed") == (
            value(before, "fleet_local_verifier_runs_finished_total", outcome="passed") + 1
        )
        assert value(graded, "fleet_local_verifier_runs_running") == 0
    finally:
        await env.close()
    closed = await scrape(local)
    assert value(closed, "fleet_local_instances_live") == value(before, "fleet_local_instances_live")
    assert value(closed, "fleet_local_instances_ended_total", reason="deleted") == (
        value(before, "fleet_local_instances_ended_total", reason="deleted") + 1
    )
    assert value(closed, "fleet_local_mcp_sessions", endpoint="instance") == value(
        before, "fleet_local_mcp_sessions", endpoint="instance"
    )


async def test_an_instances_mcp_sessions_end_with_it(local: LocalFleet, afleet: AsyncFleet) -> None:
    """An MCP session whose client never sent its ``DELETE`` outlived its instance: the server
    kept it (its task, streams and buffers) until the 30-minute idle timeout, so a trainer that
    leaves its instances to the TTL grew the server's memory by a session per episode."""
    before = value(await scrape(local), "fleet_local_mcp_sessions", endpoint="instance")
    env = await afleet.make("orderdesk")
    await env.mcp.call_tool("list_orders", {})
    assert value(await scrape(local), "fleet_local_mcp_sessions", endpoint="instance") > before
    # The instance ends under the session (as the TTL reaper ends it): no MCP DELETE is sent.
    await afleet.api.control_plane.delete_instance(env.instance_id)

    async def ended() -> bool:
        return value(await scrape(local), "fleet_local_mcp_sessions", endpoint="instance") == before

    await wait_until_async(ended, "the instance's MCP session ended with it")
    await env.close()


async def test_an_ingested_session_counts_as_finished(local: LocalFleet, afleet: AsyncFleet) -> None:
    from fleet_sdk.types import sessions_ingest as smodels

    before = value(await scrape(local), "fleet_local_sessions_finished_total", source="ingest")
    await afleet.api.sessions.ingest_session(
        smodels.SessionIngestRequest(
            messages=[smodels.SessionIngestMessage(role="user", content="hi")], model="m", status="running"
        )
    )
    assert value(await scrape(local), "fleet_local_sessions_finished_total", source="ingest") == before
    done = await afleet.api.sessions.ingest_session(
        smodels.SessionIngestRequest(
            messages=[smodels.SessionIngestMessage(role="user", content="hi")], model="m", status="completed"
        )
    )
    assert done.success
    assert value(await scrape(local), "fleet_local_sessions_finished_total", source="ingest") == before + 1


@pytest.mark.parametrize(
    ("path", "group"),
    [
        ("/v1/env/instances", "control"),
        ("/v1/tasks/x", "control"),
        ("/v1/verifiers/execute", "control"),
        ("/instances/inst_1/mcp", "mcp"),
        ("/instances/inst_1/api/v1/mcp/", "mcp"),
        ("/instances/inst_1/api/v1/env/reset", "manager"),
        ("/v1/sessions/ingest", "sessions"),
        ("/v1/traces/logs", "sessions"),
        ("/v1/jobs", "jobs"),
        ("/v1/browser/lease_1", "leases"),
        ("/v1/evaluation_reports", "reports"),
        ("/metrics", "metrics"),
        ("/", "other"),
    ],
)
def test_route_groups(path: str, group: str) -> None:
    assert route_group(path) == group
