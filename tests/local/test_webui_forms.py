"""The interactive pages of the bundled environments over plain HTTP (no browser): every form runs
the environment's tool against the instance's ``current`` database, and errors come back in the
page's banner without changing anything."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from fleet_local.environments._layout import LAYOUT
from fleet_sdk import Fleet
from fleet_sdk.types import env_instance as models


def _rows(fleet: Fleet, instance: models.InstanceResponse, sql: str) -> list[list[object]]:
    manager = fleet.api.manager(instance.urls.manager.api)
    return manager.query_database("current", models.QueryRequest(query=sql)).rows


@pytest.fixture
def http(instance: models.InstanceResponse) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=instance.urls.app[0], trust_env=False) as client:
        yield client


def test_orders_search_and_order_page(http: httpx.Client) -> None:
    found = http.get("orders", params={"q": "1013"})
    assert found.status_code == 200
    assert 'href="orders/1013"' in found.text and 'href="orders/1014"' not in found.text
    by_name = http.get("orders", params={"q": "Ben Carter"}).text
    assert 'href="orders/1021"' in by_name
    page = http.get("orders/1013").text
    box = LAYOUT["order.shipped"]
    assert f"left:{box.left}px;top:{box.top}px" in page and "Mark shipped" in page
    assert http.get("orders/99999").status_code == 404


def test_forms_change_the_database(
    fleet: Fleet, instance: models.InstanceResponse, http: httpx.Client
) -> None:
    shipped = http.post("orders/1013/status", data={"status": "shipped"})
    assert shipped.status_code == 303 and "msg=" in shipped.headers["location"]
    assert _rows(fleet, instance, "SELECT status FROM orders WHERE id = 1013") == [["shipped"]]

    refund = http.post("orders/1008/refund", data={"amount": "12.50", "reason": "scratched"})
    assert refund.status_code == 303
    rows = _rows(fleet, instance, "SELECT amount_cents, reason, status FROM refunds WHERE order_id = 1008")
    assert [1250, "scratched", "approved"] in rows


def test_refused_actions_show_the_error_and_change_nothing(
    fleet: Fleet, instance: models.InstanceResponse, http: httpx.Client
) -> None:
    refused = http.post("orders/1013/status", data={"status": "delivered"}, follow_redirects=True)
    assert refused.status_code == 200
    assert (
        'class="banner err"' in refused.text and "only a shipped order can become delivered" in refused.text
    )
    assert _rows(fleet, instance, "SELECT status FROM orders WHERE id = 1013") == [["paid"]]
    bad_amount = http.post("orders/1008/refund", data={"amount": "lots", "reason": "x"})
    assert bad_amount.status_code == 422 and "dollar amount" in bad_amount.text
    assert http.post("orders/1008/explode", data={}).status_code == 404
    assert http.get("events").status_code == 404  # orderdesk has no events page
