"""The public Fleet SDK's diff checks, run in the user's own process against ``LocalFleet``.

``fleet-python``'s ``expect_exactly`` (always) and ``expect_only_v2(use_structured_diff=True)``
ask the instance manager for ``POST /diff/structured`` and read its rows as ``row_id`` and
``data`` with a ``primary_key`` list. The server answered ``{"key", "changes"}`` rows, bare column
maps for added rows and ``primary_key: "id"``; since it said ``success: true`` the public SDK did
not fall back to its own diff, raised ``KeyError: 'row_id'``, and, because a verifier called in
the user's process swallows every exception, a correct change scored 0.0 with no word why.

Each case here runs a ``@fleet.verifier_sync`` verifier locally (``verifier(env)``, no
``.remote()``) on a right change (1.0) and a wrong one (0.0), and checks the manager's diff was
the one read.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

# The public SDK is a pinned dev dependency (fleet-python): missing, the suite fails, never skips.
import fleet
import pytest
from fleet.instance.base import SyncWrapper

from fleet_local import LocalFleet

CANCEL = "UPDATE orders SET status = 'cancelled', cancel_reason = 'duplicate' WHERE id = 1021"
NOTE = (
    "INSERT INTO order_notes (id, order_id, author, body, created_at) "
    "VALUES (9001, 1021, 'agent', 'cancelled as a duplicate', '2026-11-01T10:00:00')"
)
WRONG_REASON = "UPDATE orders SET status = 'cancelled', cancel_reason = 'fraud' WHERE id = 1021"
OFF_TASK = "UPDATE products SET stock = stock + 1 WHERE id = 1"


@fleet.verifier_sync(key="cancel-exactly")
def cancelled_exactly(env: Any) -> float:
    """The order is cancelled as a duplicate with one note, and nothing else changed."""
    env.db("seed").diff(env.db("current")).expect_exactly(
        [
            {
                "type": "modify",
                "table": "orders",
                "pk": 1021,
                "resulting_fields": [("status", "cancelled"), ("cancel_reason", "duplicate")],
                "no_other_changes": True,
            },
            {
                "type": "insert",
                "table": "order_notes",
                "pk": 9001,
                "fields": [
                    ("id", 9001),
                    ("order_id", 1021),
                    ("author", ...),
                    ("body", ...),
                    ("created_at", ...),
                ],
            },
        ]
    )
    return 1.0


@fleet.verifier_sync(key="cancel-only-v2")
def cancelled_only_v2(env: Any) -> float:
    """The order is cancelled as a duplicate; a note may be added; nothing else may change."""
    env.db("seed").diff(env.db("current"), use_structured_diff=True).expect_only_v2(
        [
            {
                "type": "modify",
                "table": "orders",
                "pk": 1021,
                "resulting_fields": [("status", "cancelled"), ("cancel_reason", "duplicate")],
                "no_other_changes": True,
            },
            {"type": "insert", "table": "order_notes", "pk": 9001, "fields": None},
        ]
    )
    return 1.0


@pytest.fixture(scope="module")
def server() -> Iterator[LocalFleet]:
    with LocalFleet(api_key=f"diff-{uuid.uuid4().hex[:8]}") as local:
        yield local


@pytest.fixture()
def env(server: LocalFleet, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """An orderdesk instance made by the public SDK with only its two variables set."""
    monkeypatch.setenv("FLEET_BASE_URL", server.base_url)
    monkeypatch.setenv("FLEET_API_KEY", server.api_key)
    instance = fleet.Fleet().make("orderdesk:v1.0.0")
    try:
        instance.instance.load()  # the public SDK finds env.db(name) among the loaded resources
        yield instance
    finally:
        instance.close()


@pytest.fixture()
def diffs_read(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The ``/diff/structured`` answers the public SDK received (so a fallback to its own diff,
    which would hide a shape it cannot read, shows)."""
    answers: list[dict[str, Any]] = []
    request = SyncWrapper.request

    def recording(self: SyncWrapper, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        response = request(self, method, url, *args, **kwargs)
        if url.endswith("/diff/structured"):
            answers.append(response.json())
        return response

    monkeypatch.setattr(SyncWrapper, "request", recording)
    return answers


CASES = [
    pytest.param(cancelled_exactly, [CANCEL, NOTE], 1.0, id="expect_exactly-right"),
    pytest.param(cancelled_exactly, [WRONG_REASON, NOTE], 0.0, id="expect_exactly-wrong-value"),
    pytest.param(cancelled_exactly, [CANCEL], 0.0, id="expect_exactly-missing-insert"),
    pytest.param(cancelled_only_v2, [CANCEL, NOTE], 1.0, id="expect_only_v2-right"),
    pytest.param(cancelled_only_v2, [CANCEL, OFF_TASK], 0.0, id="expect_only_v2-off-task"),
    pytest.param(cancelled_only_v2, [WRONG_REASON], 0.0, id="expect_only_v2-wrong-value"),
]


@pytest.mark.parametrize(("verifier", "statements", "score"), CASES)
def test_public_sdk_diff_checks_score_locally_from_the_servers_diff(
    env: Any,
    diffs_read: list[dict[str, Any]],
    verifier: Callable[[Any], float],
    statements: list[str],
    score: float,
) -> None:
    for statement in statements:
        env.db("current").exec(statement)
    assert verifier(env) == score
    # The server's diff was read, and it is one the public SDK's validators accept as a diff.
    assert len(diffs_read) == 1 and diffs_read[0]["success"] is True
    orders = diffs_read[0]["diff"]["orders"]
    assert orders["primary_key"] == ["id"]
    assert [row["row_id"] for row in orders["modified_rows"]] == [1021]
    assert orders["modified_rows"][0]["data"]["status"] == "cancelled"


def test_added_and_removed_rows_carry_row_id_and_data(env: Any, diffs_read: list[dict[str, Any]]) -> None:
    """The added and removed rows, and a composite key, as the platform's differ writes them."""
    env.db("current").exec(NOTE)
    env.db("current").exec("DELETE FROM order_notes WHERE id = (SELECT MIN(id) FROM order_notes)")
    removed_id = env.db("seed").query("SELECT MIN(id) FROM order_notes").rows[0][0]
    response = env.db("current").client.request("POST", "/diff/structured", json={})
    notes = response.json()["diff"]["order_notes"]
    assert notes["added_rows"] == [
        {
            "row_id": 9001,
            "data": {
                "id": 9001,
                "order_id": 1021,
                "author": "agent",
                "body": "cancelled as a duplicate",
                "created_at": "2026-11-01T10:00:00",
            },
        }
    ]
    assert [row["row_id"] for row in notes["removed_rows"]] == [removed_id]
    assert notes["removed_rows"][0]["data"]["id"] == removed_id
    assert notes["total_changes"] == 2
