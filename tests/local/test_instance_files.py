"""A new instance's files are what they were, made with fewer system calls and fewer inodes.

``create_instance`` copies the seed into ``current.db`` itself (``sendfile``), makes ``seed.db``
a hard link to the built seed (kept 0444 by ``ensure_seed``; a 0444 copy where a link cannot be
made) and writes the empty action log in place, and ``ensure_seed`` checks a seed's marker once
per process. These tests pin the outcome: both databases hold the built seed's bytes, ``seed.db``
is read-only, the log is an empty log SQLite can write, a seed removed or built from other SQL
is built again, and no path to ``seed.db`` ever writes into the built seed that instances share.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import os
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


def _built_seed(state: LocalState) -> Path:
    return _instances.ensure_seed(state, "orderdesk", state.environments["orderdesk"].default_version)


def test_seed_db_is_a_read_only_link_to_the_built_seed(state: LocalState) -> None:
    """Every instance's ``seed.db`` is the built seed's inode (no new file, nothing copied), the
    built seed is 0444, and deleting the instances leaves it whole."""
    folders = [_create(state), _create(state)]
    seed = _built_seed(state)
    before = seed.read_bytes()
    assert stat.S_IMODE(seed.stat().st_mode) == 0o444
    assert {(folder / "seed.db").stat().st_ino for folder in folders} == {seed.stat().st_ino}
    for folder in folders:
        _instances.delete_instance(state, folder.name)
        assert not folder.exists()
    assert seed.read_bytes() == before
    assert seed.stat().st_nlink == 1


def test_a_seed_that_cannot_be_linked_is_copied_read_only(
    state: LocalState, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another file system (or the link limit) makes ``seed.db`` a 0444 copy of the same bytes."""
    seed = _built_seed(state)

    def cross_device(src: object, dst: object) -> None:
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(_instances.os, "link", cross_device)
    folder = _create(state)
    copy = folder / "seed.db"
    assert copy.stat().st_ino != seed.stat().st_ino
    assert copy.read_bytes() == seed.read_bytes()
    assert stat.S_IMODE(copy.stat().st_mode) == 0o444


def test_a_writable_built_seed_is_copied_not_linked(state: LocalState) -> None:
    """A built seed this process could not make read-only (another owner's data dir) is never
    linked, since the link would be writable: ``seed.db`` stays a 0444 copy."""
    seed = _built_seed(state)
    os.chmod(seed, 0o644)
    folder = _create(state)
    assert (folder / "seed.db").stat().st_ino != seed.stat().st_ino
    assert stat.S_IMODE((folder / "seed.db").stat().st_mode) == 0o444
    assert stat.S_IMODE(seed.stat().st_mode) == 0o644


def test_an_old_link_is_never_written_through(state: LocalState, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``seed.db`` already linked to the built seed (a folder made again under the same id),
    then copied over because linking fails: the copy replaces the link; truncating through it
    would have emptied the seed every instance shares."""
    seed = _built_seed(state)
    before = seed.read_bytes()
    target = state.instance_dir("inst_again") / "seed.db"
    target.parent.mkdir(parents=True)
    os.link(seed, target)

    def no_links(src: object, dst: object) -> None:
        raise OSError(errno.EMLINK, "Too many links")

    monkeypatch.setattr(_instances.os, "link", no_links)
    _instances._link_seed(seed, target)
    assert seed.read_bytes() == before
    assert target.read_bytes() == before
    assert target.stat().st_ino != seed.stat().st_ino
