"""One cgroup (v2) per verifier run, where this process may make them.

A run's cgroup bounds what the OS jail's rlimits cannot: memory of every process together with
its tmpfs pages (``memory.max``, no swap, the whole group killed at the limit), the number of
processes and threads (``pids.max``), and its CPU share (``cpu.weight`` below the default 100
of the server's own group). ``cgroup.kill`` ends whatever is left when the run ends.

Runs are made inside this process's own cgroup, which therefore needs the ``memory``, ``pids``
and ``cpu`` controllers enabled for its children. That works where the process is in the
hierarchy's root cgroup, or alone in a delegated one (systemd ``Delegate=yes``, a container
with its own cgroup namespace): a cgroup holding processes cannot enable controllers for its
children, so a process alone in its cgroup first moves into a leaf child, ``fleet-server``.
Anywhere else (another process shares the cgroup, cgroup v1, a read-only ``/sys/fs/cgroup``)
:func:`find_cgroup_parent` says why not, and runs are bounded by the jail's rlimits and sized
tmpfs mounts alone (``_jail.JailStatus.summary``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import time
from pathlib import Path

__all__ = ["CPU_WEIGHT", "RunCgroup", "find_cgroup_parent"]

CPU_WEIGHT = 25
"""``cpu.weight`` of a run: a quarter of the default 100 a server's own cgroup has."""

_CONTROLLERS = ("cpu", "memory", "pids")
_SERVER_LEAF = "fleet-server"
_RUN_PREFIX = "fleet-verifier-"
_EMPTY_WAIT = 2.0


def _cgroup2_mount(mountinfo: str) -> tuple[Path, str] | None:
    """(mount point, root inside the hierarchy) of the cgroup v2 mount in ``/proc/self/mountinfo``."""
    for line in mountinfo.splitlines():
        fields = line.split()
        if " - cgroup2 " in line and len(fields) > 4:
            return Path(fields[4]), fields[3]
    return None


def _own_cgroup(proc_cgroup: str) -> str | None:
    """This process's cgroup v2 path, from ``/proc/self/cgroup`` (the ``0::`` line)."""
    for line in proc_cgroup.splitlines():
        if line.startswith("0::"):
            return line[3:]
    return None


def _enable_controllers(path: Path) -> None:
    enabled = (path / "cgroup.subtree_control").read_text().split()
    wanted = [c for c in _CONTROLLERS if c not in enabled]
    if wanted:
        (path / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in wanted))


def find_cgroup_parent(proc: Path = Path("/proc/self")) -> tuple[Path | None, str]:
    """The cgroup each run's own cgroup is made in, or ``None`` and why runs get none.

    May move this process into a leaf ``fleet-server`` cgroup (see the module docs); call it
    once per process.

    Args:
        proc: This process's ``/proc`` entry (tests point it elsewhere).
    """
    try:
        mount = _cgroup2_mount((proc / "mountinfo").read_text())
        own = _own_cgroup((proc / "cgroup").read_text())
    except OSError as exc:
        return None, f"cannot read this process's cgroup: {exc.strerror}"
    if mount is None or own is None:
        return None, "no cgroup v2 hierarchy is mounted"
    mount_point, mount_root = mount
    relative = os.path.relpath(own, mount_root) if own != mount_root else "."
    if relative.startswith(".."):
        return None, f"this process's cgroup {own} is outside the mounted cgroup v2 hierarchy"
    path = (mount_point / relative).resolve()
    try:
        available = (path / "cgroup.controllers").read_text().split()
    except OSError as exc:
        return None, f"cannot read {path / 'cgroup.controllers'}: {exc.strerror}"
    missing = [c for c in _CONTROLLERS if c not in available]
    if missing:
        return None, f"the cgroup v2 controllers {', '.join(missing)} are not available in {path}"
    try:
        try:
            _enable_controllers(path)
        except OSError as exc:
            members = (path / "cgroup.procs").read_text().split()
            if exc.errno != errno.EBUSY or members != [str(os.getpid())]:
                raise
            # Alone in a cgroup that holds processes: step aside into a leaf, then delegate.
            leaf = path / _SERVER_LEAF
            leaf.mkdir(exist_ok=True)
            (leaf / "cgroup.procs").write_text(str(os.getpid()))
            _enable_controllers(path)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if exc.errno == errno.EBUSY:
            reason = "other processes share this process's cgroup"
        return None, f"cannot enable the cpu, memory and pids controllers in {path}: {reason}"
    return path, ""


class RunCgroup:
    """The cgroup of one run: made with its limits, joined by the run's first process, removed after.

    Args:
        parent: From :func:`find_cgroup_parent`.
        memory_bytes: ``memory.max`` (processes and tmpfs together).
        pids: ``pids.max`` (processes and threads).

    Raises:
        OSError: The cgroup could not be made or limited (it is removed again).
    """

    def __init__(self, parent: Path, *, memory_bytes: int, pids: int) -> None:
        self.path = parent / f"{_RUN_PREFIX}{secrets.token_hex(8)}"
        self.path.mkdir()
        try:
            limits = {
                "memory.max": str(memory_bytes),
                "memory.swap.max": "0",
                "memory.oom.group": "1",
                "pids.max": str(pids),
                "cpu.weight": str(CPU_WEIGHT),
            }
            for name, value in limits.items():
                if name == "memory.swap.max" and not (self.path / name).exists():
                    continue  # no swap accounting on this kernel
                (self.path / name).write_text(value)
        except OSError:
            self.remove()
            raise

    def add(self, pid: int) -> None:
        """Move ``pid`` (the run's first process, before it starts anything) into the cgroup.

        Args:
            pid: The process id.
        """
        (self.path / "cgroup.procs").write_text(str(pid))

    def remove(self) -> None:
        """Kill whatever is left in the cgroup and remove it (waits up to 2 s for it to empty)."""
        with contextlib.suppress(OSError):
            (self.path / "cgroup.kill").write_text("1")
        deadline = time.monotonic() + _EMPTY_WAIT
        while True:
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError as exc:
                if exc.errno != errno.EBUSY or time.monotonic() > deadline:
                    return  # an empty cgroup left behind holds nothing; never raise over it
            time.sleep(0.01)
