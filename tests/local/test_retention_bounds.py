"""With a retention, a trainer-shaped run's data dir stays bounded: round after round of episodes
(finished, wrong, abandoned, leaked to the TTL, uploaded as traces, logged with screenshots) leave
the same records, files and database size behind, not more each round (``fleet_local._retention``)."""

from __future__ import annotations

import base64
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

from _waits import wait_until_async

from benchmarks.bench_soak import DEFAULT_MIX, Tally, drive, tool_use_tasks
from fleet_local import LocalFleet
from fleet_local._s3 import BUCKET
from fleet_local._store import Store
from fleet_sdk import AsyncFleet, TaskEnv
from fleet_sdk.tasks import Task

ROUNDS = 3
SOAK_EPISODES = 24  # per round, benchmarks/bench_soak.py's mix
TRACED = 6  # per round, episodes uploaded to a trace job (sessions with transcripts)
LOGGED = 6  # per round, logged sessions each with a screenshot of its own
LEAK_TTL = 2
FINISHED_KINDS = ("instance", "verifier_execution", "session", "job", "trace_job", "backup")
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def _files(data_dir: Path) -> Iterator[Path]:
    """Every file of the data dir but the store's own (whose size is looked at on its own)."""
    for path in data_dir.rglob("*"):
        if path.is_file() and not path.name.startswith("fleet.db"):
            yield path.relative_to(data_dir)


def _sizes(data_dir: Path) -> tuple[int, int]:
    """The size of ``fleet.db`` in bytes once its WAL is checkpointed into it, and the bytes of the
    replay records in it."""
    with closing(sqlite3.connect(data_dir / "fleet.db", isolation_level=None)) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        (pages,) = db.execute("PRAGMA page_count").fetchone()
        (page_size,) = db.execute("PRAGMA page_size").fetchone()
        (replay,) = db.execute(
            "SELECT COALESCE(SUM(LENGTH(id) + LENGTH(doc)), 0) FROM docs "
            "WHERE kind IN ('idempotency', 'create_request_id')"
        ).fetchone()
        return int(pages) * int(page_size), int(replay)


async def _round(fleet: AsyncFleet, tasks: list[Task], number: int) -> None:
    tally = Tally()
    await drive(
        fleet,
        tasks,
        concurrency=8,
        mix=DEFAULT_MIX.split(","),
        ttl=LEAK_TTL,
        tally=tally,
        until=lambda: tally.total + tally.errors >= SOAK_EPISODES,
    )
    assert tally.errors == 0, tally.last_error
    job_id = (await fleet.api.traces.create_trace_job(name=f"round-{number}")).job_id
    for i in range(TRACED):
        async with TaskEnv(tasks[i % len(tasks)], fleet=fleet, trace_job_id=job_id) as env:
            await env.reset_async()
            await env.step_async({"done": True})
    for i in range(LOGGED):
        image = base64.b64encode(PNG + f"{number}-{i}".encode()).decode()
        logged = await fleet.api.sessions.log_session(
            job_id=job_id,
            model="openai/gpt-x",
            history=[{"role": "user", "parts": [{"inline_data": {"mime_type": "image/png", "data": image}}]}],
            response="done",
        )
        await fleet.api.sessions.log_session(session_id=logged.session_id, status="completed")


async def test_round_after_round_the_data_dir_holds_no_more(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    async with LocalFleet(data_dir, retention_seconds=1, reaper_interval=0.5) as local:
        fleet = local.async_fleet()
        store = Store(data_dir / "fleet.db")
        screenshots = data_dir / "s3" / BUCKET / "meta"

        def left() -> dict[str, int]:
            counts = {kind: store.count(kind) for kind in FINISHED_KINDS}
            counts["messages"] = int(store._db.execute("SELECT COUNT(*) FROM messages").fetchone()[0])
            counts["instance_folders"] = len(list((data_dir / "instances").iterdir()))
            counts["screenshots"] = len(list(screenshots.glob("*.json"))) if screenshots.is_dir() else 0
            return counts

        try:
            tasks = await tool_use_tasks(fleet)
            after: list[tuple[int, int, set[Path], int]] = []
            for number in range(ROUNDS):
                await _round(fleet, tasks, number)
                # Once the leaked instances' TTL and the retention have passed, nothing is left of
                # the round: no record of what finished, no transcript, no file.
                await wait_until_async(
                    lambda: not any(left().values()), "every finished record and file was pruned"
                )
                replay = store.count("idempotency") + store.count("create_request_id")
                after.append((*_sizes(data_dir), set(_files(data_dir)), replay))
        finally:
            store.close()
            await fleet.close()

    (first_size, first_replay_bytes, first_files, first_replay), *_, last = after
    last_size, last_replay_bytes, last_files, last_replay = last
    assert last_files == first_files  # the same files: seeds, the S3 endpoint's, the lock
    # Replay records stay for their ten-minute floor (tests/local/test_prune.py sees them go), so
    # they are all still here: the rounds made as many each.
    assert ROUNDS * SOAK_EPISODES <= last_replay <= ROUNDS * first_replay
    # The database reuses the pages of what was pruned: it grows by the replay records alone (in
    # B-tree pages about half full), never by the rounds' episodes.
    grown = last_size - first_size
    assert grown <= 3 * (last_replay_bytes - first_replay_bytes) + 32 * 4096, [a[:2] + a[3:] for a in after]
