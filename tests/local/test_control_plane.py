"""The local control plane over HTTP, through the generated clients: environments,
instances (lifecycle, idempotency, TTL), tasks, remote verifier execution, and
state surviving a restart."""

from __future__ import annotations

import asyncio
import base64
import uuid
from pathlib import Path

import pytest
from _waits import PATIENCE, wait_until

from fleet_local import LocalFleet
from fleet_sdk import (
    BadRequestError,
    ConflictError,
    EnvNotFoundError,
    NotFoundError,
    UnprocessableEntityError,
    VersionNotFoundError,
)
from fleet_sdk._client import Fleet
from fleet_sdk.types import env_instance as models
from fleet_sdk.verifiers import bundle_sha256, bundle_verifier

ENV = "orderdesk"
EMAIL_TASK = "orderdesk-update-customer-email"
COUNT_TASK = "orderdesk-count-pending-orders"


def _request(
    code: str,
    instance_id: str,
    *,
    key: str = "adhoc",
    final_answer: object = None,
    timeout: int = int(PATIENCE),
    with_bundle: bool = True,
) -> models.VerifiersExecuteRequest:
    return models.VerifiersExecuteRequest(
        key=key,
        sha256=bundle_sha256(code),
        args=models.VerifierArgs(instance_id=instance_id, final_answer=final_answer),
        function_name="verify",
        timeout=timeout,
        bundle=base64.b64encode(bundle_verifier(code)).decode() if with_bundle else None,
    )


# ---------------------------------------------------------------- environments


def test_list_and_get_envs(fleet: Fleet) -> None:
    envs = {env.env_key: env for env in fleet.api.control_plane.list_envs()}
    assert ENV in envs
    info = fleet.api.control_plane.get_env(ENV)
    assert info.default_version == "v1.0.0"
    assert info.versions is not None and "v1.0.0" in info.versions
    with pytest.raises(EnvNotFoundError):
        fleet.api.control_plane.get_env("no-such-env")


# ---------------------------------------------------------------- instances


def test_instance_lifecycle(fleet: Fleet, local: LocalFleet) -> None:
    cp = fleet.api.control_plane
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    inst = cp.create_instance(
        models.InstanceRequest(
            env_key=ENV, env_version="1.0.0", data_version="1.0.0", run_id=run_id, region="us-west-1"
        )
    )
    assert inst.version == "v1.0.0" and inst.data_version == "v1.0.0"
    assert inst.status == "running" and inst.run_id == run_id and inst.region == "us-west-1"
    root = f"{local.base_url}/instances/{inst.instance_id}/"
    assert inst.urls.root == root and inst.urls.app == [root]
    assert inst.urls.manager.api == root + "api/v1/env"
    assert inst.urls.health == root + "api/v1/env/health"
    assert inst.env_variables and "CURRENT_DATE" in inst.env_variables

    assert cp.get_instance(inst.instance_id).instance_id == inst.instance_id
    other = cp.create_instance(models.InstanceRequest(env_key=ENV, run_id=run_id))
    listed = cp.list_instances(run_id=run_id)
    assert {i.instance_id for i in listed} == {inst.instance_id, other.instance_id}
    assert [i.instance_id for i in cp.list_instances(run_id=run_id, region="us-west-1")] == [inst.instance_id]

    beat = cp.heartbeat_instance(inst.instance_id, models.HeartbeatRequest())
    assert beat.success and beat.instance_id == inst.instance_id
    assert beat.deadline_timestamp is not None and beat.last_heartbeat is not None
    assert beat.deadline_timestamp > beat.last_heartbeat.timestamp()

    gone = cp.delete_instance(inst.instance_id)
    assert gone.status == "terminated" and gone.terminated_at is not None
    assert cp.delete_instance(inst.instance_id).status == "terminated"  # repeat delete is fine
    assert cp.get_instance(inst.instance_id).status == "terminated"
    assert [i.instance_id for i in cp.list_instances(run_id=run_id, status="running")] == [other.instance_id]
    with pytest.raises(NotFoundError) as err:
        cp.heartbeat_instance(inst.instance_id, models.HeartbeatRequest())
    assert err.value.code == "instance_not_found"
    with pytest.raises(NotFoundError) as err:
        fleet.api.manager(inst.urls.manager.api).manager_health()
    assert err.value.code == "instance_not_found"
    cp.delete_instance(other.instance_id)


