"""Every kind of thing a server writes under its data dir goes after the retention, and nothing
live ever does (``fleet_local._retention``); ``fleet-sdk prune`` does it once, beside a running server.

The server runs in its own process (``LocalFleet``); the tests prune its ``fleet.db`` and files from
this one, as ``fleet-sdk prune`` does, and read the result back over the API and the S3 endpoint.
"""

from __future__ import annotations

import asyncio
import base64
import os
import re
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from _waits import PATIENCE, wait_until_async

from fleet_local import LocalFleet
from fleet_local._retention import KINDS, REPLAY_FLOOR, prune
from fleet_local._store import Store
from fleet_sdk import AsyncFleet, NotFoundError, TaskEnv
from fleet_sdk.tasks import Task
from fleet_sdk.types import env_instance as models

CLI = [sys.executable, "-m", "fleet_sdk.cli"]
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
HOUR = 3600.0


def _image(tag: bytes) -> dict[str, object]:
    """A user message holding one screenshot whose bytes (and so whose key) ``tag`` makes unique."""
    data = base64.b64encode(PNG + tag).decode()
    return {"role": "user", "parts": [{"inline_data": {"mime_type": "image/png", "data": data}}]}


def _age(path: Path, seconds: float) -> None:
    moment = time.time() - seconds
    os.utime(path, (moment, moment))


@dataclass
class World:
    """What a server holds after a little of everything, finished and live."""

    done_instance: str
    done_session: str
    done_job: str
    gone_instance: str
    gone_backup: str
    live_instance: str
    live_backup: str
    live_session: str
    live_job: str
    live_screenshot: str  # only the live session shows it
    shared_screenshot: str  # both sessions show it
    done_screenshot: str  # only the finished session shows it


async def _orderdesk_task(fleet: AsyncFleet) -> Task:
    listed = await fleet.api.control_plane.list_tasks(env_key="orderdesk")
    return Task.model_validate(listed.tasks[0].model_dump())


async def _screenshots(fleet: AsyncFleet, session_id: str) -> list[str]:
    transcript = (await fleet.api.sessions.get_session_transcript(session_id)).transcript
    return [
        block.image_url.url
        for message in transcript
        if isinstance(message.content, list)
        for block in message.content
        if block.type == "image_url" and block.image_url is not None
    ]


async def _populate(fleet: AsyncFleet) -> World:
    cp = fleet.api.control_plane
    done_job = (await fleet.api.traces.create_trace_job(name="finished")).job_id
    live_job = (await fleet.api.traces.create_trace_job(name="live")).job_id
    # A whole episode, graded and closed, uploaded to the finished trace job.
    async with TaskEnv(await _orderdesk_task(fleet), fleet=fleet, trace_job_id=done_job) as env:
        await env.reset_async()
        await env.step_async({"done": True})
        done_instance = env.env.instance_id if env.env is not None else ""
        done_session = env.trace_session_id or ""
    # A logged session that finished, and one still running, sharing a screenshot.
    sessions = fleet.api.sessions
    finished = await sessions.log_session(
        job_id=done_job, model="openai/gpt-x", history=[_image(b"done"), _image(b"shared")], response="ok"
    )
    await sessions.log_session(session_id=finished.session_id, status="completed")
    running = await sessions.log_session(
        job_id=live_job, model="openai/gpt-x", history=[_image(b"live"), _image(b"shared")], response="hm"
    )
    done_urls = await _screenshots(fleet, finished.session_id)
    live_urls = await _screenshots(fleet, running.session_id)
    # Backups: of an instance that was then deleted, and of one still running.
    gone = await cp.create_instance(models.InstanceRequest(env_key="orderdesk"))
    gone_backup = (await cp.snapshot_instance(gone.instance_id)).backup_id
    await cp.delete_instance(gone.instance_id)
    live = await cp.create_instance(models.InstanceRequest(env_key="orderdesk", ttl_seconds=int(HOUR)))
    live_backup = (await cp.snapshot_instance(live.instance_id)).backup_id
    return World(
        done_instance=done_instance,
        done_session=done_session,
        done_job=done_job,
        gone_instance=gone.instance_id,
        gone_backup=gone_backup,
        live_instance=live.instance_id,
        live_backup=live_backup,
        live_session=running.session_id,
        live_job=live_job,
        live_screenshot=live_urls[0],
        shared_screenshot=live_urls[1],
        done_screenshot=done_urls[0],
    )


