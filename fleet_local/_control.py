"""The control plane of ``schemas/env-instance.yaml`` (tag ``control-plane``), except ``/v1/jobs``.

Environments come from the bundled registry; instances live in ``_instances``;
tasks are ``"task"`` documents in the store (the bundled ones are loaded at
startup when absent); verifier runs go through ``_verifier_exec``. POSTs that
create something honour ``Idempotency-Key``: the same key with the same body
returns the first response, with another body answers 409.

The lifespan loads the bundled tasks, builds the seeds and runs the TTL reaper.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

import anyio
from fastapi import APIRouter, Query

from fleet_sdk.types import env_instance as models
from fleet_sdk.verifiers import bundle_sha256

from . import _instances, _s3, _verifier_exec
from ._errors import LocalAPIError, not_found
from ._idempotency import IdempotencyKey, idempotent
from ._request_ids import RequestId, create_once
from ._state import LocalState, iso, new_id

__all__ = ["DEFAULT_PROJECT", "TASK_KIND", "lifespan", "load_bundled_tasks", "router"]

TASK_KIND = "task"
# Bundled tasks ship with the server; they report this fixed creation time.
_BUNDLED_CREATED_AT = "2025-01-01T00:00:00Z"
DEFAULT_PROJECT = "default"
"""Project of tasks imported without ``project_key`` and of the bundled tasks."""

DEFAULT_REAPER_INTERVAL = 5.0

# ---------------------------------------------------------------- tasks


# The orchestrator's names for fields we store under ours (``TaskRequest`` in the schema).
_REQUEST_ALIASES: dict[str, tuple[str, ...]] = {
    "task_key": ("key",),
    "env_key": ("environment_id", "env_id"),
    "env_version": ("version",),
    "data_key": ("data_id",),
    "verifier_code": ("verifier_func",),
}
_TASK_FIELDS = frozenset(models.Task.model_fields)


def _task_verifier(doc: dict[str, Any]) -> models.VerifierData | None:
    """A task's verifier as the stored verifier the public SDK reads (``TaskResponse.verifier``)."""
    code = doc.get("verifier_code") or doc.get("verifier_func")
    if not code:
        return None
    return models.VerifierData(
        verifier_id=_verifier_exec.verifier_id_of(code),
        key=doc["task_key"],
        version=1,
        sha256=bundle_sha256(code),
        code=code,
        created_at=doc.get("created_at") or _BUNDLED_CREATED_AT,
    )


def _task_model(doc: dict[str, Any]) -> models.TaskResponse:
    """A stored task with the orchestrator's names beside ours (``TaskResponse``)."""
    verifier = _task_verifier(doc)
    return models.TaskResponse.model_validate(
        {
            **doc,
            "verifier_func": verifier.code if verifier else None,
            "key": doc["task_key"],
            "environment_id": doc["env_key"],
            "version": doc.get("env_version"),
            "data_id": doc.get("data_key"),
            "team_id": _instances.TEAM_ID,
            "created_at": doc.get("created_at") or _BUNDLED_CREATED_AT,
            "verifier_id": verifier.verifier_id if verifier else None,
            "verifier_sha": verifier.sha256 if verifier else None,
            "verifier": verifier,
        }
    )


def _get_verifier(state: LocalState, verifier_id: str) -> models.VerifierData:
    """A stored bundle by id, else the verifier of the task that has this id.

    Raises:
        LocalAPIError: 404 ``not_found`` when neither has it.
    """
    try:
        return _verifier_exec.get_verifier(state, verifier_id)
    except LocalAPIError as exc:
        if exc.status != 404:
            raise
        for doc in state.store.list(TASK_KIND):
            verifier = _task_verifier(doc)
            if verifier is not None and verifier.verifier_id == verifier_id:
                return verifier
        raise