def test_unknown_env_version_and_region(fleet: Fleet) -> None:
    """A create naming an unknown env, version or region is a 400 worded as the public SDK reads it
    (its classes come from the message; ours from ``code``)."""
    with pytest.raises(EnvNotFoundError) as err:
        fleet.api.control_plane.create_instance(models.InstanceRequest(env_key="no-such-env"))
    assert (err.value.status_code, err.value.retryable) == (400, False)
    assert str(err.value.body["detail"]).startswith("Environment 'no-such-env' not found")
    with pytest.raises(VersionNotFoundError) as version:
        fleet.api.control_plane.create_instance(models.InstanceRequest(env_key=ENV, env_version="9.9.9"))
    assert version.value.status_code == 400
    assert str(version.value.body["detail"]).startswith(f"Version 'v9.9.9' not found for env '{ENV}'")
    with pytest.raises(BadRequestError) as region:
        fleet.api.control_plane.create_instance(models.InstanceRequest(env_key=ENV, region="mars-1"))
    assert region.value.code == "region_not_supported"
    regions = [r.root for r in fleet.api.control_plane.list_regions()]
    assert region.value.body["detail"] == f"Region mars-1 not supported. Please use {regions}"
    with pytest.raises(EnvNotFoundError) as path:  # a path naming nothing stays a 404
        fleet.api.control_plane.get_env("no-such-env")
    assert path.value.status_code == 404
    with pytest.raises(NotFoundError) as missing:
        fleet.api.control_plane.get_instance("inst_missing")
    assert missing.value.code == "instance_not_found"


def test_validation_error_names_the_field(fleet: Fleet) -> None:
    with pytest.raises(UnprocessableEntityError) as err:
        fleet.api.control_plane.create_instance(models.InstanceRequest.model_construct())
    assert isinstance(err.value.body, dict)
    assert ["body", "env_key"] in [issue["loc"] for issue in err.value.body["detail"]]


def test_idempotency_key(fleet: Fleet) -> None:
    cp = fleet.api.control_plane
    key = f"idem-{uuid.uuid4()}"
    first = cp.create_instance(models.InstanceRequest(env_key=ENV, run_id="idem"), idempotency_key=key)
    again = cp.create_instance(models.InstanceRequest(env_key=ENV, run_id="idem"), idempotency_key=key)
    assert again.instance_id == first.instance_id
    with pytest.raises(ConflictError):
        cp.create_instance(models.InstanceRequest(env_key=ENV, run_id="other"), idempotency_key=key)
    cp.delete_instance(first.instance_id)


def test_a_repeated_request_id_creates_one_instance(fleet: Fleet) -> None:
    """Regression: two creates with one ``X-Request-ID`` made two instances; a repeat is now a 409
    ``duplicate_request_id`` naming the first, unless its ``Idempotency-Key`` replays it."""
    cp = fleet.api.control_plane
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    request = models.InstanceRequest(env_key=ENV, run_id=run_id)
    request_id = str(uuid.uuid4())
    first = cp.create_instance(request, x_request_id=request_id)
    with pytest.raises(ConflictError) as repeat:
        cp.create_instance(request, x_request_id=request_id)
    assert repeat.value.code == "duplicate_request_id" and repeat.value.request_id == request_id
    assert repeat.value.body["detail"]["instance_id"] == first.instance_id
    assert [i.instance_id for i in cp.list_instances(run_id=run_id)] == [first.instance_id]

    # Both headers repeated, as our client's retries of one call send them: the key replays.
    key, both = f"idem-{uuid.uuid4()}", str(uuid.uuid4())
    made = cp.create_instance(request, idempotency_key=key, x_request_id=both)
    assert cp.create_instance(request, idempotency_key=key, x_request_id=both) == made

    # A create that failed keeps nothing: its id may make an instance afterwards.
    failed = str(uuid.uuid4())
    with pytest.raises(EnvNotFoundError):
        cp.create_instance(models.InstanceRequest(env_key="no-such-env"), x_request_id=failed)
    later = cp.create_instance(request, x_request_id=failed)
    assert sorted(i.instance_id for i in cp.list_instances(run_id=run_id)) == sorted(
        [first.instance_id, made.instance_id, later.instance_id]
    )
    cp.delete_instances_batch(run_id=run_id)


# ---------------------------------------------------------------- tasks


