"""The store hands out verifier executions as typed records, and no private or unknown field of one
reaches the wire.

An execution is stored as one flat JSON document: its ``VerifiersExecuteResponse`` fields and,
under their own names, the server's (``score``, ``sha256``, ``instance_id``, and the exact
``execution_time_ms`` where the wire has it rounded). The verifier service and the sessions
service read it as an ``ExecutionRecord``. The first tests build records in this process; the
last asks a real server over loopback.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from _dbs import server_database

from fleet_local import LocalFleet
from fleet_local._records import ExecutionPrivate, ExecutionRecord, ExecutionWire
from fleet_local._server import build_state
from fleet_local._state import LocalSettings, LocalState
from fleet_local._verifier_exec import EXECUTION_KIND, execution_records
from fleet_sdk import Fleet
from fleet_sdk.types import env_instance as models
from fleet_sdk.types import sessions_ingest as smodels
from fleet_sdk.types import traces_jobs as tmodels
from fleet_sdk.verifiers import bundle_sha256, bundle_verifier

EXECUTE_FIELDS = set(models.VerifiersExecuteResponse.model_fields)
SCORES = "def verify(env, final_answer=None):\n    print('graded')\n    return 0.75\n"


@pytest.fixture
def state(tmp_path: Path) -> Iterator[LocalState]:
    state = build_state(LocalSettings(data_dir=tmp_path, s3=False))
    yield state
    state.store.close()


def test_a_document_written_before_records_reads_the_same(state: LocalState) -> None:
    """An execution as the server stored it before records: a fractional time, an error as a
    dict, and a key of a later version; a put writes it back in the same flat form."""
    state.store.put(
        EXECUTION_KIND,
        "vexec_old",
        {
            "success": False,
            "result": None,
            "verifier_id": "vrf_1",
            "execution_id": "vexec_old",
            "error": {"type": "KeyError", "message": "KeyError: 'x'", "traceback": "tb"},
            "execution_time_ms": 12.6,
            "stdout": "out",
            "score": None,
            "key": "k",
            "sha256": "abc",
            "instance_id": "inst_1",
            "created_at": "2026-01-02T03:04:05+00:00",
            "from_a_later_version": True,
        },
        parent="inst_1",
    )
    records = execution_records(state)
    record = records.get("vexec_old")
    assert isinstance(record, ExecutionRecord)
    assert type(record.execution) is ExecutionWire and isinstance(record.private, ExecutionPrivate)
    assert record.execution.execution_time_ms == 13 and record.private.execution_time_ms == 12.6
    assert record.execution.error is not None and record.execution.error.type == "KeyError"
    assert (record.private.sha256, record.private.instance_id) == ("abc", "inst_1")

    records.put("vexec_old", record, parent="inst_1")
    document = state.store.get(EXECUTION_KIND, "vexec_old")
    assert document is not None
    assert document["execution_time_ms"] == 12.6 and document["error"]["traceback"] == "tb"
    assert document["instance_id"] == "inst_1" and document["sha256"] == "abc"
    assert not {"version", "bundle_cache_hit", "display_src", "comment"} & set(document)


def test_a_lone_surrogate_in_an_execution_is_stored_and_read_as_a_replacement(state: LocalState) -> None:
    record = ExecutionRecord(
        ExecutionWire(
            success=True, execution_id="vexec_s", execution_time_ms=1, stdout="a\ud800b \U0001f600"
        ),
        ExecutionPrivate(execution_time_ms=1.0, score=1.0),
    )
    records = execution_records(state)
    stored = records.put("vexec_s", record)
    read = records.read("vexec_s")
    assert read is not None
    for execution in (stored, read):
        assert execution.execution.stdout == "a\ufffdb \U0001f600"


def test_private_and_unknown_fields_never_reach_the_wire(local: LocalFleet, fleet: Fleet) -> None:
    """A verifier run's answer carries its wire fields alone; planted beside the stored execution,
    a private key and an unknown one appear in no answer that reads it back (the transcript and
    the job's sessions of a session graded by it)."""
    headers = {"Authorization": f"Bearer {local.api_key}"}
    with (
        fleet.make("orderdesk") as env,
        httpx.Client(base_url=local.base_url, headers=headers, timeout=60.0) as http,
    ):
        ran = http.post(
            "/v1/verifiers/execute",
            json={
                "key": "execution-records-wire",
                "sha256": bundle_sha256(SCORES),
                "bundle": base64.b64encode(bundle_verifier(SCORES)).decode("ascii"),
                "args": {"instance_id": env.instance_id},
            },
        )
        assert ran.status_code == 200, ran.text
        answer = ran.json()
        assert set(answer) == EXECUTE_FIELDS  # no score, sha256 or instance_id of the server's
        assert answer["success"] is True and answer["result"] == 0.75
        execution_id = answer["execution_id"]
        with server_database(local.data_dir) as conn:
            conn.execute(
                "UPDATE docs SET doc = json_set(doc, '$._planted_private', 'planted-secret',"
                " '$.planted_unknown', 'planted-unknown') WHERE kind = 'verifier_execution' AND id = ?",
                (execution_id,),
            )
        job_id = fleet.api.traces.create_trace_job(tmodels.TraceJobRequest(name="execution-records")).job_id
        session_id = fleet.api.sessions.ingest_session(
            smodels.SessionIngestRequest.model_validate(
                {
                    "messages": [{"role": "assistant", "content": "done"}],
                    "job_id": job_id,
                    "verifier_execution_id": execution_id,
                }
            )
        ).session_id
        transcript = http.get(f"/v1/sessions/{session_id}/transcript")
        sessions = http.get(f"/v1/sessions/job/{job_id}")
    for response in (transcript, sessions):
        assert response.status_code == 200, response.text
        assert "planted" not in response.text and '"_' not in response.text
        assert env.instance_id not in response.text  # the execution's instance is the server's field
    execution = transcript.json()["verifier_execution"]
    assert set(execution) == set(smodels.VerifierExecutionResult.model_fields)
    assert (execution["execution_id"], execution["score"], execution["stdout"]) == (
        execution_id,
        0.75,
        "graded\n",
    )
