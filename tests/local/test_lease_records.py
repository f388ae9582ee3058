"""The lease book hands out browser leases as typed records, and no private or unknown field of
one reaches the wire.

A lease is stored as one flat JSON document (its ``BrowserLease`` fields and the server's own,
``_start_url``); the lease book reads it as a ``LeaseRecord``: the generated wire model plus
``LeasePrivate``. No test here starts a Chromium: a lease's browser starts on its first use.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from _dbs import server_database

from fleet_local import LocalFleet
from fleet_local._lease_book import LEASE_KIND
from fleet_local._records import LeasePrivate, LeaseRecord
from fleet_local._server import build_state
from fleet_local._state import LocalSettings, LocalState
from fleet_sdk.types import browser_lease as models

WIRE_FIELDS = set(models.BrowserLease.model_fields)


@pytest.fixture
def state(tmp_path: Path) -> Iterator[LocalState]:
    state = build_state(LocalSettings(data_dir=tmp_path, s3=False))
    state.public_url = "http://127.0.0.1:9"
    yield state
    state.store.close()


def test_the_lease_book_hands_out_typed_records(state: LocalState) -> None:
    book = state.browser_leases
    created = book.create(
        models.BrowserLeaseRequest(ttl_seconds=600), None, start_url="http://127.0.0.1:9/i/x/"
    )
    assert isinstance(created, LeaseRecord) and type(created.lease) is models.BrowserLease
    assert created.private == LeasePrivate(start_url="http://127.0.0.1:9/i/x/")
    lease_id = created.lease.lease_id

    read = book.get(lease_id)
    assert read is not None and type(read.lease) is models.BrowserLease
    assert read.lease.status == "running" and read.lease.allowed_hosts == ["127.0.0.1:9"]
    assert read.private.start_url == "http://127.0.0.1:9/i/x/"

    ended = book.terminate(lease_id)
    assert ended.lease.status == "terminated" and ended.lease.stream_ready is False
    # Ending it rewrote the record: the private field read lazily from the store went back too.
    document = state.store.get(LEASE_KIND, lease_id)
    assert document is not None
    assert document["status"] == "terminated" and document["_start_url"] == "http://127.0.0.1:9/i/x/"
    assert set(document) == WIRE_FIELDS | {"_start_url"}


def test_a_lease_past_its_ttl_reads_as_expired_and_keeps_its_private_fields(state: LocalState) -> None:
    book = state.browser_leases
    lease_id = book.create(
        models.BrowserLeaseRequest(ttl_seconds=600), None, start_url="http://a/"
    ).lease.lease_id
    document = state.store.get(LEASE_KIND, lease_id)
    assert document is not None
    state.store.put(LEASE_KIND, lease_id, {**document, "expires_timestamp_ms": 1})

    record = book.get(lease_id)
    assert record is not None and record.lease.status == "expired"
    assert book.live_count("") == 0
    again = book.get(lease_id)
    assert again is not None and again.lease.status == "expired" and again.private.start_url == "http://a/"


def test_private_and_unknown_fields_of_a_lease_never_reach_the_wire(local: LocalFleet) -> None:
    """A lease's ``_start_url`` and a planted unknown key appear in none of its answers."""
    headers = {"Authorization": f"Bearer {local.api_key}"}
    with httpx.Client(base_url=local.base_url, headers=headers, timeout=60.0) as http:
        created = http.post("/v1/browser", json={"ttl_seconds": 600})
        assert created.status_code == 200, created.text
        lease_id = created.json()["lease_id"]
        with server_database(local.data_dir) as conn:
            conn.execute(
                "UPDATE docs SET doc = json_set(doc, '$._start_url', 'http://planted-private/',"
                " '$.planted_unknown', 'planted-unknown') WHERE kind = ? AND id = ?",
                (LEASE_KIND, lease_id),
            )
        got = http.get(f"/v1/browser/{lease_id}")
        deleted = http.delete(f"/v1/browser/{lease_id}")
        after = http.get(f"/v1/browser/{lease_id}")
    for response in (created, got, deleted, after):
        assert response.status_code == 200, response.text
        assert "planted" not in response.text
        assert '"_' not in response.text
    for body in (created.json(), got.json(), after.json()):
        assert set(body) <= WIRE_FIELDS and body["lease_id"] == lease_id
    assert after.json()["status"] == "terminated"
