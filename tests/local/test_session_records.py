"""The store hands out sessions as typed records, and no private or unknown field of one reaches
the wire.

A session is stored as one flat JSON document: its ``SessionInfo`` fields and, under their own
names, the server's (``job_id``, ``task``, ``model_id``, what it recorded of its instance and
verifier run...). The sessions service reads it as a ``SessionRecord``. The first tests build
server state in this process (what they check is what the store returns); the last asks a real
server over loopback.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from _dbs import server_database

from fleet_local import LocalFleet
from fleet_local._episodes import SESSION_KIND, session_records
from fleet_local._records import SessionPrivate, SessionRecord, SessionWire
from fleet_local._server import build_state
from fleet_local._sessions import _job_sessions, ingest
from fleet_local._state import LocalSettings, LocalState
from fleet_sdk import Fleet
from fleet_sdk.types import sessions_ingest as smodels
from fleet_sdk.types import traces_jobs as tmodels

SESSION_FIELDS = set(smodels.SessionInfo.model_fields)
TASK_KEY = "orderdesk-count-pending-orders"


@pytest.fixture
def state(tmp_path: Path) -> Iterator[LocalState]:
    state = build_state(LocalSettings(data_dir=tmp_path, s3=False))
    yield state
    state.store.close()


def _body(**fields: object) -> smodels.SessionIngestRequest:
    return smodels.SessionIngestRequest.model_validate(
        {"messages": [{"role": "assistant", "content": "done"}], **fields}
    )


def test_an_ingested_session_is_a_typed_record_over_a_flat_document(state: LocalState) -> None:
    created = ingest(
        state,
        _body(
            job_id="job_a", task_key=TASK_KEY, model="anthropic/claude-x", status="running", instance_id="i1"
        ),
    )
    records = session_records(state)
    record = records.get(created.session_id)
    assert isinstance(record, SessionRecord)
    assert type(record.session) is SessionWire and isinstance(record.private, SessionPrivate)
    wire = record.session
    assert (wire.model, wire.status, wire.step_count) == ("claude-x", "running", 1)
    assert record.session.created_at.tzinfo is not None
    assert (record.private.job_id, record.private.model_id, record.private.source) == (
        "job_a",
        "anthropic/claude-x",
        "ingest",
    )

    ingest(
        state,
        _body(
            session_id=created.session_id,
            status="completed",
            ended_at="2026-01-02T03:04:05",  # no zone: UTC
            verifier_execution_id="vexec_1",
            metadata={"score": 1.0},
        ),
    )
    record = records.read(created.session_id)
    assert record is not None
    assert (record.session.status, record.session.step_count) == ("completed", 2)
    assert record.session.ended_at == dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    assert record.private.verifier_execution_id == "vexec_1" and record.private.metadata == {"score": 1.0}
    assert record.private.instance_id == "i1"  # an append never replaces it

    # The document keeps its flat form: the server's fields under their own names, no nesting.
    document = state.store.get(SESSION_KIND, created.session_id)
    assert document is not None
    assert {"session_id", "status", "job_id", "task_key", "model_id", "metadata"} <= set(document)
    assert document["job_id"] == "job_a" and document["status"] == "completed"
    assert [s.private.job_id for s in records.list(parent="job_a")] == ["job_a"]


def test_a_document_written_before_records_reads_the_same(state: LocalState) -> None:
    """A job session as the server stored it before records: an offset timestamp, the instance and
    the verifier run as recorded (with keys no model names), and a key of a later version."""
    state.store.put(
        SESSION_KIND,
        "sess_old",
        {
            "session_id": "sess_old",
            "source": "job",
            "job_id": "job_old",
            "task_key": TASK_KEY,
            "task": None,
            "model": "claude-x",
            "model_id": "anthropic/claude-x",
            "pass_index": 0,
            "status": "completed",
            "created_at": "2026-01-02T03:04:05.678901+00:00",
            "started_at": "2026-01-02T03:04:06+00:00",
            "ended_at": "2026-01-02T03:05:06+00:00",
            "step_count": 3,
            "instance_id": "inst_gone",
            "instance": {"instance_id": "inst_gone", "urls": {"root": "http://x"}},  # not a full Instance
            "verifier_execution": {
                "success": True,
                "score": 1.0,
                "stdout": "",
                "execution_time_ms": 12,
                "result": 1.0,
                "execution_id": "vexec_old",
                "error": None,
            },
            "verifier_execution_id": "vexec_old",
            "metadata": {"score": 1.0, "final_answer": None},
            "error": None,
            "lease_id": "lease_sess_old",
            "from_a_later_version": True,
        },
        parent="job_old",
    )
    record = session_records(state).get("sess_old")
    assert record is not None
    assert record.session.created_at == dt.datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=dt.UTC)
    assert record.private.lease_id == "lease_sess_old"
    assert record.private.verifier_execution is not None
    assert record.private.verifier_execution["execution_id"] == "vexec_old"

    answer = _job_sessions(state, "job_old")
    (group,) = answer.tasks
    (session,) = group.sessions
    assert type(session) is smodels.SessionInfo
    assert session.instance is None  # what it recorded is not a full instance
    assert session.verifier_execution is not None and session.verifier_execution.score == 1.0
    assert group.passed_sessions == 1 and session.step_count == 3


def test_a_lone_surrogate_in_a_session_is_stored_and_read_as_a_replacement(state: LocalState) -> None:
    """The store's surrogate rule holds for session records: what ``put`` returns and what a read
    returns are the stored text's, a lone surrogate as U+FFFD and a pair kept."""
    record = SessionRecord(
        SessionWire(
            session_id="sess_s",
            model="m",
            status="errored",
            created_at=dt.datetime.now(dt.UTC),
            step_count=0,
            error="bad \ud800 \U0001f600",
        ),
        SessionPrivate(job_id="job_s", metadata={"note": "\udfff"}),
    )
    records = session_records(state)
    stored = records.put("sess_s", record, parent="job_s")
    read = records.read("sess_s")
    assert read is not None
    for session in (stored, read):
        assert session.session.error == "bad \ufffd \U0001f600"
        assert session.private.metadata == {"note": "\ufffd"}


