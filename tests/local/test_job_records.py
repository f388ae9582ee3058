"""The store hands out evaluation jobs as typed records, and no private or unknown field of one
reaches the wire.

A job is stored as one flat JSON document: its ``Job`` fields and, under their own names, the
server's (``model_prompts``, ``session_ids``). The job service and the episode runner read it as a
``JobRecord``. The first tests build server state in this process; the last asks a real server
over loopback.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from _dbs import server_database
from _jobs_wait import wait_for_job

from fleet_local import LocalFleet
from fleet_local._control import TASK_KIND
from fleet_local._episodes import JOB_KIND, job_records, session_records
from fleet_local._jobs import _create_job
from fleet_local._records import JobPrivate, JobRecord
from fleet_local._server import build_state
from fleet_local._sessions import _job_session_groups
from fleet_local._state import LocalSettings, LocalState
from fleet_sdk import Fleet
from fleet_sdk.types import env_instance as models

JOB_FIELDS = set(models.Job.model_fields)


@pytest.fixture
def state(tmp_path: Path) -> Iterator[LocalState]:
    state = build_state(LocalSettings(data_dir=tmp_path, s3=False))
    for key in ("t-one", "t-two"):
        state.store.put(TASK_KIND, key, {"task_key": key, "env_key": "orderdesk", "prompt": "p"})
    yield state
    state.store.close()


def test_a_created_job_is_a_typed_record_over_a_flat_document(state: LocalState) -> None:
    request = models.JobCreateRequest.model_validate(
        {
            "models": ["local/scripted"],
            "task_keys": ["t-one", "t-two"],
            "pass_k": 2,
            "model_prompts": {"local/scripted": "be brief"},
        }
    )
    created = _create_job(state, request)
    record = job_records(state).get(created.job_id)
    assert isinstance(record, JobRecord)
    assert type(record.job) is models.Job and isinstance(record.private, JobPrivate)
    assert (record.job.status, record.job.pass_k, record.job.task_keys) == ("pending", 2, ["t-one", "t-two"])
    assert record.job.created_at is not None and record.job.created_at.tzinfo is not None
    assert record.private.model_prompts == {"local/scripted": "be brief"}
    sessions = session_records(state).list(parent=created.job_id)
    assert record.private.session_ids == [s.session.session_id for s in sessions] and len(sessions) == 4

    document = state.store.get(JOB_KIND, created.job_id)
    assert document is not None  # flat: the server's fields under their own names
    assert document["status"] == "pending" and document["model_prompts"] == {"local/scripted": "be brief"}
    assert document["session_ids"] == record.private.session_ids

    state.store.update(JOB_KIND, created.job_id, status="completed", error=None)  # as the runner does
    updated = job_records(state).read(created.job_id)
    assert updated is not None and updated.job.status == "completed"
    assert updated.private.session_ids == record.private.session_ids


def test_a_document_written_before_records_reads_the_same(state: LocalState) -> None:
    """A job as the server stored it before records: offset timestamps and a key of a later
    version; an older trace job beside it sorts by its creation time."""
    state.store.put(
        JOB_KIND,
        "job_old",
        {
            "id": "job_old",
            "name": "old",
            "status": "completed",
            "created_at": "2026-01-02T03:04:05.678901+00:00",
            "updated_at": "2026-01-02T03:05:05+00:00",
            "workflow_job_id": "local-job_old",
            "models": ["local/scripted"],
            "pass_k": 1,
            "task_keys": ["t-one"],
            "model_prompts": None,
            "session_ids": ["sess_x"],
            "error": None,
            "from_a_later_version": True,
        },
    )
    state.store.put(
        "trace_job",
        "tj_new",
        {"job_id": "tj_new", "name": "traces", "created_at": "2026-02-01T00:00:00+00:00"},
    )
    record = job_records(state).get("job_old")
    assert record is not None
    assert record.job.created_at == dt.datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=dt.UTC)
    assert record.private.session_ids == ["sess_x"]
    groups = _job_session_groups(state, None, 10).groups
    assert [g.job_id for g in groups] == ["tj_new", "job_old"]  # newest first


def test_a_lone_surrogate_in_a_job_is_stored_and_read_as_a_replacement(state: LocalState) -> None:
    request = models.JobCreateRequest.model_validate(
        {"models": ["local/scripted"], "task_keys": ["t-one"], "system_prompt": "say \ud800 \U0001f600"}
    )
    created = _create_job(state, request)
    record = job_records(state).read(created.job_id)
    assert record is not None and record.job.system_prompt == "say \ufffd \U0001f600"


def test_private_and_unknown_fields_never_reach_the_wire(local: LocalFleet, fleet: Fleet) -> None:
    """Planted beside a finished job's stored fields, a private key and an unknown one appear in
    no answer about it (the job, the job list, its session group), and neither do the server's own
    fields (the per-model prompts, the session ids)."""
    task_key = next(
        t.task_key
        for t in fleet.api.control_plane.list_tasks(env_key="orderdesk").tasks
        if t.task_modality == "tool_use"  # no Chromium for this test
    )
    created = fleet.api.control_plane.create_job(
        models.JobCreateRequest.model_validate(
            {
                "models": ["local/scripted"],
                "task_keys": [task_key],
                "name": "job-records-wire",
                "model_prompts": {"local/scripted": "prompt-of-the-model"},
            }
        )
    )
    wait_for_job(fleet, created.job_id)  # the runner's writes are done before the planting
    with server_database(local.data_dir) as conn:
        conn.execute(
            "UPDATE docs SET doc = json_set(doc, '$._planted_private', 'planted-secret',"
            " '$.planted_unknown', 'planted-unknown') WHERE kind = 'job' AND id = ?",
            (created.job_id,),
        )
        (doc,) = conn.execute(
            "SELECT doc FROM docs WHERE kind = 'job' AND id = ?", (created.job_id,)
        ).fetchone()
    assert "planted-secret" in doc and "session_ids" in doc  # what the answers must leave out is there
    headers = {"Authorization": f"Bearer {local.api_key}"}
    with httpx.Client(base_url=local.base_url, headers=headers, timeout=60.0) as http:
        got = http.get(f"/v1/jobs/{created.job_id}")
        listed = http.get("/v1/jobs")
        group = http.get(f"/v1/job-session-groups/{created.job_id}")
    for response in (got, listed, group):
        assert response.status_code == 200, response.text
        assert "planted" not in response.text
        assert '"_' not in response.text
        assert "prompt-of-the-model" not in response.text and "session_ids" not in response.text
    assert set(got.json()) == JOB_FIELDS
    assert got.json()["status"] == "completed" and got.json()["name"] == "job-records-wire"
    (mine,) = [job for job in listed.json()["jobs"] if job["id"] == created.job_id]
    assert set(mine) == set(models.JobResponse.model_fields)
    assert group.json()["session_count"] == 1
