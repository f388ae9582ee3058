"""The run directory of a client-side evaluation: one SQLite file that survives interruption.

``<run dir>/run.sqlite3`` holds the run's manifest (run id, suite, tasks, models with their
endpoints and sampling parameters, k, max steps, concurrency, the server or platform used, when it
started, the trace job its sessions are uploaded to) and one row per finished episode, committed
the moment the episode finishes. Killing the process at any point loses at most the episodes in
flight; ``resume`` reads everything back and plays only the missing (task, model, sample) slots.
SQLite rather than JSON lines: a commit is atomic, so a kill mid-write never leaves a torn record.
No secret is written: endpoint keys come from the environment on every run.

``<run dir>/transcripts/`` holds the transcripts of failed and errored episodes (JSON, one file per
session), which the report links to.

An episode's trace upload comes after its row: the row and the upload it still owes (``uploads``:
everything the upload sends) are committed together, and the upload, once the server took it,
sets the row's session id and drops the pending upload in one transaction. So an interruption
during the upload keeps the episode (a resume never plays it again) and leaves the upload to be
sent later (``pending_uploads``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .._exceptions import EvaluationError
from ..reports import Outcome, ReportEnvelope, Sampling, Source, build_report

__all__ = ["RUN_FILE", "TRANSCRIPTS_DIR", "RunDir", "RunManifest"]

RUN_FILE = "run.sqlite3"
TRANSCRIPTS_DIR = "transcripts"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS manifest (id INTEGER PRIMARY KEY CHECK (id = 1), doc TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS episodes (
    task_key TEXT NOT NULL,
    model TEXT NOT NULL,
    sample INTEGER NOT NULL,
    doc TEXT NOT NULL,
    PRIMARY KEY (task_key, model, sample)
);
CREATE TABLE IF NOT EXISTS uploads (
    task_key TEXT NOT NULL,
    model TEXT NOT NULL,
    sample INTEGER NOT NULL,
    doc TEXT NOT NULL,
    PRIMARY KEY (task_key, model, sample)
);
"""


@dataclass(frozen=True)
class RunManifest:
    """What a run is: fixed when it starts, checked when it resumes.

    Attributes:
        run_id: The report's run id.
        suite_name: What was evaluated (an env key, a task file...).
        tasks: The task configs, so a resume plays exactly the same tasks.
        models: Model ids (``local/scripted``, ``local/random`` or an endpoint's model).
        k: Samples per task and model.
        created_at: When the run started (ISO 8601), the report's ``created_at``.
        trace_job_id: The trace job its sessions are uploaded to, if any.
        source: ``client`` (this runner) or ``platform`` (a job, ``job_id``).
        job_id: The platform job, for ``source == "platform"``.
        pass_threshold: The score at which a graded episode passes.
        extra: Anything else a caller wants kept with the run.
        max_steps: Step budget per episode (None: a run from before it was recorded).
        concurrency: Episodes at once, as last run.
        endpoints: Per chat-completions model, ``{"base_url": ..., "sampling": {...}}`` (never a key).
        server: Where the episodes ran: ``{"kind": "embedded"}`` (the run's own local server) or
            ``{"kind": "remote", "base_url": ..., "platform_url": ...}``.
        retried: Errored episodes played again so far (``retry_errored``).
    """

    run_id: str
    suite_name: str
    tasks: list[dict[str, Any]]
    models: list[str]
    k: int
    created_at: str
    trace_job_id: str | None = None
    source: str = "client"
    job_id: str | None = None
    pass_threshold: float = 1.0
    extra: dict[str, Any] = field(default_factory=dict)
    max_steps: int | None = None
    concurrency: int | None = None
    endpoints: dict[str, dict[str, Any]] = field(default_factory=dict)
    server: dict[str, Any] = field(default_factory=dict)
    retried: int = 0

    @property
    def task_keys(self) -> list[str]:
        """The task keys, in run order."""
        return [str(t.get("task_key") or t.get("key")) for t in self.tasks]

    def differences(self, **given: Any) -> list[tuple[str, Any, Any]]:
        """``(name, given, stored)`` for each given field (not None) whose value differs from the run's.

        Args:
            given: Fields of this manifest (``task_keys`` too) as a resuming caller states them.
        """
        return [
            (name, value, getattr(self, name))
            for name, value in given.items()
            if value is not None and value != getattr(self, name)
        ]


