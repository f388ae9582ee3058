"""The fault-injection admin API under bad input: it needs the server's key, refuses a bad
rule with a 422 naming the field, and a refused rule never breaks the server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from _http import bearer, raw_client

from fleet_local import LocalFleet
from fleet_sdk import FleetError

ADMIN = "/_admin/faults"
PROBE = "/v1/env/"


@pytest.fixture
def admin(faulty: LocalFleet) -> Iterator[httpx.Client]:
    """A raw client of the admin API carrying the server's key (``faulty`` clears faults after)."""
    with raw_client(faulty, timeout=10) as client:
        yield client


def probe_status(server: LocalFleet) -> int:
    """The status of an ordinary authenticated request, to see whether a fault is armed."""
    return httpx.get(f"{server.base_url}{PROBE}", headers=bearer(server), timeout=10).status_code


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wrong-key", "Basic abc", "Bearer"],
    ids=["no key", "wrong key", "other scheme", "empty key"],
)
def test_every_admin_method_needs_the_servers_key(faulty: LocalFleet, authorization: str | None) -> None:
    headers = {"Authorization": authorization} if authorization is not None else {}
    rule = {"path": PROBE, "status": 503}
    with httpx.Client(base_url=faulty.base_url, headers=headers, timeout=10) as stranger:
        answers = [stranger.post(ADMIN, json=rule), stranger.get(ADMIN), stranger.delete(ADMIN)]
    for answer in answers:
        assert answer.status_code == 401
        assert answer.json()["code"] == "unauthorized"
        assert faulty.api_key not in answer.text
    assert probe_status(faulty) == 200


@pytest.mark.parametrize(
    ("rule", "field"),
    [
        ({"path": PROBE, "count": "a"}, "count"),
        ({"path": PROBE, "count": 0}, "count"),
        ({"path": PROBE, "count": 1.5}, "count"),
        ({"path": PROBE, "status": 99}, "status"),
        ({"path": PROBE, "status": 200}, "status"),
        ({"path": PROBE, "status": "503"}, "status"),
        ({"path": PROBE, "mode": "explode"}, "mode"),
        ({"path": PROBE, "delay": -1}, "delay"),
        ({"path": PROBE, "body": ["not", "an", "object"]}, "body"),
        ({"path": PROBE, "when": "later"}, "when"),
        ({"path": PROBE, "method": "get me"}, "method"),
        ({"path": "no-leading-slash"}, "path"),
        ({"status": 503}, "path"),
        ({"path": PROBE, "stauts": 503}, "stauts"),
    ],
)
def test_a_bad_rule_is_a_422_naming_the_field_and_arms_nothing(
    faulty: LocalFleet, admin: httpx.Client, rule: dict[str, Any], field: str
) -> None:
    answer = admin.post(ADMIN, json=rule)
    assert answer.status_code == 422
    body = answer.json()
    assert body["code"] == "validation_error" and body["retryable"] is False
    assert ["body", field] in [issue["loc"] for issue in body["detail"]]
    assert probe_status(faulty) == 200


def test_a_body_that_is_not_json_is_a_422(faulty: LocalFleet, admin: httpx.Client) -> None:
    answer = admin.post(ADMIN, content=b"{not json", headers={"Content-Type": "application/json"})
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["type"] == "json_invalid"
    assert probe_status(faulty) == 200


def test_an_oversized_rule_is_a_413(faulty: LocalFleet, admin: httpx.Client) -> None:
    answer = admin.post(ADMIN, json={"path": PROBE, "body": {"detail": "x" * 100_000}})
    assert answer.status_code == 413
    assert answer.json()["code"] == "payload_too_large"
    assert answer.json()["retryable"] is False
    assert probe_status(faulty) == 200


def test_inject_fault_names_the_field_the_server_refused(faulty: LocalFleet) -> None:
    with pytest.raises(FleetError, match="count"):
        faulty.inject_fault(PROBE, count=0)
    assert probe_status(faulty) == 200


def test_an_injected_body_is_answered_verbatim(faulty: LocalFleet, admin: httpx.Client) -> None:
    body = {"detail": {"error": "seed_placement_failed", "retryable": True}}
    faulty.inject_fault(PROBE, method="GET", status=400, body=body)
    answer = httpx.get(f"{faulty.base_url}{PROBE}", headers=bearer(faulty), timeout=10)
    assert (answer.status_code, answer.json()) == (400, body)
    assert faulty.fired_faults()[-1] == ("GET", PROBE, "status")
    assert probe_status(faulty) == 200
