"""The store hands out instances as typed records, and no private or unknown field of one reaches
the wire.

An instance is stored as one flat JSON document (its ``InstanceResponse`` fields and the server's
own fields prefixed ``_``); the instance service reads it as an ``InstanceRecord``: the generated
wire model plus ``InstancePrivate``. The first tests build server state in this process (what they
check is what the store returns); the last asks a real server over loopback.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from _dbs import server_database

from fleet_local import LocalFleet
from fleet_local._instances import (
    KIND,
    create_instance,
    delete_instance,
    get_instance,
    heartbeat,
    instance_records,
    list_instances,
    reap_expired,
    reset_instance,
)
from fleet_local._records import InstancePrivate, InstanceRecord
from fleet_local._server import build_state
from fleet_local._state import LocalSettings, LocalState
from fleet_sdk import Fleet
from fleet_sdk.types import env_instance as models

WIRE_FIELDS = set(models.InstanceResponse.model_fields)


@pytest.fixture
def state(tmp_path: Path) -> Iterator[LocalState]:
    state = build_state(LocalSettings(data_dir=tmp_path, s3=False))
    yield state
    state.store.close()


def test_the_store_hands_out_typed_records_through_an_instance_s_life(state: LocalState) -> None:
    created = create_instance(
        state, models.InstanceRequest(env_key="orderdesk", ttl_seconds=600, image_type="standard")
    )
    records = instance_records(state)

    record = records.read(created.instance_id)
    assert isinstance(record, InstanceRecord)
    assert type(record.instance) is models.InstanceResponse
    assert isinstance(record.private, InstancePrivate)
    assert record.instance.status == "running"
    assert isinstance(record.instance.created_at, dt.datetime) and record.instance.created_at.tzinfo
    assert record.private.window_seconds == 600
    assert record.private.image_type == "standard"
    first_deadline = record.private.deadline
    assert first_deadline is not None and record.private.last_heartbeat is None

    heartbeat(state, created.instance_id)
    reset_instance(state, created.instance_id, seed=7)
    record = records.get(created.instance_id)
    assert record is not None
    assert record.private.last_heartbeat is not None
    assert record.private.deadline is not None and record.private.deadline >= first_deadline
    assert record.private.reset_seed == 7
    assert record.instance.updated_at >= created.updated_at
    assert [r.instance.instance_id for r in records.list()] == [created.instance_id]

    deleted = delete_instance(state, created.instance_id)
    assert deleted.status == "terminated" and isinstance(deleted.terminated_at, dt.datetime)
    record = records.read(created.instance_id)
    assert record is not None and record.instance.status == "terminated"
    assert record.instance.health is False
    # On disk the document keeps its flat form: the SQL over ``$.status`` still sees it.
    assert state.store.count(KIND, exclude_status="terminated") == 0
    document = state.store.get(KIND, created.instance_id)
    assert document is not None
    assert document["status"] == "terminated" and document["_reset_seed"] == 7
    assert "instance" not in document and "private" not in document


def test_a_document_written_before_records_reads_as_one(state: LocalState) -> None:
    """A data directory from before typed records: timestamps as ``isoformat()`` wrote them, no
    ``_reset_seed``, and a key no model knows; it is read, answered and reaped as any other."""
    instance = create_instance(state, models.InstanceRequest(env_key="orderdesk"))
    old = state.store.get(KIND, instance.instance_id)
    assert old is not None
    moment = dt.datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=dt.UTC).isoformat()
    old.update(created_at=moment, updated_at=moment, _deadline=1.0, not_a_field="kept out")
    del old["_reset_seed"], old["_last_heartbeat"]
    state.store.put(KIND, instance.instance_id, old)

    record = instance_records(state).read(instance.instance_id)
    assert record is not None
    assert record.instance.created_at == dt.datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=dt.UTC)
    assert record.private.reset_seed is None and record.private.deadline == 1.0
    answered = get_instance(state, instance.instance_id)
    assert "not_a_field" not in answered.model_dump()

    assert reap_expired(state) == [instance.instance_id]  # its deadline (1.0) has long passed
    assert get_instance(state, instance.instance_id).status == "terminated"


def test_private_fields_never_reach_the_service_s_answers(state: LocalState) -> None:
    instance = create_instance(state, models.InstanceRequest(env_key="orderdesk", run_id="r1"))
    document = state.store.get(KIND, instance.instance_id)
    assert document is not None and {"_deadline", "_window_seconds"} <= set(document)

    for answer in (
        instance,
        get_instance(state, instance.instance_id),
        *list_instances(state, run_id="r1"),
        delete_instance(state, instance.instance_id),
    ):
        # Exactly the wire model, not a subclass that could carry more.
        assert type(answer) is models.InstanceResponse
        assert set(answer.model_dump()) == WIRE_FIELDS


def test_private_and_unknown_fields_never_reach_the_wire(local: LocalFleet, fleet: Fleet) -> None:
    """Planted beside an instance's stored fields, a private key and an unknown one appear in no
    response of the server: get, list, heartbeat and delete."""
    created = fleet.api.control_plane.create_instance(
        models.InstanceRequest(env_key="orderdesk", run_id="typed-records-wire")
    )
    instance_id = created.instance_id
    with server_database(local.data_dir) as conn:
        conn.execute(
            "UPDATE docs SET doc = json_set(doc, '$._planted_private', 'planted-secret',"
            " '$.planted_unknown', 'planted-unknown') WHERE kind = 'instance' AND id = ?",
            (instance_id,),
        )
    headers = {"Authorization": f"Bearer {local.api_key}"}
    with httpx.Client(base_url=local.base_url, headers=headers, timeout=60.0) as http:
        got = http.get(f"/v1/env/instances/{instance_id}")
        listed = http.get("/v1/env/instances", params={"run_id": "typed-records-wire"})
        beat = http.post(f"/v1/env/instances/{instance_id}/heartbeat", json={})
        deleted = http.delete(f"/v1/env/instances/{instance_id}")
    for response in (got, listed, beat, deleted):
        assert response.status_code == 200, response.text
        assert "planted" not in response.text
        assert '"_' not in response.text  # no key of the server's own
    for body in (got.json(), *listed.json(), deleted.json()):
        assert set(body) == WIRE_FIELDS
    assert [body["instance_id"] for body in listed.json()] == [instance_id]
    assert deleted.json()["status"] == "terminated"


def test_a_lone_surrogate_in_a_record_is_stored_and_answered_as_a_replacement(state: LocalState) -> None:
    """The store's surrogate rule holds for typed records too: what ``create`` answers and what a
    read returns are the stored text's, with the lone surrogate as U+FFFD and a pair kept."""
    variables = {"lone": "\ud800x", "pair": "\U0001f600"}
    created = create_instance(state, models.InstanceRequest(env_key="orderdesk", env_variables=variables))
    read = instance_records(state).read(created.instance_id)
    assert read is not None
    for instance in (created, read.instance):
        assert instance.env_variables is not None
        assert instance.env_variables["lone"] == "\ufffdx" and instance.env_variables["pair"] == "\U0001f600"
