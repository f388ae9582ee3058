"""A run over a run directory, in phases, whoever plays its episodes (``RunPhases``).

Both ways of playing a run, here (``_runner``) and as server jobs (``_jobs_run``), go through the
same phases on the same run directory: ``check`` the arguments before the directory is touched,
``open`` it (start a new run, or take up the stored one), ``settle`` what ended while nobody
watched, ``retry`` (forget the errored episodes, so they are played again), ``play`` the rest,
each committed as it ends, and ``finish`` (copy the transcripts of failures, read the report).
They share the progress count (``ProgressTally``) and the transcript copy (``save_transcripts``).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import re
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio

from .._client import AsyncFleet
from .._exceptions import FleetError
from ..reports import Outcome, ReportEnvelope
from ._rundir import TRANSCRIPTS_DIR, RunDir

__all__ = [
    "DEFAULT_CONCURRENCY",
    "DEFAULT_K",
    "DEFAULT_MAX_STEPS",
    "Progress",
    "ProgressTally",
    "RunPhases",
    "new_run_stamp",
    "safe_name",
    "save_transcripts",
]

log = logging.getLogger("fleet_sdk.evaluation")

DEFAULT_K = 1
DEFAULT_CONCURRENCY = 4
DEFAULT_MAX_STEPS = 30

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def safe_name(text: str) -> str:
    """``text`` as a file name: anything but letters, digits, ``.``, ``_`` and ``-`` made ``_``."""
    return _UNSAFE.sub("_", text)


def new_run_stamp(run_id: str | None) -> tuple[str, str]:
    """A new run's id (``run_id``, else ``run-<time>-<random>``) and its ``created_at``."""
    now = dt.datetime.now(dt.UTC)
    created_at = now.isoformat(timespec="seconds").replace("+00:00", "Z")
    return run_id or f"run-{now:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}", created_at


@dataclass(frozen=True)
class Progress:
    """Where a run stands, after each finished episode.

    Attributes:
        done: Episodes finished, including those of earlier (resumed) attempts.
        total: Episodes in the run.
        passed: Finished episodes that passed.
        graded: Finished episodes that were graded (passed or failed).
        elapsed: Seconds since this attempt started.
        eta: Estimated seconds left, from this attempt's pace; None before the first episode.
    """

    done: int
    total: int
    passed: int
    graded: int
    elapsed: float
    eta: float | None

    @property
    def pass_rate(self) -> float | None:
        """Passed over graded so far."""
        return self.passed / self.graded if self.graded else None


class ProgressTally:
    """The counts behind ``Progress``, told to ``on_progress`` on each ``report``.

    The ETA is this attempt's pace (episodes finished since ``done_before``) over what is left.

    Args:
        on_progress: Where progress is told (None: nowhere).
        total: Episodes in the run.
        done_before: Episodes finished before this attempt.
    """

    def __init__(self, on_progress: Callable[[Progress], None] | None, total: int = 0, done_before: int = 0):
        self.on_progress = on_progress
        self.total = total
        self.done_before = done_before
        self.done = done_before
        self.passed = 0
        self.graded = 0
        self.started = time.monotonic()

    def add(self, outcome: Outcome) -> None:
        """Count one more finished episode."""
        self.done += 1
        self.passed += outcome.status == "passed"
        self.graded += outcome.status in ("passed", "failed")

    def grades(self, outcomes: Iterable[Outcome]) -> None:
        """Take the passed and graded counts from ``outcomes`` (the run's rows)."""
        rows = list(outcomes)
        self.passed = sum(1 for o in rows if o.status == "passed")
        self.graded = sum(1 for o in rows if o.status in ("passed", "failed"))

    def report(self) -> None:
        """Tell ``on_progress`` where the run stands."""
        if self.on_progress is None:
            return
        elapsed = time.monotonic() - self.started
        now = self.done - self.done_before
        eta = elapsed / now * (self.total - self.done) if now > 0 else None
        self.on_progress(Progress(self.done, self.total, self.passed, self.graded, elapsed, eta))