def _strays(data_dir: Path) -> tuple[Path, Path, Path]:
    """An instance folder and a backup file no record names, from long ago, and a folder just made
    (as a create under way has it, before its record is written)."""
    old_folder = data_dir / "instances" / "inst_stray_old"
    old_folder.mkdir(parents=True)
    (old_folder / "current.db").write_bytes(b"x" * 4096)
    _age(old_folder, 2 * HOUR)
    old_backup = data_dir / "backups" / "bkp_stray_old.db"
    old_backup.parent.mkdir(exist_ok=True)
    old_backup.write_bytes(b"x" * 4096)
    _age(old_backup, 2 * HOUR)
    young_folder = data_dir / "instances" / "inst_being_created"
    young_folder.mkdir()
    return old_folder, old_backup, young_folder


async def _status(url: str) -> int:
    async with httpx.AsyncClient(timeout=30) as client:
        return (await client.get(url)).status_code


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[tuple[LocalFleet, AsyncFleet, World]]:
    async with LocalFleet(tmp_path / "data") as local:
        fleet = local.async_fleet()
        try:
            yield local, fleet, await _populate(fleet)
        finally:
            await fleet.close()


async def test_each_kind_goes_after_the_retention_and_nothing_live_ever_does(
    world: tuple[LocalFleet, AsyncFleet, World],
) -> None:
    local, fleet, w = world
    cp = fleet.api.control_plane
    data_dir = local.data_dir
    old_folder, old_backup, young_folder = _strays(data_dir)
    store = Store(data_dir / "fleet.db")  # a connection of this process, beside the server's
    try:
        # Within the retention nothing goes but the long-stray files (older than it and the floor).
        assert prune(store, HOUR, data_dir=data_dir) == {"backup": 1, "instance_folder": 1}
        assert not old_folder.exists() and not old_backup.exists()
        assert young_folder.exists()  # a create under way is never taken for a stray
        assert (await cp.get_instance(w.done_instance)).status == "terminated"

        # Two hours on, with a retention of one: the dry run deletes nothing and counts what will go.
        later = time.time() + 2 * HOUR
        would = prune(store, HOUR, data_dir=data_dir, now=later, dry_run=True)
        assert (await cp.get_instance(w.done_instance)).status == "terminated"
        assert await _status(w.done_screenshot) == 200
        deleted = prune(store, HOUR, data_dir=data_dir, now=later)
        assert deleted == would
        assert deleted["instance"] == 2  # the episode's and the deleted one's
        assert deleted["session"] == 2  # the episode's and the finished logged one
        assert deleted["verifier_execution"] >= 1
        assert deleted["trace_job"] == 1  # the finished one: the live one still has its session
        assert deleted["backup"] == 1  # the deleted instance's: the live one's stays
        assert deleted["instance_folder"] == 1  # the young one, two hours on
        assert deleted["screenshot"] == 1  # only the finished session showed it
        assert deleted["idempotency"] >= 1 and deleted["create_request_id"] >= 1  # the episode's create
        assert prune(store, HOUR, data_dir=data_dir, now=later) == {}  # nothing left to go
    finally:
        store.close()

    # Finished: gone, over the API and on the S3 endpoint.
    for instance_id in (w.done_instance, w.gone_instance):
        with pytest.raises(NotFoundError):
            await cp.get_instance(instance_id)
    with pytest.raises(NotFoundError):
        await fleet.api.sessions.get_session_transcript(w.done_session)
    with pytest.raises(NotFoundError):
        await fleet.api.sessions.get_job_sessions(w.done_job)
    with pytest.raises(NotFoundError):
        await cp.restore_instance(w.live_instance, models.RestoreRequest(backup_id=w.gone_backup))
    assert await _status(w.done_screenshot) == 404
    assert not list((data_dir / "backups").glob(f"{w.gone_backup}*"))

    # Live: all there and working.
    assert (await cp.get_instance(w.live_instance)).status == "running"
    assert (data_dir / "instances" / w.live_instance / "current.db").is_file()
    restored = await cp.restore_instance(w.live_instance, models.RestoreRequest())
    assert restored.backup_id == w.live_backup
    assert await _screenshots(fleet, w.live_session) == [w.live_screenshot, w.shared_screenshot]
    assert await _status(w.live_screenshot) == 200 and await _status(w.shared_screenshot) == 200
    assert (await fleet.api.sessions.get_job_sessions(w.live_job)).total_sessions == 1
    await cp.delete_instance(w.live_instance)