def test_tasks_list_import_get_update(fleet: Fleet) -> None:
    cp = fleet.api.control_plane
    bundled = cp.list_tasks(env_key=ENV)
    assert bundled.total == len(bundled.tasks) >= 5
    assert all(t.env_key == ENV and t.verifier_code for t in bundled.tasks)
    picked = cp.list_tasks(task_keys=[EMAIL_TASK, COUNT_TASK])
    assert sorted(t.task_key for t in picked.tasks) == sorted([EMAIL_TASK, COUNT_TASK])
    team = cp.get_account().team_id
    assert cp.list_tasks(env_key=ENV, team_id=team) == bundled
    assert cp.list_tasks(env_key=ENV, team_id=f"not-{team}").total == 0  # regression: was ignored

    key = f"imported-{uuid.uuid4().hex[:8]}"
    project = f"proj-{uuid.uuid4().hex[:6]}"
    task = models.TaskRequest(
        task_key=key,
        prompt="Say hi.",
        env_key=ENV,
        data_key=ENV,
        data_version="v1.0.0",
        # Verifier ids are content-addressed: code of its own, or another test's verifier of the
        # same text on the shared server answers get_verifier with that test's key.
        verifier_code=f"def verify(env, final_answer=None):\n    return 1.0  # {key}\n",
    )
    stored = cp.import_task(task, project_key=project, idempotency_key=f"task-{key}")
    assert stored.task_key == key and stored.task_modality == "tool_use"
    # The verifier as the orchestrator carries it, answered by get_verifier too.
    assert stored.verifier is not None and stored.verifier.code == task.verifier_code
    assert stored.verifier.sha256 == bundle_sha256(str(task.verifier_code))
    assert (stored.verifier.verifier_id, stored.verifier.key) == (stored.verifier_id, key)
    assert cp.get_verifier(str(stored.verifier_id)) == stored.verifier
    assert cp.import_task(task, project_key=project, idempotency_key=f"task-{key}").task_key == key
    with pytest.raises(ConflictError):
        cp.import_task(task, project_key=project)
    assert [t.task_key for t in cp.list_tasks(project_key=project).tasks] == [key]
    assert key in [t.task_key for t in cp.list_tasks(data_id=ENV, data_version="1.0.0").tasks]

    assert cp.get_task(key).prompt == "Say hi."
    updated = cp.update_task(
        key, models.TaskUpdateRequest(prompt="Say bye.", metadata={"difficulty": "easy"})
    )
    assert updated.prompt == "Say bye." and updated.metadata == {"difficulty": "easy"}
    assert updated.verifier_code == task.verifier_code  # left out, so kept
    with pytest.raises(NotFoundError):
        cp.get_task("no-such-task")


# ---------------------------------------------------------------- verifiers


def test_bundled_task_verifier_fails_then_passes(fleet: Fleet, instance: models.InstanceResponse) -> None:
    cp = fleet.api.control_plane
    code = cp.get_task(EMAIL_TASK).verifier_code
    assert code is not None
    # Known by (key, sha256) through the task: no bundle needed.
    request = _request(code, instance.instance_id, key=EMAIL_TASK, with_bundle=False)
    failed = cp.execute_verifier(request)
    assert failed.success and failed.result == 0 and failed.execution_id
    assert "not updated" in (failed.stdout or "")

    manager = fleet.api.manager(instance.urls.manager.api)
    manager.query_database(
        "current",
        models.QueryRequest(
            query="UPDATE customers SET email = ? WHERE name = ?",
            args=["grace.kim@newmail.example", "Grace Kim"],
            read_only=False,
        ),
    )
    passed = manager.execute_verifier_function(request)  # the instance's own endpoint
    assert passed.success and passed.result == 1 and passed.error is None
    assert passed.execution_id != failed.execution_id


def test_answer_task_verifier(fleet: Fleet, instance: models.InstanceResponse) -> None:
    cp = fleet.api.control_plane
    code = cp.get_task(COUNT_TASK).verifier_code
    assert code is not None
    manager = fleet.api.manager(instance.urls.manager.api)
    count = manager.query_database(
        "seed", models.QueryRequest(query="SELECT COUNT(*) FROM orders WHERE status = 'pending'")
    ).rows
    assert count is not None
    right = cp.execute_verifier(
        _request(
            code,
            instance.instance_id,
            key=COUNT_TASK,
            final_answer=f"There are {count[0][0]} pending orders.",
        )
    )
    wrong = cp.execute_verifier(_request(code, instance.instance_id, key=COUNT_TASK, final_answer="none"))
    assert (right.success, right.result) == (True, 1)
    assert (wrong.success, wrong.result) == (True, 0)


