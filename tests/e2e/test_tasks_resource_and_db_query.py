"""One ``Task`` everywhere (``fleet.tasks``, the generated model, ``TaskEnv``) and
``db().query(sql, args, read_only=...)`` with typed SQL errors, on the local server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fleet_sdk import AsyncFleet, DatabaseError, Fleet, PermissionDeniedError, Task, TaskConfigError
from fleet_sdk.task_env import TaskEnv


def test_sync_tasks_list_get_load_return_sdk_tasks(fleet: Fleet, tmp_path: Path) -> None:
    listed = fleet.tasks.list(env_key="orderdesk")
    assert listed and all(type(t) is Task and t.env_key == "orderdesk" for t in listed)
    generated = fleet.api.control_plane.list_tasks(env_key="orderdesk").tasks
    assert [t.task_key for t in listed] == [t.task_key for t in generated]
    one = fleet.tasks.get(listed[0].task_key)
    assert one == listed[0]
    assert fleet.tasks.list(task_keys=[one.task_key]) == [one]
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps({"tasks": [one.model_dump()]}))
    assert fleet.tasks.load(path) == [one]
    path.write_text(json.dumps({"tasks": [{"task_key": "x", "prompt": "p"}]}))
    with pytest.raises(TaskConfigError, match="env_key"):
        fleet.tasks.load(path)


async def test_async_tasks_list_get_load_return_sdk_tasks(afleet: AsyncFleet, tmp_path: Path) -> None:
    listed = await afleet.tasks.list(env_key="calendar")
    assert listed and all(type(t) is Task for t in listed)
    one = await afleet.tasks.get(listed[-1].task_key)
    assert one == listed[-1]
    path = tmp_path / "tasks.json"
    path.write_text(json.dumps([one.model_dump()]))
    assert await afleet.tasks.load(path) == [one]


async def test_task_env_takes_the_generated_task_model_and_scores_it(afleet: AsyncFleet) -> None:
    generated = (
        await afleet.api.control_plane.list_tasks(task_keys=["orderdesk-count-pending-orders"])
    ).tasks[0]
    assert type(generated) is not Task
    async with TaskEnv(generated, fleet=afleet) as env:
        assert env.task == Task.model_validate(generated) == await afleet.tasks.get(generated.task_key)
        await env.reset_async()
        _, reward, done, _ = await env.step_async({"tool": "submit_final_answer", "params": {"answer": "6"}})
        assert done and reward == 1.0


def test_query_reads_by_default_and_writes_only_when_asked(fleet: Fleet) -> None:
    with fleet.make("orderdesk") as env:
        db = env.db()
        with pytest.raises(PermissionDeniedError, match="read_only=false"):
            db.query("DELETE FROM order_notes")
        before = db.query("SELECT COUNT(*) FROM order_notes").rows
        written = db.query("DELETE FROM order_notes WHERE order_id = ?", [1007], read_only=False)
        assert written.success and written.rows_affected is not None
        after = db.query("SELECT COUNT(*) FROM order_notes").rows
        assert after is not None and before is not None
        assert after[0][0] == before[0][0] - written.rows_affected
        with pytest.raises(PermissionDeniedError):
            env.db("seed").query("DELETE FROM order_notes", read_only=False)


async def test_bad_sql_raises_database_error_with_the_database_message(afleet: AsyncFleet) -> None:
    env = await afleet.make("orderdesk")
    try:
        with pytest.raises(DatabaseError) as caught:
            await env.db().query("SELECT nope FROM no_such_table")
        assert caught.value.message == "no such table: no_such_table"
        assert caught.value.sql == "SELECT nope FROM no_such_table" and caught.value.database == "current"
        with pytest.raises(DatabaseError, match=r"UNIQUE constraint failed: customers\.email"):
            await env.db().query(
                "UPDATE customers SET email = (SELECT email FROM customers WHERE id = 2) WHERE id = 1",
                read_only=False,
            )
    finally:
        await env.close()