async def test_a_server_without_a_retention_prunes_replay_records_past_the_floor(tmp_path: Path) -> None:
    """Replay records were kept for ever unless a retention was set: now every pass bounds them."""
    data_dir = tmp_path / "data"
    store = Store(data_dir / "fleet.db")
    store.put("idempotency", "create_instance:old", {"digest": "d"})
    store.put("idempotency", "create_instance:new", {"digest": "d"})
    store._db.execute(
        "UPDATE docs SET created = created - ?, updated = updated - ? WHERE id = 'create_instance:old'",
        (2 * REPLAY_FLOOR, 2 * REPLAY_FLOOR),
    )
    store.close()
    async with LocalFleet(data_dir, s3=False):  # no retention: its first pass runs at start

        def replay_ids() -> set[str]:
            reader = Store(data_dir / "fleet.db")
            try:
                return {id for id, _ in reader.stale("idempotency", time.time() + 1)}
            finally:
                reader.close()

        await wait_until_async(
            lambda: replay_ids() == {"create_instance:new"}, "the old replay record was pruned"
        )


def _table(output: str) -> dict[str, int]:
    return {m[1]: int(m[2]) for m in re.finditer(r"^  (\w+) +(\d+)", output, re.MULTILINE)}


async def _cli(*args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        *CLI, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), PATIENCE)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_the_prune_command_beside_a_running_server(tmp_path: Path) -> None:
    async with LocalFleet(tmp_path / "data") as local:
        fleet = local.async_fleet()
        cp = fleet.api.control_plane
        try:
            job_id = (await fleet.api.traces.create_trace_job(name="prune")).job_id
            async with TaskEnv(await _orderdesk_task(fleet), fleet=fleet, trace_job_id=job_id) as env:
                await env.reset_async()
                await env.step_async({"done": True})
                done = env.env.instance_id if env.env is not None else ""
            live = await cp.create_instance(models.InstanceRequest(env_key="orderdesk"))
            old_folder, _, young_folder = _strays(local.data_dir)
            data_dir = str(local.data_dir)

            # Within an hour: only the strays of two hours ago go; the table names every kind.
            code, out, _ = await _cli("prune", "--data-dir", data_dir, "--older-than", "3600")
            assert code == 0, out
            assert _table(out) == {
                **dict.fromkeys(KINDS, 0),
                "backup": 1,
                "instance_folder": 1,
                "total": 2,
            }
            assert out.startswith(f"fleet-sdk prune: {local.data_dir}: deleted:")
            assert not old_folder.exists() and young_folder.exists()

            # Once the finished episode is a second old, a dry run counts it and deletes nothing...
            async def counted() -> dict[str, int] | None:
                code, out, _ = await _cli("prune", "--data-dir", data_dir, "--older-than", "1", "--dry-run")
                assert code == 0, out
                assert "dry run: nothing was deleted" in out
                table = _table(out)
                return table if table["instance"] else None

            would = await wait_until_async(counted, "a dry run counts the finished episode")
            assert (await cp.get_instance(done)).status == "terminated"
            assert would["session"] == 1 and would["trace_job"] == 1 and would["verifier_execution"] >= 1

            # ... and the real run deletes just that, the server running on.
            code, out, _ = await _cli("prune", "--data-dir", data_dir, "--older-than", "1")
            assert code == 0, out
            assert _table(out) == would
            with pytest.raises(NotFoundError):
                await cp.get_instance(done)
            assert (await cp.get_instance(live.instance_id)).status == "running"
            assert young_folder.exists()  # younger than the ten-minute floor of strays
            await cp.delete_instance(live.instance_id)
        finally:
            await fleet.close()


async def test_the_prune_command_refuses_a_directory_without_server_data(tmp_path: Path) -> None:
    code, out, err = await _cli("prune", "--data-dir", str(tmp_path), "--older-than", "60")
    assert (code, out) == (2, "")
    assert (
        err.strip()
        == f"fleet-sdk prune: error: --data-dir {tmp_path}: no local server data there (no fleet.db)"
    )
    assert not (tmp_path / "fleet.db").exists()  # not created by looking
    code, _, err = await _cli("prune", "--data-dir", str(tmp_path), "--older-than", "0")
    assert code == 2 and "--older-than" in err