def _canonical_task(body: models.TaskRequest) -> models.Task:
    """The ``Task`` a request describes, whichever names it used (an empty string counts as absent).

    Raises:
        LocalAPIError: 400 ``bad_request`` naming ``key`` or ``environment_id`` when no spelling of
            it is given (the rule spans fields, so the schema cannot say it: not a 422).
    """
    sent = body.model_dump(mode="json", exclude_none=True)
    for ours, theirs in _REQUEST_ALIASES.items():
        if not sent.get(ours):
            given = next((sent[name] for name in theirs if sent.get(name)), None)
            if given is not None:
                sent[ours] = given
    missing = [
        f"{theirs[0]} (or {ours})"
        for ours, theirs in _REQUEST_ALIASES.items()
        if ours in ("task_key", "env_key") and not sent.get(ours)
    ]
    if missing:
        raise LocalAPIError(
            400, f"the task needs {' and '.join(missing)}", code="bad_request", retryable=False
        )
    return models.Task.model_validate({name: v for name, v in sent.items() if name in _TASK_FIELDS})


def load_bundled_tasks(state: LocalState) -> int:
    """Store every bundled task that is not in the store yet; returns how many were added."""
    added = 0
    for spec in state.environments.values():
        for task in spec.tasks:
            key = task["task_key"]
            if state.store.get(TASK_KIND, key) is None:
                doc = models.Task.model_validate(dict(task)).model_dump(mode="json")
                doc["project_key"] = DEFAULT_PROJECT
                doc["created_at"] = _BUNDLED_CREATED_AT
                state.store.put(TASK_KIND, key, doc)
                added += 1
    return added


def _list_tasks(
    state: LocalState,
    *,
    env_key: str | None,
    task_keys: list[str] | None,
    project_key: str | None,
    team_id: str | None,
    data_id: str | None,
    data_version: str | None,
) -> models.TaskListResponse:
    if team_id is not None and team_id != _instances.TEAM_ID:  # every task here is the local team's
        return models.TaskListResponse(tasks=[], total=0)
    wanted_keys = set(task_keys) if task_keys else None
    version = _instances.normalize_version(data_version)
    tasks = [
        _task_model(doc)
        for doc in state.store.list(TASK_KIND)
        if (env_key is None or doc.get("env_key") == env_key)
        and (wanted_keys is None or doc.get("task_key") in wanted_keys)
        and (project_key is None or doc.get("project_key") == project_key)
        and (data_id is None or doc.get("data_key") == data_id)
        and (version is None or _instances.normalize_version(doc.get("data_version")) == version)
    ]
    return models.TaskListResponse(tasks=tasks, total=len(tasks))


def _import_task(state: LocalState, task: models.Task, project_key: str | None) -> models.TaskResponse:
    if state.store.get(TASK_KIND, task.task_key) is not None:
        raise LocalAPIError(
            409,
            f"task {task.task_key!r} already exists; use PUT /v1/tasks/{task.task_key} to change it",
            code="conflict",
            retryable=False,
        )
    doc = task.model_dump(mode="json")
    doc["project_key"] = project_key or DEFAULT_PROJECT
    doc["created_at"] = iso()
    state.store.put(TASK_KIND, task.task_key, doc)
    return _task_model(doc)


def _update_task(state: LocalState, task_key: str, update: models.TaskUpdateRequest) -> models.TaskResponse:
    changes = {
        name: getattr(update, name)
        for name in update.model_fields_set
        if name in ("prompt", "verifier_code", "metadata") and getattr(update, name) is not None
    }
    doc = state.store.update(TASK_KIND, task_key, **changes)
    if doc is None:
        raise not_found("task", task_key)
    return _task_model(doc)


# ---------------------------------------------------------------- router