def test_private_and_unknown_fields_never_reach_the_wire(local: LocalFleet, fleet: Fleet) -> None:
    """Planted beside a session's stored fields, a private key and an unknown one appear in no
    answer about it (a job's sessions, its session groups, the transcript), and the server's own
    fields (the job, the model as sent, the source) are not session fields of any answer."""
    job_id = fleet.api.traces.create_trace_job(tmodels.TraceJobRequest(name="session-records-wire")).job_id
    body = _body(job_id=job_id, task_key=TASK_KEY, model="anthropic/claude-x", status="completed")
    session_id = fleet.api.sessions.ingest_session(body).session_id
    with server_database(local.data_dir) as conn:
        conn.execute(
            "UPDATE docs SET doc = json_set(doc, '$._planted_private', 'planted-secret',"
            " '$.planted_unknown', 'planted-unknown', '$.lease_id', 'planted-lease')"
            " WHERE kind = 'session' AND id = ?",
            (session_id,),
        )
    headers = {"Authorization": f"Bearer {local.api_key}"}
    with httpx.Client(base_url=local.base_url, headers=headers, timeout=60.0) as http:
        sessions = http.get(f"/v1/sessions/job/{job_id}")
        group = http.get(f"/v1/job-session-groups/{job_id}")
        groups = http.get("/v1/job-session-groups", params={"job_id": job_id})
        transcript = http.get(f"/v1/sessions/{session_id}/transcript")
    for response in (sessions, group, groups, transcript):
        assert response.status_code == 200, response.text
        assert "planted" not in response.text
        assert '"_' not in response.text  # no key of the server's own
        assert "anthropic/" not in response.text  # the model as sent is the server's (model_id)
    (task,) = sessions.json()["tasks"]
    (session,) = task["sessions"]
    assert set(session) == SESSION_FIELDS
    assert session["session_id"] == session_id
    assert (session["model"], session["status"]) == ("claude-x", "completed")
    assert group.json()["session_count"] == 1
    assert set(transcript.json()) == set(smodels.SessionTranscriptResponse.model_fields)


def test_a_record_update_keeps_its_parent_and_what_others_wrote(state: LocalState) -> None:
    """``Records.update`` reads, changes and writes back under the store's lock: the document's
    parent stays, fields it did not change (a runner's ``Store.update`` before it) stay, and an
    unknown id is None."""
    created = ingest(state, _body(job_id="job_u", model="m", status="running"))
    state.store.update(SESSION_KIND, created.session_id, lease_id="lease_x")  # as the runner writes

    def finish(record: SessionRecord) -> None:
        record.session.status = "completed"

    records = session_records(state)
    updated = records.update(created.session_id, finish)
    assert updated is not None and updated.session.status == "completed"
    assert updated.private.lease_id == "lease_x"
    assert [s.session.session_id for s in records.list(parent="job_u")] == [created.session_id]
    assert records.update("sess_unknown", finish) is None
