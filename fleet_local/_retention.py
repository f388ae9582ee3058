"""How long the server keeps what has finished (``LocalSettings.retention_seconds``, ``fleet-sdk prune``).

A training run makes an instance document, a verifier execution, a session with its transcript
and a few bookkeeping records per episode; without a bound the data dir grows by each of them
for ever. With ``retention_seconds`` set, a pass when the server starts and then every minute (or
sooner for a short retention) deletes what finished and has not changed for that long:

* terminated instances (their files went when they ended) and verifier executions;
* sessions that reached a final status, with their transcripts, and finished jobs (and the
  transcript of a session whose deletion was cut short);
* ended browser leases;
* trace jobs with no session left (a trace job's sessions went first, each a retention after it
  last changed, so the job has been idle at least that long);
* instance backups, once their instance's own record went (the instance ended at least a
  retention ago), with their files; and backup files no record names (a snapshot that failed);
* instance folders no live instance owns (a create that failed half way, a delete whose file
  removal failed), once older than both the retention and :data:`REPLAY_FLOOR`;
* screenshots the server stored in the public S3 bucket (``traces/image/``,
  ``harness/screenshot/``) that no transcript left refers to.

Whatever the retention, and without one, every pass deletes the ``Idempotency-Key`` and
``X-Request-ID`` records older than :data:`REPLAY_FLOOR`: a client may resend a create for as
long as its provisioning deadline (ten minutes by default), and no longer needs them after.

Kept whatever their age: what is live (running instances with their folders and backups,
pending or running sessions and jobs, live leases); what a user put there on purpose and does
not grow per episode (tasks, seed archives and file sets in ``fleet-task-data``, which belong to
no instance, evaluation reports, S3 objects under other keys); and what is bounded already
(stored verifier bundles, one per distinct verifier code; the built seeds, one per environment
version; the verifiers' scratch and the lease browsers' profiles, removed after each run and
again at start; ``fleet.db-wal``, truncated to 64 MiB after a checkpoint). SQLite reuses the pages
of deleted rows, so ``fleet.db`` stops growing once as much is deleted as is written.

Every deletion is safe beside a running server, which is how ``fleet-sdk prune`` runs it from
another process: what goes is finished and is written by no one again, and a document is
deleted only if it was not written since it was chosen (``Store.delete_stale``), so one a
server touched meanwhile stays.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import shutil
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio

from fleet_sdk.traces import KEY_PREFIX

from ._s3._buckets import BUCKET, bucket_dir
from ._s3._store import ObjectStore
from ._session_logs import IMAGE_PREFIX
from ._state import LocalState
from ._store import Store

__all__ = ["KINDS", "REPLAY_FLOOR", "lifespan", "prune"]

_log = logging.getLogger(__name__)

REPLAY_FLOOR = 600.0
"""Seconds a replay record (idempotency key, request id) is kept at least: the SDK's default
provisioning deadline, within which a client may send a create again."""

_NO_RETENTION_INTERVAL = 60.0
"""Seconds between two passes of a server without a retention (replay records only)."""

# (kind, statuses that keep a document whatever its age, replay record)
_RULES: tuple[tuple[str, frozenset[str] | None, bool], ...] = (
    ("instance", frozenset({"pending", "running", "stopped", "error"}), False),
    ("verifier_execution", None, False),
    ("session", frozenset({"pending", "running"}), False),
    ("job", frozenset({"pending", "running"}), False),
    ("browser_lease", frozenset({"pending", "starting", "running"}), False),
    ("idempotency", None, True),
    ("create_request_id", None, True),
    ("browser_lease_idempotency", None, True),
)

KINDS: dict[str, str] = {
    "instance": "terminated instances",
    "verifier_execution": "verifier results",
    "session": "finished sessions, with their transcripts",
    "job": "finished jobs",
    "browser_lease": "ended browser leases",
    "transcript": "transcripts left without their session",
    "trace_job": "trace jobs with no session left",
    "backup": "backups of instances long gone (records and files)",
    "instance_folder": "instance folders no live instance owns",
    "screenshot": "screenshots no transcript refers to",
    "idempotency": "Idempotency-Key records",
    "create_request_id": "X-Request-ID records",
    "browser_lease_idempotency": "browser lease Idempotency-Key records",
}
"""Everything a pass may delete, by kind, in the order a pass goes (what ``fleet-sdk prune`` prints)."""

_SCREENSHOT_PREFIXES = (IMAGE_PREFIX, KEY_PREFIX)
_SCREENSHOT_KEY = re.compile(
    "(?:" + "|".join(re.escape(prefix) for prefix in _SCREENSHOT_PREFIXES) + r")[0-9a-f]+\.[a-z]+"
)
_BACKUPS = "backups"
_INSTANCES = "instances"


class _Pass:
    """One pass over a store and its data dir; in a dry run, what would go is remembered instead.

    ``gone`` holds, per kind, the ids deleted (or that a dry run would delete) with their
    parents, so the kinds that depend on another (trace jobs on sessions, backups on instances,
    screenshots on transcripts) count the same in a dry run as for real.
    """

    def __init__(self, store: Store, dry_run: bool) -> None:
        self.store = store
        self.dry_run = dry_run
        self.gone: dict[str, dict[str, str | None]] = {}

    def note(self, kind: str, ids: list[tuple[str, str | None]]) -> None:
        self.gone.setdefault(kind, {}).update(ids)

    def records(self, kind: str, live: frozenset[str] | None, before: float) -> None:
        if self.dry_run:
            self.note(kind, self.store.stale(kind, before, live_statuses=live))
            return
        while ids := self.store.prune(kind, before, live_statuses=live):
            if kind == "session":
                self.store.delete_messages(ids)
            self.note(kind, [(id, None) for id in ids])

    def delete(self, kind: str, id: str, before: float) -> bool:
        """Delete one document chosen on more than its age (unless written since ``before``)."""
        if self.dry_run:
            self.note(kind, [(id, None)])
            return True
        deleted = bool(self.store.delete_stale(kind, [id], before))
        if deleted:
            self.note(kind, [(id, None)])
        return deleted

    def orphan_transcripts(self) -> None:
        # A session's messages go just after its document (two calls): a pass cut short between
        # them (the server killed) leaves messages no session owns, which the next pass finds.
        ids = [id for id in self.store.orphan_transcripts() if id not in self.gone.get("session", {})]
        self.note("transcript", [(id, None) for id in ids])
        if ids and not self.dry_run:
            self.store.delete_messages(ids)

    def trace_jobs(self, before: float) -> None:
        sessions_gone = self.gone.get("session", {})
        for job_id, _ in self.store.stale("trace_job", before):
            left = self.store.count("session", parent=job_id)
            if left and self.dry_run:  # the sessions this dry run would delete do not count
                left -= sum(1 for id in self.store_session_ids(job_id) if id in sessions_gone)
            if left == 0:
                self.delete("trace_job", job_id, before)

    def store_session_ids(self, job_id: str) -> list[str]:
        return [str(doc.get("session_id")) for doc in self.store.list("session", parent=job_id)]

    def backups(self, data_dir: Path | None, before: float, orphans_before: float) -> None:
        instances_gone = self.gone.get("instance", {})
        for backup_id, instance_id in self.store.stale("backup", before):
            if instance_id and instance_id not in instances_gone and self.store.get("instance", instance_id):
                continue  # its instance's record is still kept: so is the backup
            doc = self.store.get("backup", backup_id) or {}
            if self.delete("backup", backup_id, before) and not self.dry_run and data_dir is not None:
                _unlink_within(data_dir / _BACKUPS, data_dir / str(doc.get("s3_key") or ""))
        if data_dir is None or not (data_dir / _BACKUPS).is_dir():
            return
        # A file no record names: a snapshot that failed between its copy and its record.
        for path in (data_dir / _BACKUPS).iterdir():
            if path.suffix != ".db" or _mtime(path) >= orphans_before or self.store.get("backup", path.stem):
                continue
            self.note("backup", [(path.name, None)])
            if not self.dry_run:
                path.unlink(missing_ok=True)

    def instance_folders(self, data_dir: Path, before: float) -> None:
        root = data_dir / _INSTANCES
        if not root.is_dir():
            return
        for folder in root.iterdir():
            doc = self.store.get("instance", folder.name)
            # A young folder without a record may be a create under way: only old ones go.
            if (doc is not None and doc.get("status") != "terminated") or _mtime(folder) >= before:
                continue
            self.note("instance_folder", [(folder.name, None)])
            if not self.dry_run:
                shutil.rmtree(folder, ignore_errors=True)

    def screenshots(self, data_dir: Path, before: float) -> None:
        root = bucket_dir(data_dir, BUCKET)
        if not (root / "meta").is_dir():
            return
        objects = ObjectStore(root)
        before -= 1.0  # an object's time is kept to the second, rounded down: never take it for older
        old = [
            stored.key
            for stored in objects.list("", "", sys.maxsize)[0]
            if stored.key.startswith(_SCREENSHOT_PREFIXES) and stored.last_modified.timestamp() < before
        ]
        if not old:
            return
        # Screenshots are stored by their content's hash and shared: one goes only when no
        # transcript left refers to it (those this dry run would delete do not count).
        sessions_gone = self.gone.get("session", {})
        referenced: set[str] = set()
        for session_id, text in self.store.messages_containing(_SCREENSHOT_PREFIXES):
            if session_id not in sessions_gone:
                referenced.update(_SCREENSHOT_KEY.findall(text))
        for key in old:
            if key in referenced:
                continue
            if self.dry_run:
                self.note("screenshot", [(key, None)])
                continue
            # Stored again since it was listed (a new transcript's screenshot): it stays.
            stored = objects.head(key)
            if stored is not None and stored.last_modified.timestamp() < before and objects.delete(key):
                self.note("screenshot", [(key, None)])


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return float("inf")  # gone already, or unreadable: never counted old


def _unlink_within(root: Path, path: Path) -> None:
    """Remove ``path`` if it is a file inside ``root`` (a record's key names it: never trusted further)."""
    with contextlib.suppress(OSError, ValueError):
        if path.resolve().parent == root.resolve() and path.is_file():
            os.unlink(path)


def prune(
    store: Store,
    retention_seconds: float | None,
    *,
    data_dir: Path | None = None,
    now: float | None = None,
    dry_run: bool = False,
) -> dict[str, int]:
    """Delete what finished longer ago than the retention (blocking: run it in a thread).

    Args:
        store: The server's store (or one opened on its ``fleet.db`` by another process).
        retention_seconds: What finished and was last written longer ago than this goes (see
            the module docstring); None deletes only replay records older than
            :data:`REPLAY_FLOOR`.
        data_dir: The data dir, for the files (backups, instance folders, screenshots); None
            prunes the store's records only.
        now: The present, as ``time.time()`` (tests).
        dry_run: Count what would go and delete nothing.

    Returns:
        How many of each kind (:data:`KINDS`) were deleted, or would be in a dry run (kinds
        with none left out).
    """
    moment = time.time() if now is None else now
    run = _Pass(store, dry_run)
    if retention_seconds is not None:
        before = moment - retention_seconds
        for kind, live, replay in _RULES:
            if not replay:
                run.records(kind, live, before)
        # Files no record claims yet may be a create under way: only old ones go.
        orphans_before = moment - max(retention_seconds, REPLAY_FLOOR)
        run.orphan_transcripts()
        run.trace_jobs(before)
        run.backups(data_dir, before, orphans_before)
        if data_dir is not None:
            run.instance_folders(data_dir, orphans_before)
            run.screenshots(data_dir, before)
    for kind, live, replay in _RULES:
        if replay:
            run.records(kind, live, moment - max(retention_seconds or 0.0, REPLAY_FLOOR))
    return {kind: len(run.gone[kind]) for kind in KINDS if run.gone.get(kind)}


async def _prune_forever(state: LocalState, retention: float | None) -> None:
    interval = _NO_RETENTION_INTERVAL if retention is None else min(60.0, max(1.0, retention / 4))
    while True:  # the first pass at start: what aged while the server was stopped goes at once
        try:
            deleted = await anyio.to_thread.run_sync(
                lambda: prune(state.store, retention, data_dir=state.data_dir)
            )
        except Exception:  # the next pass tries again
            _log.exception("retention pass failed")
        else:
            for kind, count in deleted.items():
                state.metrics.pruned.labels(kind).inc(count)
        await asyncio.sleep(interval)


@contextlib.asynccontextmanager
async def lifespan(state: LocalState) -> AsyncIterator[None]:
    """Prune for the life of the server: replay records always, finished records with a retention."""
    task = asyncio.create_task(
        _prune_forever(state, state.settings.retention_seconds), name="fleet-local-retention"
    )
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
