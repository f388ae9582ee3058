"""Ask ext4 to spread a folder's subfolders over the file system (``chattr +T``).

Every instance is a folder of new files under ``<data_dir>/instances/``, removed when the
instance ends: at a trainer's pace, thousands of files made and removed a minute. ext4 puts a
new folder's inode in its parent's block group and a new file's in its folder's, so all of them
land in one group. There, an ext4 without a journal (as on the machines this project is measured
on) passes over every inode freed in the last few minutes, one by one, before it takes a free one:
at 64 episodes at once that scan (``find_inode_bit`` and ``recently_deleted`` in ``perf``) was
the largest part of the server's kernel time, and it grows with the pace of the run.

With the top-directory flag (``FS_TOPDIR_FL``, what ``chattr +T`` sets) ext4 places each new
subfolder in a lightly used group (its Orlov allocator), and the folder's files follow it, so
no group gathers a run's freed inodes. The flag is set only where that scan happens, an ext4
without a journal (:func:`skips_recently_freed_inodes`): elsewhere it would only cost the search
for a group on each new folder. Where it cannot be set (another file system, a folder this
process does not own, not Linux) nothing changes and nothing is raised.
"""

from __future__ import annotations

import array
import os
import sys
from pathlib import Path

__all__ = ["TOPDIR_FLAG", "has_spread_flag", "skips_recently_freed_inodes", "spread_subfolders"]

TOPDIR_FLAG = 0x00020000
"""``FS_TOPDIR_FL`` (``linux/fs.h``)."""

_GET_FLAGS = 0x80086601  # FS_IOC_GETFLAGS
_SET_FLAGS = 0x40086602  # FS_IOC_SETFLAGS


def skips_recently_freed_inodes(
    folder: Path, *, proc: Path = Path("/proc"), sys_root: Path = Path("/sys")
) -> bool:
    """Whether ``folder`` is on an ext4 without a journal: the one that passes over recently
    freed inodes when it makes a file (read from ``/sys`` and ``/proc``; False when unsure).

    Args:
        folder: An existing folder.
        proc: Where procfs is mounted (tests give a stand-in tree).
        sys_root: Where sysfs is mounted (tests give a stand-in tree).
    """
    try:
        device = os.stat(folder).st_dev
        # /sys/dev/block/MAJ:MIN links to the block device (vda, vda1, dm-0); none for overlayfs,
        # tmpfs and other devices without a disk.
        link = sys_root / "dev" / "block" / f"{os.major(device)}:{os.minor(device)}"
        name = link.resolve(strict=True).name
    except OSError:
        return False
    if not (proc / "fs" / "ext4" / name).is_dir():
        return False  # not ext4
    try:  # a journaled ext4 has a jbd2 entry named after its device: vda-8, dm-0-8
        return not any(entry.name.startswith(f"{name}-") for entry in (proc / "fs" / "jbd2").iterdir())
    except FileNotFoundError:  # no jbd2 loaded: no file system here has a journal
        return True
    except OSError:
        return False


def has_spread_flag(folder: Path) -> bool:
    """Whether ``folder`` carries the top-directory flag (False where flags cannot be read).

    Args:
        folder: An existing folder.
    """
    return _top_directory_flag(folder, None)


def spread_subfolders(folder: Path, spread: bool = True) -> bool:
    """Set (or clear) the top-directory flag on ``folder``, so that ext4 spreads its new subfolders.

    Args:
        folder: An existing folder.
        spread: Set the flag; False clears it.

    Returns:
        Whether the flag is set now (False on a file system without it, or without the right).
    """
    return _top_directory_flag(folder, spread)


def _top_directory_flag(folder: Path, wanted: bool | None) -> bool:
    """Read the flag (``wanted`` None) or set it to ``wanted``; whether it is set afterwards."""
    if not sys.platform.startswith("linux"):
        return False
    import fcntl

    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        flags = array.array("i", [0])  # the kernel reads and writes an int, whatever the ioctl's size says
        fcntl.ioctl(fd, _GET_FLAGS, flags, True)
        if wanted is not None and bool(flags[0] & TOPDIR_FLAG) != wanted:
            changed = flags[0] | TOPDIR_FLAG if wanted else flags[0] & ~TOPDIR_FLAG
            fcntl.ioctl(fd, _SET_FLAGS, array.array("i", [changed]))
            fcntl.ioctl(fd, _GET_FLAGS, flags, True)
        return bool(flags[0] & TOPDIR_FLAG)
    except OSError:  # ENOTTY / EOPNOTSUPP elsewhere than ext2/3/4, EPERM not the owner
        return False
    finally:
        os.close(fd)