async def save_transcripts(
    fleet: AsyncFleet, store: RunDir, outcomes: Sequence[Outcome], *, concurrency: int = 4
) -> int:
    """Copy the transcripts of failed and errored episodes that have none yet into the run directory.

    Each is read from the session the episode was uploaded as and written to
    ``transcripts/<session id>.json``; the episode's row then names the file. A transcript that
    cannot be read is skipped (logged): the report names the session instead.

    Args:
        fleet: The client of the server holding the sessions.
        store: The run directory.
        outcomes: The episodes to consider.
        concurrency: Transcripts read at once.

    Returns:
        How many were written.
    """
    wanted = [
        o for o in outcomes if o.status in ("failed", "errored") and o.session_id and o.transcript is None
    ]
    if not wanted:
        return 0
    store.transcripts.mkdir(exist_ok=True)
    gate = asyncio.Semaphore(concurrency)
    written = 0

    async def one(outcome: Outcome) -> None:
        nonlocal written
        assert outcome.session_id is not None
        async with gate:
            try:
                transcript = await fleet.api.sessions.get_session_transcript(outcome.session_id)
            except FleetError as exc:
                log.warning("transcript of session %s not saved: %s", outcome.session_id, type(exc).__name__)
                return
        relative = f"{TRANSCRIPTS_DIR}/{safe_name(outcome.session_id)}.json"
        text = json.dumps(transcript.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
        await anyio.to_thread.run_sync((store.path / relative).write_text, text, "utf-8")
        await anyio.to_thread.run_sync(store.set_transcript, outcome, relative)
        written += 1

    async with asyncio.TaskGroup() as group:
        for outcome in wanted:
            group.create_task(one(outcome))
    return written


class RunPhases:
    """A run over ``run_dir`` played by ``drive``, phase by phase; subclasses fill the phases in.

    Args:
        fleet: The client of the server the episodes run on.
        run_dir: The run directory.
        resume: Take up the stored run instead of starting one.
        retry_errored: Play the errored episodes again (with ``resume``).
        on_progress: Where progress is told.
    """

    def __init__(
        self,
        fleet: AsyncFleet,
        run_dir: str | Path,
        *,
        resume: bool,
        retry_errored: bool,
        on_progress: Callable[[Progress], None] | None,
    ) -> None:
        self.fleet = fleet
        self.run_dir = run_dir
        self.resume = resume
        self.retry_errored = retry_errored
        self.tally = ProgressTally(on_progress)
        self._store: RunDir | None = None

    @property
    def store(self) -> RunDir:
        """The open run directory (from ``open`` on)."""
        if self._store is None:
            raise RuntimeError("the run directory is open only while the run is driven")
        return self._store

    async def drive(self) -> ReportEnvelope:
        """Play the run through every phase; its report."""
        await self.check()
        with RunDir(self.run_dir) as store:
            self._store = store
            try:
                await self.open()
                await self.settle()
                if self.retry_errored:
                    await self.retry()
                await self.play()
                return await self.finish()
            finally:
                self._store = None

    async def check(self) -> None:
        """Check the arguments before the run directory is touched (nothing by default)."""

    async def open(self) -> None:
        """Start the new run in the run directory, or take up the stored one."""
        raise NotImplementedError

    async def settle(self) -> None:
        """Record what ended while nobody watched (nothing by default)."""

    async def retry(self) -> None:
        """Forget the errored episodes, so that ``play`` plays them again (the report counts them)."""
        await anyio.to_thread.run_sync(self.store.forget_errored)

    async def play(self) -> None:
        """Play the episodes the run directory misses, each committed as it ends."""
        raise NotImplementedError

    @property
    def transcript_concurrency(self) -> int:
        """Transcripts ``finish`` reads at once."""
        return DEFAULT_CONCURRENCY

    @property
    def upload(self) -> bool:
        """Whether episodes are sessions on the server, whose failures' transcripts ``finish`` copies."""
        return True

    async def finish(self) -> ReportEnvelope:
        """Copy the transcripts of failures into the run directory; the run's report."""
        store = self.store
        if self.upload:
            await save_transcripts(
                self.fleet, store, store.outcomes(), concurrency=self.transcript_concurrency
            )
        return store.envelope()