def router(state: LocalState) -> APIRouter:
    """Routes of the control plane (environments, instances, tasks, verifiers)."""
    api = APIRouter(tags=["control-plane"])

    # Instance routes come first: ``/v1/env/instances`` must not match ``/v1/env/{env_key}``.
    # The instance routes of an episode (create, delete) are coroutines that hand their file and
    # store work to one worker thread: a ``def`` route with a response model costs FastAPI a
    # second hop, to validate the model it returns in the thread pool too.
    @api.post("/v1/env/instances", response_model=models.InstanceResponse)
    async def create_instance(
        body: models.InstanceRequest, idempotency_key: IdempotencyKey = None, request_id: RequestId = None
    ) -> models.InstanceResponse:
        """Create a running instance of a bundled environment (once per ``Idempotency-Key`` and
        per ``X-Request-ID``; the key's replay goes first)."""
        instance_id = new_id("inst")
        return await anyio.to_thread.run_sync(
            lambda: idempotent(
                state.store,
                scope="create_instance",
                key=idempotency_key,
                payload=body.model_dump(mode="json", exclude_none=True),
                model=models.InstanceResponse,
                create=lambda: create_once(
                    state.store,
                    request_id,
                    instance_id,
                    lambda: _instances.create_instance(state, body, instance_id),
                ),
            )
        )

    @api.get("/v1/env/instances", response_model=list[models.InstanceResponse])
    def list_instances(
        status: Literal["pending", "running", "stopped", "terminated", "error"] | None = None,
        region: str | None = None,
        run_id: str | None = None,
        profile_id: str | None = None,
    ) -> list[models.InstanceResponse]:
        """List instances; filters combine with AND."""
        return _instances.list_instances(
            state, status=status, region=region, run_id=run_id, profile_id=profile_id
        )

    # ``/v1/env/instances/batch`` must come before ``/v1/env/instances/{instance_id}``.
    @api.delete("/v1/env/instances/batch", response_model=list[models.InstanceResponse])
    def delete_instances_batch(
        run_id: str | None = None, profile_id: str | None = None
    ) -> list[models.InstanceResponse]:
        """Terminate every live instance of a run and/or profile (400 without a filter)."""
        return _instances.delete_instances_batch(state, run_id, profile_id)

    @api.get("/v1/env/runs", response_model=list[models.Run])
    def list_runs(
        profile_id: str | None = None, active: Literal["active", "inactive", "all"] | None = None
    ) -> list[models.Run]:
        """Instances grouped by ``run_id``."""
        return _instances.list_runs(state, profile_id, active)

    @api.get("/v1/regions", response_model=list[str])
    async def list_regions() -> list[str]:  # a constant: no worker thread to wait for
        """The regions of the local server."""
        return list(_instances.REGIONS)

    @api.get("/v1/discovery", response_model=models.Discovery)
    async def get_discovery() -> models.Discovery:
        """This one server serves every surface; screenshots go to its S3 endpoint, if on."""
        screenshots = None
        if state.s3_url is not None:
            screenshots = models.ScreenshotBucket(
                endpoint_url=state.s3_url,
                bucket=_s3.BUCKET,
                region=_s3.REGION,
                access_key_id=_s3.PRESIGN_ACCESS_KEY,
                public_url_base=f"{state.s3_url}/{_s3.BUCKET}",
            )
        return models.Discovery(
            platform_url=state.public_url, browser_url=state.public_url, screenshots=screenshots
        )

    @api.get("/v1/account", response_model=models.AccountResponse)
    def get_account() -> models.AccountResponse:
        """The local team and its live instance count."""
        return _instances.account(state)

    @api.get("/v1/env/instances/{instance_id}", response_model=models.InstanceResponse)
    def get_instance(instance_id: str) -> models.InstanceResponse:
        """One instance."""
        return _instances.get_instance(state, instance_id)

    @api.delete("/v1/env/instances/{instance_id}", response_model=models.InstanceResponse)
    async def delete_instance(instance_id: str) -> models.InstanceResponse:
        """Terminate an instance (idempotent)."""
        return await anyio.to_thread.run_sync(_instances.delete_instance, state, instance_id)

    @api.post("/v1/env/instances/{instance_id}/heartbeat", response_model=models.HeartbeatResponse)
    def heartbeat_instance(instance_id: str, body: models.HeartbeatRequest) -> models.HeartbeatResponse:
        """Push an instance's deadline back."""
        return _instances.heartbeat(state, instance_id)

    @api.post("/v1/env/instances/{instance_id}/snapshot", response_model=models.SnapshotResponse)
    def snapshot_instance(instance_id: str) -> models.SnapshotResponse:
        """Back up an instance's ``current`` database."""
        return _instances.snapshot_instance(state, instance_id)

    @api.post("/v1/env/instances/{instance_id}/restore", response_model=models.RestoreResponse)
    def restore_instance(instance_id: str, body: models.RestoreRequest) -> models.RestoreResponse:
        """Restore a backup (the instance's latest when none is named) into ``current``."""
        return _instances.restore_instance(state, instance_id, body.backup_id)

    @api.get("/v1/env/", response_model=list[models.Environment])
    def list_envs() -> list[models.Environment]:
        """Every bundled environment."""
        return [_instances.env_info(state, key) for key in sorted(state.environments)]

    @api.get("/v1/env/{env_key}", response_model=models.Environment)
    def get_env(env_key: str) -> models.Environment:
        """One bundled environment."""
        return _instances.env_info(state, env_key)

    @api.get("/v1/tasks", response_model=models.TaskListResponse)
    def list_tasks(
        *,
        env_key: str | None = None,
        task_keys: Annotated[list[str] | None, Query()] = None,
        project_key: str | None = None,
        team_id: str | None = None,
        data_id: str | None = None,
        data_version: str | None = None,
    ) -> models.TaskListResponse:
        """Task configs matching every given filter."""
        return _list_tasks(
            state,
            env_key=env_key,
            task_keys=task_keys,
            project_key=project_key,
            team_id=team_id,
            data_id=data_id,
            data_version=data_version,
        )

    @api.post("/v1/tasks", response_model=models.TaskResponse)
    def import_task(
        body: models.TaskRequest, project_key: str | None = None, idempotency_key: IdempotencyKey = None
    ) -> models.TaskResponse:
        """Store one task config (409 when the key exists)."""
        task = _canonical_task(body)
        payload = {"task": task.model_dump(mode="json", exclude_none=True), "project_key": project_key}
        return idempotent(
            state.store,
            scope="import_task",
            key=idempotency_key,
            payload=payload,
            model=models.TaskResponse,
            create=lambda: _import_task(state, task, project_key),
        )

    @api.get("/v1/tasks/{task_key}", response_model=models.TaskResponse)
    def get_task(task_key: str) -> models.TaskResponse:
        """One task config."""
        doc = state.store.get(TASK_KIND, task_key)
        if doc is None:
            raise not_found("task", task_key)
        return _task_model(doc)

    @api.put("/v1/tasks/{task_key}", response_model=models.TaskResponse)
    def update_task(task_key: str, body: models.TaskUpdateRequest) -> models.TaskResponse:
        """Change a task's prompt, verifier code and/or metadata (fields left out are kept)."""
        return _update_task(state, task_key, body)

    @api.get("/v1/verifiers/check", response_model=models.VerifiersCheckResponse)
    def check_verifier_bundle(sha256: str) -> models.VerifiersCheckResponse:
        """Whether a bundle with this sha256 is stored."""
        return _verifier_exec.check_bundle(state, sha256)

    @api.get("/v1/verifiers/{verifier_id}", response_model=models.VerifierData)
    def get_verifier(verifier_id: str) -> models.VerifierData:
        """A stored verifier bundle, or a task's verifier, by id."""
        return _get_verifier(state, verifier_id)

    @api.post("/v1/verifiers/execute", response_model=models.VerifiersExecuteResponse)
    async def execute_verifier(body: models.VerifiersExecuteRequest) -> models.VerifiersExecuteResponse:
        """Run a verifier against the instance named in ``args.instance_id``."""
        return await _verifier_exec.execute_verifier(state, body, None, keyed=True)

    return api


# ---------------------------------------------------------------- lifespan


def _prepare(state: LocalState) -> None:
    _verifier_exec.clear_scratch(state)
    load_bundled_tasks(state)
    for spec in state.environments.values():
        for version in spec.versions:
            _instances.ensure_seed(state, spec.env_key, version)


@contextlib.asynccontextmanager
async def lifespan(state: LocalState) -> AsyncIterator[None]:
    """Load the bundled tasks and seeds, then run the TTL reaper until shutdown."""
    await anyio.to_thread.run_sync(_prepare, state)
    interval = float(state.settings.reaper_interval or DEFAULT_REAPER_INTERVAL)
    reaper = asyncio.create_task(_instances.reap_forever(state, interval), name="fleet-local-reaper")
    try:
        yield
    finally:
        reaper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reaper
