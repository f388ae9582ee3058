"""The per-instance manager API over HTTP, through the generated client: health,
resources, describe, query (read-only enforced by SQLite), structured diff,
reset, and the instance's web UI."""

from __future__ import annotations

import httpx
import pytest
from fleet_generated.env_instance.client import InstanceManagerClient

from fleet_sdk import NotFoundError, PermissionDeniedError
from fleet_sdk._client import Fleet
from fleet_sdk.types import env_instance as models

ENV = "orderdesk"


@pytest.fixture
def manager(fleet: Fleet, instance: models.InstanceResponse) -> InstanceManagerClient:
    return fleet.api.manager(instance.urls.manager.api)


def _scalar(manager: InstanceManagerClient, sql: str, db: str = "current") -> object:
    rows = manager.query_database(db, models.QueryRequest(query=sql)).rows
    assert rows is not None
    return rows[0][0]


def test_health_and_resources(manager: InstanceManagerClient) -> None:
    assert manager.manager_health().status == "ok"
    resources = {(r.name, r.type, r.mode) for r in manager.list_resources()}
    assert resources == {
        ("seed", "sqlite", "ro"),
        ("current", "sqlite", "rw"),
        ("action_log", "sqlite", "ro"),
        ("cdp", "cdp", "rw"),  # this machine runs Chromium (the test suite needs it)
    }


def test_describe(manager: InstanceManagerClient) -> None:
    described = manager.describe_database("current")
    assert described.success and described.resource_name == "current" and described.tables
    tables = {t.name: t for t in described.tables}
    assert {"customers", "orders", "products"} <= set(tables)
    customers = tables["customers"]
    assert customers.sql and customers.sql.upper().startswith("CREATE TABLE")
    by_name = {c.name: c for c in customers.columns}
    assert by_name["id"].primary_key and by_name["id"].type.upper() == "INTEGER"
    assert by_name["name"].notnull and not by_name["name"].primary_key
    with pytest.raises(NotFoundError):
        manager.describe_database("nope")


def test_query_and_read_only_enforcement(manager: InstanceManagerClient) -> None:
    result = manager.query_database(
        "current", models.QueryRequest(query="SELECT id, name FROM customers WHERE id = ?", args=[1])
    )
    assert result.success and result.columns == ["id", "name"] and result.rows and result.rows[0][0] == 1

    write = models.QueryRequest(query="UPDATE customers SET tier = 'gold' WHERE id = 1")
    with pytest.raises(PermissionDeniedError) as err:
        manager.query_database("current", write)  # read_only defaults to true
    assert err.value.code == "read_only" and "read_only" in str(err.value)
    # A write disguised as something else is refused by SQLite itself, not by parsing.
    with pytest.raises(PermissionDeniedError):
        manager.query_database(
            "current",
            models.QueryRequest(
                query="WITH x AS (SELECT 1) DELETE FROM order_notes WHERE id IN (SELECT * FROM x)"
            ),
        )
    with pytest.raises(PermissionDeniedError) as seed_err:
        manager.query_database("seed", models.QueryRequest(query=write.query, read_only=False))
    assert seed_err.value.code == "read_only"

    bad = manager.query_database("current", models.QueryRequest(query="SELECT * FROM no_such_table"))
    assert bad.success is False and bad.error and "no_such_table" in bad.error
    # Nothing reaches files outside the instance's database.
    attach = manager.query_database(
        "current", models.QueryRequest(query="ATTACH '/tmp/elsewhere.db' AS other", read_only=False)
    )
    assert attach.success is False and attach.error and "not authorized" in attach.error


def test_write_diff_reset(manager: InstanceManagerClient) -> None:
    tier = _scalar(manager, "SELECT tier FROM customers WHERE id = 1")
    new_tier = "standard" if tier == "gold" else "gold"
    updated = manager.query_database(
        "current",
        models.QueryRequest(
            query="UPDATE customers SET tier = ? WHERE id = 1", args=[new_tier], read_only=False
        ),
    )
    assert updated.success and updated.rows_affected == 1
    inserted = manager.query_database(
        "current",
        models.QueryRequest(
            query="INSERT INTO order_notes (order_id, author, body, created_at) "
            "SELECT id, 'tester', 'hello', '2026-11-01T10:00:00' FROM orders ORDER BY id LIMIT 1",
            read_only=False,
        ),
    )
    assert inserted.success and inserted.rows_affected == 1 and inserted.last_insert_id

    diff = manager.structured_diff(models.DiffRequest())
    assert diff.success
    customers = diff.diff["customers"]
    assert customers.primary_key == ["id"] and customers.total_changes == 1
    assert customers.modified_rows[0].row_id == 1
    assert customers.modified_rows[0].data["tier"] == new_tier
    assert customers.modified_rows[0].changes["tier"].before == tier
    assert customers.modified_rows[0].changes["tier"].after == new_tier
    notes = diff.diff["order_notes"]
    assert len(notes.added_rows) == 1 and notes.added_rows[0].data["body"] == "hello"
    assert diff.diff["products"].total_changes == 0 and diff.diff["products"].unchanged_count > 0

    ignored = manager.structured_diff(
        models.DiffRequest(
            ignore_config=models.DiffIgnoreConfig(
                tables=["order_notes"], table_fields={"customers": ["tier"]}
            )
        )
    )
    assert "order_notes" not in ignored.diff
    assert ignored.diff["customers"].total_changes == 0

    reset = manager.reset_instance(models.ResetRequest())
    assert reset.success
    assert _scalar(manager, "SELECT tier FROM customers WHERE id = 1") == tier
    after = manager.structured_diff(models.DiffRequest())
    assert all(table.total_changes == 0 for table in after.diff.values())


def test_web_ui(instance: models.InstanceResponse) -> None:
    page = httpx.get(instance.urls.app[0], timeout=10)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "OrderDesk" in page.text and "customers" in page.text and "rows)" in page.text
    assert "<script" not in page.text
    missing = httpx.get(instance.urls.root.replace(instance.instance_id, "inst_missing"), timeout=10)
    assert missing.status_code == 404
