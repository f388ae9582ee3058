"""The resources production instances have beyond ``seed`` and ``current``: the ``action_log``
database and the ``cdp`` browser (``fleet_local._action_log``, ``fleet_local._instance_browser``)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from _procs import alive_in, chromium_groups

from fleet_local import LocalFleet
from fleet_sdk import AsyncFleet, Fleet, InternalServerError, PermissionDeniedError
from fleet_sdk.types import env_instance as models

ENV = "orderdesk"


def action_log(fleet: Fleet, instance: models.InstanceResponse) -> list[dict[str, object]]:
    manager = fleet.api.manager(instance.urls.manager.api)
    sql = "SELECT action_type, sql, args, path, raw_payload FROM action_log ORDER BY id"
    result = manager.query_database("action_log", models.QueryRequest(query=sql))
    assert result.success and result.columns is not None and result.rows is not None
    return [dict(zip(result.columns, row, strict=True)) for row in result.rows]


async def test_the_action_log_records_tool_calls_sql_writes_and_resets(
    fleet: Fleet, afleet: AsyncFleet, instance: models.InstanceResponse
) -> None:
    assert action_log(fleet, instance) == []  # an instance starts with an empty log
    env = await afleet.instance(instance.instance_id)
    await env.mcp.call_tool("get_order", {"order_id": 1012})
    await env.mcp.call_tool("get_order", {"order_id": 999999})  # a tool error is an action too
    manager = fleet.api.manager(instance.urls.manager.api)
    write = "UPDATE orders SET status = ? WHERE id = ?"
    manager.query_database(
        "current", models.QueryRequest(query=write, args=["shipped", 1012], read_only=False)
    )
    manager.query_database("current", models.QueryRequest(query="SELECT count(*) FROM orders"))  # a read: no
    manager.reset_instance(models.ResetRequest(seed=3))
    logged = action_log(fleet, instance)
    assert [(a["action_type"], a["path"]) for a in logged] == [
        ("tool_call", "get_order"),
        ("tool_call", "get_order"),
        ("sql", "/resources/sqlite/current/query"),
        ("reset", "/reset"),
    ]
    assert json.loads(str(logged[0]["args"])) == {"order_id": 1012}
    assert json.loads(str(logged[0]["raw_payload"])) == {"ok": True}
    assert "999999" in json.loads(str(logged[1]["raw_payload"]))["error"]
    assert (logged[2]["sql"], json.loads(str(logged[2]["args"]))) == (write, ["shipped", 1012])
    assert json.loads(str(logged[3]["raw_payload"])) == {"seed": 3}
    described = manager.describe_database("action_log")
    assert [t.name for t in described.tables or []] == ["action_log"]
    with pytest.raises(PermissionDeniedError) as refused:  # only the server writes it
        manager.query_database(
            "action_log", models.QueryRequest(query="DELETE FROM action_log", read_only=False)
        )
    assert refused.value.code == "read_only"
    await env.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalFleet]:
    """A server of its own (its browsers are told apart by its data dir), one instance browser."""
    with LocalFleet(tmp_path_factory.mktemp("instance-browsers"), instance_browsers=1) as local:
        yield local


async def test_the_cdp_resource_is_a_browser_on_the_web_ui_that_dies_with_the_instance(
    server: LocalFleet,
) -> None:
    from playwright.async_api import async_playwright

    with server.fleet() as fleet:
        first = fleet.api.control_plane.create_instance(env_key=ENV)
        second = fleet.api.control_plane.create_instance(env_key=ENV)
        manager = fleet.api.manager(first.urls.manager.api)
        described = manager.describe_browser()
        assert described.cdp_browser_url == f"{server.base_url}/browser/lease_{first.instance_id}/cdp"
        assert chromium_groups(server.data_dir) == set()  # nothing runs before the first use
        assert manager.describe_browser() == described  # the same browser every time

        # One instance browser at a time here: the second instance waits for it (retryable).
        with pytest.raises(InternalServerError) as full:
            fleet.api.manager(second.urls.manager.api).describe_browser()
        assert (full.value.code, full.value.retryable) == ("browser_limit", True)

        key = {"Authorization": f"Bearer {server.api_key}"}
        async with async_playwright() as pw:
            browser = await pw.chromium.connect_over_cdp(described.cdp_browser_url, headers=key)
            page = browser.contexts[0].pages[0]
            assert page.url == first.urls.root  # it opened the instance's web UI
            assert first.instance_id in await page.title()
            await browser.close()
        started = manager.start_browser(resolution="1024,700")
        assert started.success and "1024x700" in started.message
        groups = chromium_groups(server.data_dir)
        assert len(groups) == 1
        assert httpx.get(described.cdp_devtools_url, headers=key, timeout=10).status_code == 200

        fleet.api.control_plane.delete_instance(first.instance_id)
        deadline = time.monotonic() + 30
        while alive_in(groups) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert alive_in(groups) == []
        assert httpx.get(described.cdp_devtools_url, headers=key, timeout=10).status_code == 404
        assert fleet.api.browser.get_browser_lease(f"lease_{first.instance_id}").status == "terminated"
        # Its slot is free again.
        assert fleet.api.manager(second.urls.manager.api).describe_browser().success
        fleet.api.control_plane.delete_instance(second.instance_id)


def test_no_cdp_resource_without_chromium(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEET_CHROMIUM", str(tmp_path / "no-such-chromium"))
    with LocalFleet(tmp_path / "server") as local, local.fleet() as fleet:
        instance = fleet.api.control_plane.create_instance(env_key=ENV)
        manager = fleet.api.manager(instance.urls.manager.api)
        assert "cdp" not in {r.name for r in manager.list_resources()}
        with pytest.raises(InternalServerError) as missing:
            manager.describe_browser()
        assert missing.value.code == "browser_unavailable" and "FLEET_CHROMIUM" in str(missing.value)
