"""The instances folder carries ext4's top-directory flag where ext4 has no journal.

``_folder_spread.spread_subfolders`` sets ``FS_TOPDIR_FL`` so that ext4 places each instance's
folder (and so its files) in a lightly used block group instead of the one all instances shared,
where, without a journal, every new file scanned past the inodes the last minutes' instances
freed; ``skips_recently_freed_inodes`` tells that file system from others. These tests run on the
real file systems of the machine (the one under pytest's temporary folder, ext4 without a journal
in CI, and a tmpfs, which has no such flag and must be left alone without an error), and on
stand-in ``/proc`` and ``/sys`` trees for the file systems the machine does not have.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from fleet_local._folder_spread import has_spread_flag, skips_recently_freed_inodes, spread_subfolders
from fleet_local._server import build_state
from fleet_local._state import LocalSettings

_LINUX = pytest.mark.skipif(os.uname().sysname != "Linux", reason="file flags are Linux ioctls")


def _file_system(path: Path) -> str:
    found = subprocess.run(["stat", "-f", "-c", "%T", str(path)], capture_output=True, text=True, check=True)
    return found.stdout.strip()


@_LINUX
def test_the_flag_is_set_and_read_back_where_the_file_system_has_it(tmp_path: Path) -> None:
    """On ext2/3/4 the flag is set (``lsattr`` shows ``T``), once, setting it again keeps it and
    clearing it clears it; on any other file system the calls answer False and change nothing."""
    folder = tmp_path / "instances"
    folder.mkdir()
    supported = _file_system(tmp_path) in {"ext2/ext3", "ext4"}
    assert spread_subfolders(folder) is supported
    assert has_spread_flag(folder) is supported
    assert spread_subfolders(folder) is supported
    if supported:
        shown = subprocess.run(["lsattr", "-d", str(folder)], capture_output=True, text=True, check=True)
        assert "T" in shown.stdout.split()[0]
    assert spread_subfolders(folder, spread=False) is False  # cleared (the benchmark's baseline)
    assert has_spread_flag(folder) is False


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


def _stand_ins(tmp_path: Path, *, ext4: bool, journals: list[str] | None) -> tuple[Path, Path]:
    """``/sys`` with this folder's device as ``vda1``, and ``/proc`` with what ``ext4`` and
    ``journals`` say (None: no ``/proc/fs/jbd2`` at all)."""
    device = os.stat(tmp_path).st_dev
    sys_root, proc = tmp_path / "sys", tmp_path / "proc"
    disk = sys_root / "devices" / "virtio0" / "block" / "vda" / "vda1"
    disk.mkdir(parents=True)
    (sys_root / "dev" / "block").mkdir(parents=True)
    (sys_root / "dev" / "block" / f"{os.major(device)}:{os.minor(device)}").symlink_to(disk)
    (proc / "fs").mkdir(parents=True)
    if ext4:
        (proc / "fs" / "ext4" / "vda1").mkdir(parents=True)
    if journals is not None:
        (proc / "fs" / "jbd2").mkdir()
        for name in journals:
            (proc / "fs" / "jbd2" / name).mkdir()
    return proc, sys_root


@pytest.mark.parametrize(
    ("ext4", "journals", "expected"),
    [
        (True, [], True),  # ext4, jbd2 loaded, no journal for this disk (this project's machines)
        (True, None, True),  # ext4 and no jbd2 at all
        (True, ["vda1-8"], False),  # a journaled ext4
        (True, ["vda-8", "vda12-8", "dm-0-8"], True),  # journals of other devices only
        (False, [], False),  # not ext4
    ],
)
def test_which_file_systems_scan_past_freed_inodes(
    tmp_path: Path, ext4: bool, journals: list[str] | None, expected: bool
) -> None:
    proc, sys_root = _stand_ins(tmp_path, ext4=ext4, journals=journals)
    assert skips_recently_freed_inodes(tmp_path, proc=proc, sys_root=sys_root) is expected


def test_a_device_without_a_disk_is_not_flagged(tmp_path: Path) -> None:
    """overlayfs, tmpfs: no ``/sys/dev/block`` entry for the folder's device."""
    (tmp_path / "sys").mkdir()
    assert skips_recently_freed_inodes(tmp_path, proc=tmp_path / "proc", sys_root=tmp_path / "sys") is False
    assert skips_recently_freed_inodes(Path("/dev/shm")) is False


@_LINUX
def test_the_server_spreads_its_instances_folder_only_where_it_helps(tmp_path: Path) -> None:
    """``build_state`` makes ``<data_dir>/instances`` and flags it on an ext4 without a journal
    (as in CI), and leaves it alone elsewhere."""
    state = build_state(LocalSettings(data_dir=tmp_path / "data"))
    try:
        folder = state.instances_dir
        assert folder.is_dir()
        assert has_spread_flag(folder) is skips_recently_freed_inodes(folder)
    finally:
        state.store.close()