class RunDir:
    """An open run directory.

    Args:
        path: The directory (created when missing).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path / RUN_FILE, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    def __enter__(self) -> RunDir:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @staticmethod
    def exists(path: str | Path) -> bool:
        """Whether ``path`` holds a run."""
        return (Path(path) / RUN_FILE).is_file()

    def manifest(self) -> RunManifest | None:
        """The manifest, or None for a new directory."""
        row = self._db.execute("SELECT doc FROM manifest WHERE id = 1").fetchone()
        return RunManifest(**json.loads(row[0])) if row else None

    def require_manifest(self) -> RunManifest:
        """The manifest.

        Raises:
            EvaluationError: The directory holds no run.
        """
        manifest = self.manifest()
        if manifest is None:
            raise EvaluationError(f"{self.path} is not a run directory (no {RUN_FILE} manifest)")
        return manifest

    def start(self, manifest: RunManifest) -> None:
        """Write the manifest of a new run.

        Raises:
            EvaluationError: The directory already holds a run (resume it instead).
        """
        if self.manifest() is not None:
            raise EvaluationError(f"{self.path} already holds a run; pass resume to continue it")
        self._db.execute("INSERT INTO manifest (id, doc) VALUES (1, ?)", (json.dumps(asdict(manifest)),))

    def update(self, **fields: Any) -> RunManifest:
        """Change fields of the manifest (the trace job once created, the concurrency last used).

        Args:
            fields: ``RunManifest`` fields and their new values.
        """
        doc = {**asdict(self.require_manifest()), **fields}
        self._db.execute("UPDATE manifest SET doc = ? WHERE id = 1", (json.dumps(doc),))
        return RunManifest(**doc)

    def set_trace_job(self, job_id: str) -> None:
        """Record the trace job the run's sessions go to."""
        self.update(trace_job_id=job_id)

    def forget_errored(self) -> int:
        """Drop the errored episodes so they are played again, counting them as retried.

        Returns:
            How many were dropped. The rows and the count change in one transaction.
        """
        manifest = self.require_manifest()
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            rows = self._db.execute("SELECT rowid, doc FROM episodes").fetchall()
            errored = [rowid for rowid, doc in rows if json.loads(doc).get("status") == "errored"]
            # Their pending uploads go too: the slot's next episode owes its own.
            self._db.executemany(
                "DELETE FROM uploads WHERE (task_key, model, sample) IN "
                "(SELECT task_key, model, sample FROM episodes WHERE rowid = ?)",
                [(r,) for r in errored],
            )
            self._db.executemany("DELETE FROM episodes WHERE rowid = ?", [(r,) for r in errored])
            doc = {**asdict(manifest), "retried": manifest.retried + len(errored)}
            self._db.execute("UPDATE manifest SET doc = ? WHERE id = 1", (json.dumps(doc),))
        return len(errored)

    @property
    def transcripts(self) -> Path:
        """Where transcripts are written (``<run dir>/transcripts``)."""
        return self.path / TRANSCRIPTS_DIR

    def set_transcript(self, outcome: Outcome, relative: str) -> None:
        """Record that ``outcome``'s transcript is the file ``relative`` (to the run directory)."""
        updated = outcome.model_copy(update={"transcript": relative})
        self._db.execute(
            "UPDATE episodes SET doc = ? WHERE task_key = ? AND model = ? AND sample = ?",
            (updated.model_dump_json(), outcome.task_key, outcome.model, outcome.sample),
        )

    def record(self, outcome: Outcome, upload: Mapping[str, Any] | None = None) -> bool:
        """Persist one finished episode (committed at once); False when its slot was already stored.

        Args:
            outcome: The episode's row.
            upload: The trace upload it still owes (JSON-serialisable), committed with the row and
                kept until ``uploaded``.
        """
        slot = (outcome.task_key, outcome.model, outcome.sample)
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            cursor = self._db.execute(
                "INSERT OR IGNORE INTO episodes (task_key, model, sample, doc) VALUES (?, ?, ?, ?)",
                (*slot, outcome.model_dump_json()),
            )
            stored = cursor.rowcount == 1
            if stored and upload is not None:
                self._db.execute(
                    "INSERT OR REPLACE INTO uploads (task_key, model, sample, doc) VALUES (?, ?, ?, ?)",
                    (*slot, json.dumps(dict(upload), default=str)),
                )
        return stored

    def pending_uploads(self) -> list[tuple[Outcome, dict[str, Any]]]:
        """The stored episodes whose trace upload was not sent yet, with what it sends."""
        rows = self._db.execute(
            "SELECT e.doc, u.doc FROM uploads u JOIN episodes e USING (task_key, model, sample) "
            "ORDER BY task_key, model, sample"
        ).fetchall()
        return [(Outcome.model_validate_json(episode), json.loads(upload)) for episode, upload in rows]

    def uploaded(self, outcome: Outcome, session_id: str) -> Outcome | None:
        """Record that ``outcome``'s pending upload is the session ``session_id``.

        Returns:
            The updated row; None when no upload of that slot was pending (nothing is changed).
        """
        slot = (outcome.task_key, outcome.model, outcome.sample)
        where = "WHERE task_key = ? AND model = ? AND sample = ?"
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")
            if not self._db.execute(f"DELETE FROM uploads {where}", slot).rowcount:
                return None
            (doc,) = self._db.execute(f"SELECT doc FROM episodes {where}", slot).fetchone()
            updated = Outcome.model_validate_json(doc).model_copy(update={"session_id": session_id})
            self._db.execute(f"UPDATE episodes SET doc = ? {where}", (updated.model_dump_json(), *slot))
        return updated

    def outcomes(self) -> list[Outcome]:
        """Every finished episode, in slot order."""
        rows = self._db.execute("SELECT doc FROM episodes ORDER BY task_key, model, sample").fetchall()
        return [Outcome.model_validate_json(doc) for (doc,) in rows]

    def finished(self) -> set[tuple[str, str, int]]:
        """The (task key, model, sample) slots already played."""
        rows = self._db.execute("SELECT task_key, model, sample FROM episodes").fetchall()
        return {(str(t), str(m), int(s)) for t, m, s in rows}

    def envelope(self) -> ReportEnvelope:
        """The report of the run as it stands (unplayed slots are ``pending``)."""
        manifest = self.require_manifest()
        return envelope_of(manifest, self.outcomes())


def envelope_of(manifest: RunManifest, outcomes: Sequence[Outcome]) -> ReportEnvelope:
    """The report of ``manifest`` with ``outcomes``."""
    endpoints = {model: str(entry["base_url"]) for model, entry in manifest.endpoints.items()}
    sampling = {
        model: Sampling.model_validate(entry.get("sampling") or {})
        for model, entry in manifest.endpoints.items()
    }
    return build_report(
        run_id=manifest.run_id,
        source=Source(
            kind="platform" if manifest.source == "platform" else "client",
            job_id=manifest.job_id or manifest.trace_job_id,
        ),
        suite_name=manifest.suite_name,
        task_keys=manifest.task_keys,
        models=manifest.models,
        k=manifest.k,
        outcomes=outcomes,
        created_at=manifest.created_at,
        pass_threshold=manifest.pass_threshold,
        endpoints=endpoints,
        sampling=sampling,
        retried=manifest.retried,
    )
