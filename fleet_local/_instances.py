"""The lifecycle of local environment instances.

An instance is a folder ``<data_dir>/instances/<id>/`` holding two SQLite files,
``seed.db`` (the data it started from, read-only) and ``current.db`` (the live
data), plus one ``"instance"`` record in the store (``_records.InstanceRecord``): the
``InstanceResponse`` the API answers with, and beside it the server's private fields (the
TTL bookkeeping), which no response carries.

Everything here is synchronous (file and SQLite work): routes are declared
``def`` so FastAPI runs them in its thread pool, and async callers (the job
harness) use ``anyio.to_thread.run_sync``. The one coroutine is :func:`reap_forever`,
the TTL reaper the control plane's lifespan runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import os
import shutil
import sqlite3
import stat
import time
from pathlib import Path
from typing import Literal

import anyio

from fleet_sdk.protocol import normalize_version
from fleet_sdk.types import env_instance as models

from . import _memory
from ._action_log import ACTION_LOG
from ._action_log import create as create_action_log
from ._errors import LocalAPIError, not_found
from ._instance_dbs import WRITER_PRAGMA
from ._records import InstancePrivate, InstanceRecord
from ._state import LocalState, iso, new_id, utcnow
from ._store import Records
from .environments import EnvironmentDefinition

__all__ = [
    "DATABASES",
    "REGIONS",
    "SQLITE_RESOURCES",
    "account",
    "create_instance",
    "database_path",
    "delete_instance",
    "delete_instances_batch",
    "ensure_seed",
    "env_info",
    "environment",
    "get_instance",
    "heartbeat",
    "instance_records",
    "list_instances",
    "list_runs",
    "normalize_version",
    "open_db",
    "reap_expired",
    "reap_forever",
    "require_live",
    "reset_instance",
    "restore_instance",
    "snapshot_instance",
]

_log = logging.getLogger(__name__)

KIND = "instance"
DATABASES: tuple[str, ...] = ("seed", "current")
"""The data of every instance: ``seed`` (read-only) and ``current`` (read-write)."""
SQLITE_RESOURCES: tuple[str, ...] = (*DATABASES, ACTION_LOG)
"""Every SQLite resource of an instance: its data, and the log of actions taken on it (read-only)."""

DatabaseName = Literal["seed", "current"]
InstanceStatus = Literal["pending", "running", "stopped", "terminated", "error"]

TEAM_ID = "local"
DEFAULT_REGION = "local"
REGIONS: tuple[str, ...] = (DEFAULT_REGION, "us-west-1", "us-east-1", "eu-west-2")
"""The regions the local server accepts: its own, and the orchestrator's, so code written for it
runs unchanged (every instance runs on this machine whatever its region)."""
# The local server does not cap instances; the account reports a large, fixed limit.
INSTANCE_LIMIT = 1000
# Without an explicit TTL, an instance created with ``heartbeat_interval`` is reclaimed after this
# many intervals without a heartbeat.
MISSED_HEARTBEATS = 3

# ---------------------------------------------------------------- helpers


def instance_records(state: LocalState) -> Records[InstanceRecord]:
    """The store's instance documents as typed records.

    Every write of an instance's record holds its named lock (``state.store.locks.hold(KIND,
    instance_id)``) from the read it changes to the write.

    Args:
        state: Server state.
    """
    return Records(state.store, KIND, InstanceRecord)


def environment(state: LocalState, env_key: str, *, status: int = 400) -> EnvironmentDefinition:
    """A bundled environment by key.

    Args:
        state: Server state.
        env_key: The key.
        status: The status of the refusal: 400 for a key named in a request body (what the public
            SDK reads as an unknown environment, by the message's form), 404 for one in a path.

    Raises:
        LocalAPIError: ``env_not_found`` naming the environments there are.
    """
    spec = state.environments.get(env_key)
    if spec is None:
        available = ", ".join(sorted(state.environments)) or "none"
        raise LocalAPIError(
            status,
            f"Environment {env_key!r} not found (available: {available})",
            code="env_not_found",
            retryable=False,
        )
    return spec


def env_info(state: LocalState, env_key: str) -> models.Environment:
    """The ``Environment`` of a bundled environment (``GET /v1/env/{env_key}``).

    Raises:
        LocalAPIError: 404 ``env_not_found`` naming the environments there are.
    """
    spec = environment(state, env_key, status=404)
    return models.Environment(
        env_key=spec.env_key,
        name=spec.name,
        description=spec.description,
        default_version=spec.default_version,
        versions={version: f"{spec.name} {version}" for version in spec.versions},
    )


def ensure_seed(state: LocalState, env_key: str, version: str) -> Path:
    """Build the seed database of an environment version once and return its path.

    Thread-safe: concurrent callers for the same version wait for one build. A seed built from
    different SQL (the bundled environment changed since) is rebuilt.
    """
    spec = state.environments[env_key]
    path = state.seed_path(env_key, version)
    digest = _seed_digest(spec)
    # Checked against its marker once per process: this server alone builds its data dir's
    # seeds (it holds the dir), so later creates need only see that the file is still there.
    known = (str(path), digest)
    if known in _CHECKED_SEEDS and path.is_file():
        return path
    marker = path.with_name(path.name + ".sha256")
    with state.store.locks.hold("seed", env_key, version):
        fresh = path.is_file() and marker.is_file() and marker.read_text().strip() == digest
        if not fresh:
            spec.build_seed(path)
            marker.write_text(digest + "\n")
        # Read-only, so instances can link it as their seed.db (``_link_seed``). A rebuild
        # replaces the file (a new inode), never writes into the one instances link.
        with contextlib.suppress(OSError):  # not ours to change: instances copy it instead
            os.chmod(path, 0o444)
        _CHECKED_SEEDS.add(known)
    return path


_CHECKED_SEEDS: set[tuple[str, str]] = set()
"""(seed path, digest of its SQL) of the seeds :func:`ensure_seed` found or built current."""


@functools.cache
def _seed_digest(spec: EnvironmentDefinition) -> str:
    return hashlib.sha256(spec.seed_sql.encode()).hexdigest()


def _copy_seed(seed: Path, target: Path, *, read_only: bool) -> None:
    """Copy the seed database to ``target`` as ``shutil.copyfile`` does (in the kernel), without
    its checks for special files, which a seed and a new instance's files are not; a read-only
    copy is made 0444 through its open descriptor."""
    with open(seed, "rb") as source:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
        try:
            if read_only:
                os.fchmod(fd, 0o444)
            try:
                offset, size = 0, os.fstat(source.fileno()).st_size
                while offset < size and (sent := os.sendfile(fd, source.fileno(), offset, size - offset)):
                    offset += sent
            except OSError:  # a file system without sendfile: copy through this process
                os.ftruncate(fd, 0)
                os.lseek(fd, 0, os.SEEK_SET)
                source.seek(0)
                while chunk := source.read(1024 * 1024):
                    os.write(fd, chunk)
        finally:
            os.close(fd)


def _link_seed(seed: Path, target: Path) -> None:
    """Make ``target`` the instance's read-only ``seed.db``: a hard link to the built seed when
    it is read-only (0444) and on the same file system, else a 0444 copy (``_copy_seed``).

    A link allocates no inode and copies nothing. Nothing writes an instance's seed (it is opened
    ``mode=ro``, and bound read-only into the verifier's jail), and a rebuild replaces the built
    seed instead of writing into it, so a link reads the same bytes a copy would.
    """
    # Never write through an old link: a copy onto it (``O_TRUNC``) would empty the shared seed.
    target.unlink(missing_ok=True)
    if stat.S_IMODE(seed.stat().st_mode) == 0o444:
        try:
            os.link(seed, target)
            return
        except OSError:  # another file system, the link limit, no hard links here
            pass
    _copy_seed(seed, target, read_only=True)


def _to_model(state: LocalState, record: InstanceRecord) -> models.InstanceResponse:
    # URLs are rebuilt from the current public URL: a restarted server may listen elsewhere.
    # A copy: the record's wire model carries no private field, so neither does the response.
    return record.instance.model_copy(update={"urls": _urls(state, record.instance.instance_id)})


def _urls(state: LocalState, instance_id: str) -> models.InstanceURLs:
    root = state.instance_root(instance_id)
    manager = root + "api/v1/env"
    return models.InstanceURLs(
        root=root,
        app=[root],
        api=manager,
        health=manager + "/health",
        api_docs=manager + "/docs",
        manager=models.ManagerURLs(
            api=manager,
            docs=manager + "/docs",
            reset=manager + "/reset",
            diff=manager + "/diff/structured",
            snapshot=manager + "/snapshot",
            execute_verifier_function=manager + "/execute_verifier_function",
            execute_verifier_function_with_upload=manager + "/execute_verifier_function_with_upload",
        ),
    )


def _window(ttl_seconds: int, heartbeat_interval: int | None, explicit_ttl: bool) -> int:
    """Seconds an instance lives after its last heartbeat (or creation)."""
    if heartbeat_interval is None:
        return ttl_seconds
    by_heartbeat = heartbeat_interval * MISSED_HEARTBEATS
    return min(ttl_seconds, by_heartbeat) if explicit_ttl else by_heartbeat


def _load(state: LocalState, instance_id: str) -> InstanceRecord:
    # Store.read waits for no store call: an instance's /health and every manager route's lookup
    # answer while a slow one holds the store's lock.
    record = instance_records(state).read(instance_id)
    if record is None:
        raise not_found("instance", instance_id, code="instance_not_found")
    return record


def require_live(state: LocalState, instance_id: str) -> InstanceRecord:
    """The stored record of an instance that is not terminated.

    Raises:
        LocalAPIError: 404 ``instance_not_found`` when unknown or terminated.
    """
    record = _load(state, instance_id)
    if record.instance.status == "terminated":
        raise LocalAPIError(
            404, f"instance {instance_id!r} is terminated", code="instance_not_found", retryable=False
        )
    return record


def database_path(state: LocalState, instance_id: str, name: str) -> Path:
    """Path of an instance's ``seed``, ``current`` or ``action_log`` database (the instance must be live).

    Raises:
        LocalAPIError: 404 ``instance_not_found``, or 404 ``not_found`` for another name.
    """
    require_live(state, instance_id)
    if name not in SQLITE_RESOURCES:
        raise LocalAPIError(
            404,
            f"no SQLite resource named {name!r}; resources: {', '.join(SQLITE_RESOURCES)}",
            code="not_found",
            retryable=False,
        )
    path = state.instance_dir(instance_id) / f"{name}.db"
    if name == ACTION_LOG and not path.is_file() and path.parent.is_dir():
        create_action_log(path)  # an instance made before action logs existed
    if not path.is_file():
        raise LocalAPIError(
            404,
            f"instance {instance_id!r} has no {name} database",
            code="instance_not_found",
            retryable=False,
        )
    return path


# ---------------------------------------------------------------- lifecycle


def create_instance(
    state: LocalState, req: models.InstanceRequest, instance_id: str | None = None
) -> models.InstanceResponse:
    """Create a running instance: resolve the version, copy the seed, store the document.

    Args:
        state: Server state.
        req: The request; ``env_version`` and ``data_version`` get the ``v`` rule.
        instance_id: The new instance's id (``_request_ids`` binds it before the instance
            exists); None picks one.

    Raises:
        LocalAPIError: 400 ``env_not_found`` / ``version_not_found`` / ``region_not_supported``,
            worded as the public SDK reads them (quoted names; ``schemas/env-instance.yaml``).
    """
    spec = environment(state, req.env_key)
    version = normalize_version(req.env_version) or spec.default_version
    if version not in spec.versions:
        raise LocalAPIError(
            400,
            f"Version {version!r} not found for env {req.env_key!r} (available: {', '.join(spec.versions)})",
            code="version_not_found",
            retryable=False,
        )
    if req.region is not None and req.region not in REGIONS:
        raise LocalAPIError(
            400,
            f"Region {req.region} not supported. Please use {list(REGIONS)}",
            code="region_not_supported",
            retryable=False,
        )
    info = env_info(state, req.env_key)
    seed = ensure_seed(state, req.env_key, version)
    instance_id = instance_id or new_id("inst")
    folder = state.instance_dir(instance_id)
    folder.mkdir(parents=True, exist_ok=True)
    _copy_seed(seed, folder / "current.db", read_only=False)
    _link_seed(seed, folder / "seed.db")
    # No request reaches the folder before the record below is stored.
    create_action_log(folder / f"{ACTION_LOG}.db", unseen=True)

    explicit_ttl = req.ttl_seconds is not None
    ttl = req.ttl_seconds if req.ttl_seconds is not None else state.settings.instance_ttl_seconds
    window = _window(ttl, req.heartbeat_interval, explicit_ttl)
    now = utcnow()
    record = InstanceRecord(
        instance=models.InstanceResponse(
            instance_id=instance_id,
            env_key=info.env_key,
            version=version,
            status="running",
            subdomain=instance_id,
            created_at=now,
            updated_at=now,
            terminated_at=None,
            team_id=TEAM_ID,
            region=req.region or DEFAULT_REGION,
            env_variables={**spec.env_variables, **(req.env_variables or {})},
            data_key=req.data_key,
            data_version=normalize_version(req.data_version),
            urls=_urls(state, instance_id),
            health=True,
            run_id=req.run_id,
            profile_id=None,
            heartbeat_interval=req.heartbeat_interval,
            heartbeat_region=req.region or DEFAULT_REGION,
        ),
        private=InstancePrivate(
            window_seconds=window,
            deadline=now.timestamp() + window,
            image_type=req.image_type,
            created_from=req.created_from,
        ),
    )
    record = instance_records(state).put(instance_id, record)
    # Live from here on: the episode's first MCP request finds its environment without a
    # worker-thread hop of its own to read this record back (``_live``).
    state.live_instances.remember(instance_id, record.instance.env_key)
    state.metrics.instances_created.inc()
    return record.instance


def get_instance(state: LocalState, instance_id: str) -> models.InstanceResponse:
    """One instance, whatever its status.

    Raises:
        LocalAPIError: 404 ``instance_not_found``.
    """
    return _to_model(state, _load(state, instance_id))


def list_instances(
    state: LocalState,
    status: str | None = None,
    region: str | None = None,
    run_id: str | None = None,
    profile_id: str | None = None,
) -> list[models.InstanceResponse]:
    """Instances matching every given filter, oldest first."""
    return [
        _to_model(state, record)
        for record in instance_records(state).list()
        if (status is None or record.instance.status == status)
        and (region is None or record.instance.region == region)
        and (run_id is None or record.instance.run_id == run_id)
        and (profile_id is None or record.instance.profile_id == profile_id)
    ]


def delete_instance(
    state: LocalState, instance_id: str, *, reason: Literal["deleted", "expired"] = "deleted"
) -> models.InstanceResponse:
    """Terminate an instance and remove its files; deleting a terminated instance is a no-op.

    Args:
        state: Server state.
        instance_id: The instance.
        reason: Why it ends, as ``/metrics`` counts it (the reaper's are ``expired``).

    Raises:
        LocalAPIError: 404 ``instance_not_found`` for an unknown id.
    """
    with state.store.locks.hold(KIND, instance_id):
        record = _load(state, instance_id)
        if record.instance.status != "terminated":
            now = utcnow()
            instance = record.instance
            instance.status = "terminated"
            instance.terminated_at = instance.updated_at = now
            instance.health = False
            record = instance_records(state).put(instance_id, record)
            state.metrics.instances_ended.labels(reason).inc()
        shutil.rmtree(state.instance_dir(instance_id), ignore_errors=True)
    for hook in state.instance_end_hooks:  # what dies with it (its browser: _instance_browser)
        hook(instance_id)
    return _to_model(state, record)


def delete_instances_batch(
    state: LocalState, run_id: str | None, profile_id: str | None
) -> list[models.InstanceResponse]:
    """Terminate every live instance matching all given filters; returns them after termination.

    Raises:
        LocalAPIError: 400 ``bad_request`` when no filter is given (it would delete everything).
    """
    if not run_id and not profile_id:
        raise LocalAPIError(
            400, "give run_id and/or profile_id to choose the instances", code="bad_request", retryable=False
        )
    return [
        delete_instance(state, record.instance.instance_id)
        for record in instance_records(state).list(exclude_status="terminated")
        if (run_id is None or record.instance.run_id == run_id)
        and (profile_id is None or record.instance.profile_id == profile_id)
    ]


def list_runs(state: LocalState, profile_id: str | None, active: str | None) -> list[models.Run]:
    """Instances grouped by ``run_id``; ``active`` is ``active`` (default), ``inactive`` or ``all``."""
    runs: dict[str, list[models.InstanceResponse]] = {}
    for record in instance_records(state).list():
        instance = record.instance
        if instance.run_id and (profile_id is None or instance.profile_id == profile_id):
            runs.setdefault(instance.run_id, []).append(instance)
    out: list[models.Run] = []
    for run_id, instances in runs.items():
        running = sum(1 for instance in instances if instance.status == "running")
        if ((active or "active") == "active" and not running) or (active == "inactive" and running):
            continue
        created = sorted(instance.created_at for instance in instances)
        out.append(
            models.Run(
                run_id=run_id,
                running_count=running,
                total_count=len(instances),
                first_created_at=iso(created[0]),
                last_created_at=iso(created[-1]),
                profile_id=instances[0].profile_id,
            )
        )
    return out


def account(state: LocalState) -> models.AccountResponse:
    """The local team: no instance limit beyond the configured one, and the live instance count."""
    live = state.store.count(KIND, exclude_status="terminated")
    return models.AccountResponse(
        team_id=TEAM_ID,
        team_name="Local team",
        instance_limit=INSTANCE_LIMIT,
        instance_count=live,
        profile_id=None,
        profile_name=None,
    )


def heartbeat(state: LocalState, instance_id: str) -> models.HeartbeatResponse:
    """Record a heartbeat: push the instance's deadline back by its window.

    Raises:
        LocalAPIError: 404 ``instance_not_found`` when unknown or terminated.
    """
    with state.store.locks.hold(KIND, instance_id):
        record = require_live(state, instance_id)
        window = record.private.window_seconds or state.settings.instance_ttl_seconds
        now = utcnow()
        deadline = now.timestamp() + window
        record.private.deadline = deadline
        record.private.last_heartbeat = iso(now)
        record.instance.updated_at = now
        instance_records(state).put(instance_id, record)
    interval = record.instance.heartbeat_interval or max(1, window // MISSED_HEARTBEATS)
    return models.HeartbeatResponse(
        success=True,
        instance_id=instance_id,
        last_heartbeat=now,
        deadline_timestamp=deadline,
        interval_seconds=int(interval),
    )


def open_db(state: LocalState, instance_id: str, name: str, read_only: bool) -> sqlite3.Connection:
    """Open one of an instance's databases.

    ``seed`` is always opened read-only. A read-only connection uses the ``mode=ro`` URI plus
    ``PRAGMA query_only``, so no statement can change the file. Read-write connections are in
    autocommit mode (``isolation_level=None``): a statement is committed when it finishes unless
    the caller opens a transaction (``BEGIN``/``SAVEPOINT``). Connections may be used from
    another thread than the one that opened them (never from two at once); the caller closes it.

    Args:
        state: Server state.
        instance_id: The instance.
        name: ``"seed"``, ``"current"`` or ``"action_log"``.
        read_only: Open ``current`` read-only (the other two always are: the server alone
            writes the action log, through ``_action_log``).

    Raises:
        LocalAPIError: 404 ``instance_not_found`` (unknown or terminated), 404 ``not_found`` (name).
    """
    path = database_path(state, instance_id, name)
    if read_only or name != "current":
        conn = sqlite3.connect(
            f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False, isolation_level=None
        )
        conn.execute("PRAGMA query_only = ON")
        return conn
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=10.0)
    conn.execute(WRITER_PRAGMA)
    return conn


def reset_instance(state: LocalState, instance_id: str, seed: int | None = None) -> models.ResetResponse:
    """Restore ``current`` from ``seed`` in place (SQLite backup, safe with open connections).

    Args:
        state: Server state.
        instance_id: The instance.
        seed: Random seed to record (the bundled environments are deterministic).

    Raises:
        LocalAPIError: 404 ``instance_not_found``.
    """
    # Under the instance's lock: a DELETE in between would remove the files mid-backup (a 500).
    with (
        state.store.locks.hold(KIND, instance_id),
        contextlib.closing(open_db(state, instance_id, "seed", read_only=True)) as source,
        contextlib.closing(open_db(state, instance_id, "current", read_only=False)) as target,
    ):
        source.backup(target)
        record = _load(state, instance_id)
        record.instance.updated_at = utcnow()
        record.private.reset_seed = seed
        instance_records(state).put(instance_id, record)
    return models.ResetResponse(success=True, message=f"instance {instance_id} reset to its seed data")


# ---------------------------------------------------------------- backups

BACKUP_KIND = "backup"


def snapshot_instance(state: LocalState, instance_id: str) -> models.SnapshotResponse:
    """Store a consistent copy of the instance's ``current`` database as a backup.

    Raises:
        LocalAPIError: 404 ``instance_not_found``.
    """
    backup_id = new_id("bkp")
    key = f"backups/{backup_id}.db"
    path = state.settings.data_dir / key
    path.parent.mkdir(parents=True, exist_ok=True)
    # Under the instance's lock, as reset: a DELETE in between would remove the files mid-backup.
    with (
        state.store.locks.hold(KIND, instance_id),
        contextlib.closing(open_db(state, instance_id, "current", read_only=True)) as source,
        contextlib.closing(sqlite3.connect(path)) as target,
    ):
        source.backup(target)
        doc = {"backup_id": backup_id, "instance_id": instance_id, "s3_key": key, "created_at": iso()}
        env_key = _load(state, instance_id).instance.env_key
        state.store.put(BACKUP_KIND, backup_id, {**doc, "env_key": env_key}, parent=instance_id)
    return models.SnapshotResponse(success=True, **doc)


def restore_instance(state: LocalState, instance_id: str, backup_id: str | None) -> models.RestoreResponse:
    """Replace the instance's ``current`` database with a backup (its latest when ``backup_id`` is None).

    Raises:
        LocalAPIError: 404 ``instance_not_found``, 404 ``not_found`` (no such backup, or none yet),
            400 ``bad_request`` (a backup of another environment).
    """
    # Under the instance's lock, as reset: a DELETE in between would leave a new current.db
    # behind a terminated instance, or remove the files mid-backup.
    with state.store.locks.hold(KIND, instance_id):
        record = require_live(state, instance_id)
        target_env = record.instance.env_key
        if backup_id is None:
            own = state.store.list(BACKUP_KIND, parent=instance_id)
            backup = max(own, key=lambda doc: str(doc["created_at"])) if own else None
        else:
            backup = state.store.get(BACKUP_KIND, backup_id)
        if backup is None:
            raise not_found("backup", backup_id or f"of instance {instance_id}")
        if backup.get("env_key") != target_env:
            raise LocalAPIError(
                400,
                f"backup {backup['backup_id']!r} is of {backup.get('env_key')!r}, not {target_env!r}",
                code="bad_request",
                retryable=False,
            )
        path = state.settings.data_dir / str(backup["s3_key"])
        with (
            contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as source,
            contextlib.closing(open_db(state, instance_id, "current", read_only=False)) as target,
        ):
            source.backup(target)
        record.instance.updated_at = utcnow()
        instance_records(state).put(instance_id, record)
    return models.RestoreResponse(
        success=True,
        backup_id=str(backup["backup_id"]),
        source_instance_id=str(backup["instance_id"]),
        target_instance_id=instance_id,
        restored_at=iso(),
    )


# ---------------------------------------------------------------- TTL reaper


def reap_expired(state: LocalState, now: float | None = None) -> list[str]:
    """Terminate every live instance whose deadline has passed; returns their ids."""
    moment = time.time() if now is None else now
    reaped: list[str] = []
    for record in instance_records(state).list(exclude_status="terminated"):
        deadline = record.private.deadline
        if deadline is not None and deadline <= moment:
            instance_id = record.instance.instance_id
            with contextlib.suppress(LocalAPIError):
                delete_instance(state, instance_id, reason="expired")
                reaped.append(instance_id)
    return reaped


async def reap_forever(state: LocalState, interval: float) -> None:
    """Run :func:`reap_expired` every ``interval`` seconds until cancelled."""
    while True:
        try:
            reaped = await anyio.to_thread.run_sync(reap_expired, state)
            if reaped:
                _log.info("reaped expired instances: %s", ", ".join(reaped))
                # Their working set (MCP sessions, buffers) was just freed: hand it back, after
                # a full collection once nothing is live (idle, so the pause costs no one).
                idle = await anyio.to_thread.run_sync(
                    lambda: state.store.count(KIND, exclude_status="terminated") == 0
                )
                await anyio.to_thread.run_sync(_memory.trim, idle)
        except Exception:  # the reaper must outlive one bad pass
            _log.exception("instance reaper pass failed")
        await asyncio.sleep(interval)
