"""The processes of this machine as the tests see them, read from ``/proc``.

One reader for every test that checks no process outlives what started it (servers, verifier
sandboxes, browsers, an eval run killed half way); and ``path_without``, the ``PATH`` a child
gets to play a machine where a program (``bwrap``) is not installed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "Proc",
    "alive_in",
    "chromium_groups",
    "descendants",
    "path_without",
    "processes",
    "thread_cpu_ticks",
]


@dataclass(frozen=True)
class Proc:
    """One process: the fields of ``/proc/<pid>/stat`` the tests use."""

    pid: int
    state: str
    ppid: int
    pgrp: int
    session: int

    @property
    def alive(self) -> bool:
        """Running or sleeping, not a zombie waiting to be reaped."""
        return self.state != "Z"

    def cmdline(self) -> bytes:
        """Its command line (NUL-separated), or ``b""`` once it has gone."""
        try:
            return (Path("/proc") / str(self.pid) / "cmdline").read_bytes()
        except OSError:
            return b""


def processes() -> list[Proc]:
    """Every process now (zombies included: filter on :attr:`Proc.alive`)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # it ended while we looked
            continue
        # "pid (comm) state ppid pgrp session ...": comm may hold spaces and ")", so split after the last ")"
        fields = stat.rsplit(")", 1)[1].split()
        found.append(Proc(int(entry.name), fields[0], int(fields[1]), int(fields[2]), int(fields[3])))
    return found


def descendants(pid: int) -> set[int]:
    """Live descendants of ``pid`` (children in their own sessions included)."""
    children: dict[int, list[int]] = {}
    for proc in processes():
        if proc.alive:
            children.setdefault(proc.ppid, []).append(proc.pid)
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def chromium_groups(data_dir: Path) -> set[int]:
    """Process groups of the lease browsers a local server started (their profiles live in its data dir)."""
    profile = b"--user-data-dir=" + str(data_dir).encode()  # not the server's own --data-dir
    return {p.pgrp for p in processes() if b"chromium" in (c := p.cmdline()) and profile in c}


def alive_in(groups: set[int]) -> list[int]:
    """Live processes of the given process groups."""
    return [p.pid for p in processes() if p.alive and p.pgrp in groups]


def path_without(program: str) -> str:
    """This process's ``PATH`` without the directories holding ``program``: this machine as one
    where it is not installed."""
    entries = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join(entry for entry in entries if entry and not (Path(entry) / program).exists())


def thread_cpu_ticks(pid: int) -> dict[int, int]:
    """CPU time (user + system, in clock ticks) each live thread of ``pid`` has used, by thread id."""
    ticks = {}
    for task in (Path("/proc") / str(pid) / "task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended while we looked
            continue
        ticks[int(task.name)] = int(fields[11]) + int(fields[12])  # utime, stime
    return ticks
