"""The instances folder carries ext4's top-directory flag where the file system has it.

``_folder_spread.spread_subfolders`` sets ``FS_TOPDIR_FL`` so that ext4 places each instance's
folder (and so its files) in a lightly used block group instead of the one all instances shared,
where every new file scanned past the inodes the last minutes' instances freed. These tests run
on the real file systems of the machine: the one under pytest's temporary folder (ext4 in CI)
and a tmpfs, which has no such flag and must be left alone without an error.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from fleet_local._folder_spread import has_spread_flag, spread_subfolders
from fleet_local._server import build_state
from fleet_local._state import LocalSettings

_LINUX = pytest.mark.skipif(os.uname().sysname != "Linux", reason="file flags are Linux ioctls")


def _file_system(path: Path) -> str:
    found = subprocess.run(["stat", "-f", "-c", "%T", str(path)], capture_output=True, text=True, check=True)
    return found.stdout.strip()


@_LINUX
def test_the_flag_is_set_and_read_back_where_the_file_system_has_it(tmp_path: Path) -> None:
    """On ext2/3/4 the flag is set (``lsattr`` shows ``T``), once, and setting it again keeps
    it; on any other file system the call answers False and changes nothing."""
    folder = tmp_path / "instances"
    folder.mkdir()
    supported = _file_system(tmp_path) in {"ext2/ext3", "ext4"}
    assert spread_subfolders(folder) is supported
    assert has_spread_flag(folder) is supported
    assert spread_subfolders(folder) is supported
    if supported:
        shown = subprocess.run(["lsattr", "-d", str(folder)], capture_output=True, text=True, check=True)
        assert "T" in shown.stdout.split()[0]


@_LINUX
def test_a_file_system_without_flags_is_left_alone(tmp_path: Path) -> None:
    """tmpfs has no such flag: False, no error, the folder as it was."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or _file_system(shm) != "tmpfs":
        pytest.fail("this test needs a tmpfs at /dev/shm (Debian and the CI machines have one)")
    folder = shm / f"fleet-spread-{os.getpid()}"
    folder.mkdir()
    try:
        assert spread_subfolders(folder) is False
        assert has_spread_flag(folder) is False
        assert folder.is_dir()
    finally:
        folder.rmdir()


def test_a_missing_folder_is_no_error(tmp_path: Path) -> None:
    assert spread_subfolders(tmp_path / "absent") is False
    assert has_spread_flag(tmp_path / "absent") is False


@_LINUX
def test_the_server_spreads_its_instances_folder(tmp_path: Path) -> None:
    """``build_state`` makes ``<data_dir>/instances`` and flags it where it can."""
    state = build_state(LocalSettings(data_dir=tmp_path / "data"))
    try:
        folder = state.instance_dir("inst_x").parent
        assert folder.is_dir()
        assert has_spread_flag(folder) is (_file_system(tmp_path) in {"ext2/ext3", "ext4"})
    finally:
        state.store.close()
