"""Retention: finished records go after ``retention_seconds``, live ones stay (``_retention``)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from _waits import wait_until_async

from fleet_local import LocalFleet
from fleet_local._retention import REPLAY_FLOOR, prune
from fleet_local._store import Store
from fleet_sdk import NotFoundError, TaskEnv
from fleet_sdk.cli import build_parser
from fleet_sdk.tasks import Task


def _store(tmp_path: Path) -> Store:
    store = Store(tmp_path / "fleet.db")
    store.put("instance", "gone", {"instance_id": "gone", "status": "terminated"})
    store.put("instance", "live", {"instance_id": "live", "status": "running"})
    store.put("verifier_execution", "vexec", {"execution_id": "vexec"}, parent="gone")
    store.put("session", "done", {"session_id": "done", "status": "completed"}, parent="job")
    store.put("session", "open", {"session_id": "open", "status": "running"}, parent="job")
    store.append_messages("done", [{"role": "user", "content": "hi"}])
    store.append_messages("open", [{"role": "user", "content": "hi"}])
    store.put("job", "job", {"id": "job", "status": "completed"})
    store.put("idempotency", "create_instance:k", {"digest": "d"})
    store.put("create_request_id", "req", {"instance_id": "gone"})
    store.put("task", "t", {"task_key": "t"})
    return store


def test_finished_records_go_and_live_ones_stay(tmp_path: Path) -> None:
    store = _store(tmp_path)
    deleted = prune(store, 60, now=time.time() + 120)
    assert deleted == {"instance": 1, "verifier_execution": 1, "session": 1, "job": 1}
    assert store.get("instance", "gone") is None
    assert store.get("instance", "live") is not None
    assert store.get("session", "done") is None and list(store.messages("done")) == []
    assert store.get("session", "open") is not None and len(list(store.messages("open"))) == 1
    assert store.get("task", "t") is not None  # tasks are configuration, never pruned
    # Replay records outlive a short retention: a client may resend a create for ten minutes.
    assert store.get("idempotency", "create_instance:k") is not None
    assert store.get("create_request_id", "req") is not None
    later = prune(store, 60, now=time.time() + REPLAY_FLOOR + 60)
    assert later == {"idempotency": 1, "create_request_id": 1}
    store.close()


def test_replay_records_are_kept_for_the_floor_whatever_the_retention_and_no_longer(tmp_path: Path) -> None:
    store = Store(tmp_path / "fleet.db")
    try:
        store.put("idempotency", "create_instance:k", {"digest": "d"})
        store.put("create_request_id", "req", {"instance_id": "inst"})
        store.put("browser_lease_idempotency", "k", {"lease_id": "lease"})
        store.put("session", "done", {"session_id": "done", "status": "completed"})
        now = time.time()
        # Without a retention only replay records go, once past the floor; finished records stay.
        assert prune(store, None, now=now + REPLAY_FLOOR - 5) == {}
        assert prune(store, None, now=now + REPLAY_FLOOR + 5) == {
            "idempotency": 1,
            "create_request_id": 1,
            "browser_lease_idempotency": 1,
        }
        assert store.get("session", "done") is not None
    finally:
        store.close()


def test_nothing_young_is_pruned(tmp_path: Path) -> None:
    store = _store(tmp_path)
    assert prune(store, 3600) == {}
    assert store.count("instance") == 2
    store.close()


def test_a_record_counts_from_its_last_change(tmp_path: Path) -> None:
    store = _store(tmp_path)
    # Made an hour ago, finished just now: kept for the whole retention from now.
    store._db.execute("UPDATE docs SET created = created - 3600, updated = updated - 3600")
    store.update("session", "open", status="completed")
    prune(store, 60)
    assert store.get("session", "open") is not None
    assert store.get("session", "done") is None  # finished an hour ago
    store.close()


def test_live_instances_are_counted_in_sql(tmp_path: Path) -> None:
    store = _store(tmp_path)
    assert store.count("instance", exclude_status="terminated") == 1
    assert [d["instance_id"] for d in store.list("instance", exclude_status="terminated")] == ["live"]
    store.close()


@pytest.mark.parametrize("given", ["0", "-5", "nan", "inf"])
def test_serve_refuses_a_retention_that_is_not_positive(
    given: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--retention-seconds", given])
    assert "--retention-seconds" in capsys.readouterr().err


async def test_a_server_with_a_retention_forgets_finished_episodes() -> None:
    async with LocalFleet(s3=False, retention_seconds=1) as local:
        fleet = local.async_fleet()
        task = Task.model_validate(
            (await fleet.api.control_plane.list_tasks(env_key="orderdesk")).tasks[0].model_dump()
        )
        async with TaskEnv(task, fleet=fleet, trace_job_id="retention") as env:
            await env.reset_async()
            await env.step_async({"done": True})
            instance_id = env.env.instance_id if env.env is not None else ""
            session_id = env.trace_session_id
        assert session_id is not None

        async def forgotten() -> bool:
            try:
                await fleet.api.control_plane.get_instance(instance_id)
                return False
            except NotFoundError:
                pass
            try:
                await fleet.api.sessions.get_session_transcript(session_id)
                return False
            except NotFoundError:
                return True

        await wait_until_async(forgotten, "the finished instance and session were pruned")
        await fleet.close()


def test_a_transcript_left_without_its_session_goes_on_the_next_pass(tmp_path: Path) -> None:
    """A pass deletes a session's document, then its messages: one killed between the two left
    the messages for ever, since no later pass looked for them."""
    store = _store(tmp_path)
    try:
        store.delete("session", "done")  # as a pass cut short after the document
        assert prune(store, 3600, dry_run=True) == {"transcript": 1}
        assert len(list(store.messages("done"))) == 1
        assert prune(store, 3600) == {"transcript": 1}
        assert list(store.messages("done")) == []
        assert len(list(store.messages("open"))) == 1  # a live session's transcript stays
    finally:
        store.close()