def test_unknown_code_needs_bundle(fleet: Fleet, instance: models.InstanceResponse) -> None:
    cp = fleet.api.control_plane
    code = f"def verify(env, final_answer=None):\n    return 0.5  # {uuid.uuid4()}\n"
    key = f"adhoc-{uuid.uuid4().hex[:6]}"
    with pytest.raises(NotFoundError):
        cp.execute_verifier(_request(code, instance.instance_id, key=key, with_bundle=False))
    assert cp.execute_verifier(_request(code, instance.instance_id, key=key)).result == 0.5
    # Stored now: the same (key, sha256) runs without the bundle.
    assert cp.execute_verifier(_request(code, instance.instance_id, key=key, with_bundle=False)).result == 0.5
    with pytest.raises(NotFoundError) as err:
        cp.execute_verifier(_request(code, "inst_missing", key=key))
    assert err.value.code == "instance_not_found"


FAULTS = {
    "syntax_error": "def verify(env, final_answer=None)\n    return 1\n",
    "no_entry_point": "def helper_a():\n    return 1\n\ndef helper_b():\n    return 2\n",
    "exception": "def verify(env, final_answer=None):\n    return 1 / 0\n",
    "timeout": "def verify(env, final_answer=None):\n    while True:\n        pass\n",
    "memory_limit": "def verify(env, final_answer=None):\n    blob = bytearray(2**30)\n    return 1\n",
}


async def test_verifier_faults_are_structured(
    local: LocalFleet, fleet: Fleet, instance: models.InstanceResponse
) -> None:
    async with local.async_fleet() as client:
        cp = client.api.control_plane
        outcomes = await asyncio.gather(
            *(
                cp.execute_verifier(
                    _request(code, instance.instance_id, timeout=2 if kind == "timeout" else int(PATIENCE))
                )
                for kind, code in FAULTS.items()
            )
        )
    # A raising verifier's error.type is the exception's class name, as the platform reports it and
    # the public SDK reads it; it was "exception".
    wire_type = {**{kind: kind for kind in FAULTS}, "exception": "ZeroDivisionError"}
    for kind, outcome in zip(FAULTS, outcomes, strict=True):
        assert outcome.success is False, kind
        assert outcome.error is not None and outcome.error.type == wire_type[kind], (kind, outcome.error)
        assert outcome.error.message and outcome.execution_id
    assert "helper_a" in (outcomes[1].error.message if outcomes[1].error else "")


# ---------------------------------------------------------------- TTL and restart


