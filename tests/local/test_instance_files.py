"""A new instance's files are what they were, made with fewer system calls.

``create_instance`` copies the seed into ``current.db`` and ``seed.db`` itself (``sendfile``,
the read-only copy made 0444 through its descriptor) and writes the empty action log in place,
and ``ensure_seed`` checks a seed's marker once per process. These tests pin the outcome: the
copies are byte for byte the built seed, ``seed.db`` is read-only, the log is an empty log SQLite
can write, and a seed removed or built from other SQL is built again.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from fleet_local import _instances
from fleet_local._server import build_state
from fleet_local._state import LocalSettings, LocalState
from fleet_sdk.types import env_instance as models


@pytest.fixture
def state(tmp_path: Path) -> Iterator[LocalState]:
    state = build_state(LocalSettings(data_dir=tmp_path / "data"))
    yield state
    state.store.close()


def _create(state: LocalState) -> Path:
    instance = _instances.create_instance(state, models.InstanceRequest(env_key="orderdesk"))
    return state.instance_dir(instance.instance_id)


def test_a_new_instances_files(state: LocalState) -> None:
    """Both copies hold the built seed's bytes; ``seed.db`` is 0444 and ``current.db`` writable;
    the action log is empty and takes a row; nothing else is left in the folder."""
    folder = _create(state)
    seed = _instances.ensure_seed(state, "orderdesk", state.environments["orderdesk"].default_version)
    assert (folder / "current.db").read_bytes() == (folder / "seed.db").read_bytes() == seed.read_bytes()
    assert stat.S_IMODE((folder / "seed.db").stat().st_mode) == 0o444
    assert (folder / "current.db").stat().st_mode & stat.S_IWUSR
    with contextlib.closing(sqlite3.connect(folder / "action_log.db")) as log:
        assert log.execute("SELECT COUNT(*) FROM action_log").fetchone() == (0,)
        log.execute("INSERT INTO action_log (timestamp, action_type) VALUES ('t', 'reset')")
        log.commit()
    assert sorted(p.name for p in folder.iterdir()) == ["action_log.db", "current.db", "seed.db"]


def test_a_removed_seed_is_built_again(state: LocalState) -> None:
    """The once-per-process check still sees the file: a seed removed after it (a cleaner, a
    person) is rebuilt by the next create, not copied from nothing."""
    first = _create(state)
    version = state.environments["orderdesk"].default_version
    state.seed_path("orderdesk", version).unlink()
    second = _create(state)
    assert (second / "current.db").read_bytes() == (first / "current.db").read_bytes()


def test_a_seed_of_other_sql_is_built_again(state: LocalState) -> None:
    """An environment whose seed SQL changed (a new release on the same data dir) gets a new
    seed, even after this process checked the old one."""
    spec = state.environments["orderdesk"]
    _create(state)
    changed = dataclasses.replace(spec, seed_sql=spec.seed_sql + "\nUPDATE orders SET status = 'paid';")
    state.environments["orderdesk"] = changed
    folder = _create(state)
    with contextlib.closing(sqlite3.connect(folder / "current.db")) as db:
        assert {row[0] for row in db.execute("SELECT DISTINCT status FROM orders")} == {"paid"}