def test_ttl_expiry_and_restart(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with LocalFleet(data_dir, reaper_interval=0.2, s3=False) as server, server.fleet() as client:
        cp = client.api.control_plane
        short = cp.create_instance(models.InstanceRequest(env_key=ENV, ttl_seconds=1))
        kept = cp.create_instance(models.InstanceRequest(env_key=ENV, ttl_seconds=600))
        cp.import_task(models.TaskRequest(task_key="survivor", prompt="p", env_key=ENV))
        wait_until(
            lambda: cp.get_instance(short.instance_id).status == "terminated",
            "the reaper terminated the expired instance",
        )
        assert cp.get_instance(kept.instance_id).status == "running"
        assert not (data_dir / "instances" / short.instance_id).exists()
    with LocalFleet(data_dir, s3=False) as server, server.fleet() as client:
        cp = client.api.control_plane
        assert cp.get_task("survivor").prompt == "p"
        assert cp.get_instance(short.instance_id).status == "terminated"
        revived = cp.get_instance(kept.instance_id)
        assert revived.status == "running"
        assert revived.urls.root.startswith(server.base_url)


# ---------------------------------------------------------------- endpoints the public SDK calls


def test_regions_account_and_runs(fleet: Fleet) -> None:
    cp = fleet.api.control_plane
    assert [region.root for region in cp.list_regions()] == ["local", "us-west-1", "us-east-1", "eu-west-2"]
    run_id = f"run-{uuid.uuid4().hex[:8]}"
    before = cp.get_account().instance_count
    created = [cp.create_instance(models.InstanceRequest(env_key=ENV, run_id=run_id)) for _ in range(2)]
    assert cp.get_account().instance_count == before + 2
    (run,) = [r for r in cp.list_runs(active="all") if r.run_id == run_id]
    assert (run.running_count, run.total_count) == (2, 2)
    assert run.first_created_at <= run.last_created_at

    with pytest.raises(BadRequestError):
        cp.delete_instances_batch()  # no filter would mean every instance
    deleted = cp.delete_instances_batch(run_id=run_id)
    assert sorted(i.instance_id for i in deleted) == sorted(i.instance_id for i in created)
    assert {i.status for i in deleted} == {"terminated"}
    assert run_id not in {r.run_id for r in cp.list_runs()}  # active runs only by default
    assert [r.running_count for r in cp.list_runs(active="inactive") if r.run_id == run_id] == [0]
    assert cp.delete_instances_batch(run_id=run_id) == []


def test_verifier_bundles_by_sha_and_by_id(fleet: Fleet, instance: models.InstanceResponse) -> None:
    cp = fleet.api.control_plane
    code = f"def verify(env, final_answer=None):\n    return 1.0  # {uuid.uuid4().hex}\n"
    assert cp.check_verifier_bundle(sha256=bundle_sha256(code)).success is False
    ran = cp.execute_verifier(_request(code, instance.instance_id, key="by-id"))
    assert ran.success and ran.bundle_cache_hit is False and isinstance(ran.execution_time_ms, int)
    found = cp.check_verifier_bundle(sha256=bundle_sha256(code))
    assert (found.success, found.key, found.display_src) == (True, "by-id", code)
    assert ran.verifier_id is not None
    stored = cp.get_verifier(ran.verifier_id)
    assert (stored.key, stored.sha256, stored.code) == ("by-id", bundle_sha256(code), code)
    with pytest.raises(NotFoundError):
        cp.get_verifier("ver_missing")
    again = cp.execute_verifier(_request(code, instance.instance_id, key="by-id", with_bundle=False))
    assert again.bundle_cache_hit is True and again.execution_id != ran.execution_id


def test_manager_health_and_no_browser_for_an_ended_instance(fleet: Fleet) -> None:
    instance = fleet.api.control_plane.create_instance(models.InstanceRequest(env_key=ENV))
    assert instance.urls is not None
    manager = fleet.api.manager(instance.urls.manager.api)
    health = manager.manager_health()
    assert health.status == "ok" and health.service and health.timestamp
    fleet.api.control_plane.delete_instance(instance.instance_id)
    with pytest.raises(NotFoundError) as caught:  # the browser is tested in test_instance_resources.py
        manager.describe_browser()
    assert caught.value.code == "instance_not_found"


def test_tasks_accept_the_orchestrators_names(fleet: Fleet) -> None:
    cp = fleet.api.control_plane
    key = f"theirs-{uuid.uuid4().hex[:8]}"
    stored = cp.import_task(
        models.TaskRequest(key=key, prompt="p", environment_id=ENV, version="v1.0.0", verifier_func="x = 1")
    )
    assert (stored.task_key, stored.key, stored.env_key, stored.environment_id) == (key, key, ENV, ENV)
    assert (stored.env_version, stored.version, stored.verifier_code) == ("v1.0.0", "v1.0.0", "x = 1")
    assert stored.team_id == "local" and stored.created_at
    with pytest.raises(BadRequestError, match=r"key \(or task_key\)") as caught:
        cp.import_task(models.TaskRequest(task_key="", prompt="p", environment_id=ENV))
    assert caught.value.code == "bad_request"


def test_snapshot_and_restore(fleet: Fleet) -> None:
    cp = fleet.api.control_plane
    source = cp.create_instance(models.InstanceRequest(env_key=ENV))
    target = cp.create_instance(models.InstanceRequest(env_key=ENV))
    assert source.urls is not None and target.urls is not None
    count = "SELECT count(*) FROM orders"

    def orders(instance: models.InstanceResponse) -> int:
        assert instance.urls is not None
        rows = fleet.api.manager(instance.urls.manager.api).query_database(
            "current", models.QueryRequest(query=count)
        )
        return int((rows.rows or [[0]])[0][0])

    seeded = orders(source)
    write = models.QueryRequest(
        query="DELETE FROM orders WHERE id IN (SELECT id FROM orders LIMIT 1)", read_only=False
    )
    fleet.api.manager(source.urls.manager.api).query_database("current", write)
    backup = cp.snapshot_instance(source.instance_id)
    assert (backup.success, backup.instance_id) == (True, source.instance_id)
    assert backup.s3_key.endswith(f"{backup.backup_id}.db")

    restored = cp.restore_instance(target.instance_id, models.RestoreRequest(backup_id=backup.backup_id))
    assert (restored.source_instance_id, restored.target_instance_id) == (
        source.instance_id,
        target.instance_id,
    )
    assert orders(target) == seeded - 1

    fleet.api.manager(source.urls.manager.api).reset_instance(models.ResetRequest())
    assert orders(source) == seeded
    latest = cp.restore_instance(source.instance_id, models.RestoreRequest())  # its own latest backup
    assert latest.backup_id == backup.backup_id and orders(source) == seeded - 1
    with pytest.raises(NotFoundError):
        cp.restore_instance(target.instance_id, models.RestoreRequest())  # target has no backup of its own
    with pytest.raises(NotFoundError):
        cp.restore_instance(target.instance_id, models.RestoreRequest(backup_id="bkp_missing"))
    for instance in (source, target):
        cp.delete_instance(instance.instance_id)
