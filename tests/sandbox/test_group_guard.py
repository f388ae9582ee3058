"""``fleet_local.sandbox._process_groups``: process groups registered by a process die when it is SIGKILLed.

A holder process (a real interpreter importing the guard) starts process groups of its own
(``sh`` with two ``sleep`` children, each in its own session), registers them and is then
SIGKILLed; the groups must be gone within a deadline. The gate holds a child back until it is
registered. The server-level version, with Chromium
and verifier sandboxes, is in ``tests/local/test_server_lifecycle.py``.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from _procs import processes
from _waits import PATIENCE

from fleet_local.sandbox import _process_groups as _group_guard
from fleet_local.sandbox._process_groups import GATE_OPEN, gated

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")

DEADLINE = PATIENCE

HOLDER = """
import subprocess, sys
from fleet_local.sandbox import _process_groups as _group_guard

for line in sys.stdin:
    command, *args = line.split()
    if command == "start":
        child = subprocess.Popen(
            ["sh", "-c", "sleep 600 & sleep 600 & wait"], start_new_session=True
        )
        _group_guard.guard_group(child.pid)
        print(child.pid, flush=True)
    elif command == "release":
        _group_guard.release_group(int(args[0]))
        print("released", flush=True)
    elif command == "watchdog":
        watchdog = _group_guard._GUARD._watchdog
        print(watchdog.pid if watchdog is not None else 0, flush=True)
"""


class Holder:
    """The holder process, driven one command (and one answer line) at a time."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", HOLDER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.groups: set[int] = set()

    def ask(self, command: str) -> str:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        return self.process.stdout.readline().strip()

    def start_group(self) -> int:
        pgid = int(self.ask("start"))
        self.groups.add(pgid)
        _until(lambda: len(_members({pgid})) == 3, "the group's sh and both sleeps started")
        return pgid

    def kill(self) -> None:
        self.process.kill()
        self.process.wait(10)
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()


@pytest.fixture
def holder() -> Iterator[Holder]:
    held = Holder()
    try:
        yield held
    finally:
        held.kill()
        for pid in _members(held.groups):  # whatever a test left (a failed one, or on purpose)
            os.kill(pid, signal.SIGKILL)


def _members(groups: set[int]) -> list[int]:
    return [p.pid for p in processes() if p.alive and p.pgrp in groups]


def _alive(pid: int) -> bool:
    return any(p.pid == pid and p.alive for p in processes())


def _until(condition: object, what: str) -> None:
    assert callable(condition)
    deadline = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < deadline, f"not within {DEADLINE}s: {what}"
        time.sleep(0.05)


def test_registered_groups_die_when_their_process_is_sigkilled(holder: Holder) -> None:
    groups = {holder.start_group(), holder.start_group()}
    watchdog = int(holder.ask("watchdog"))
    assert watchdog and _alive(watchdog)
    holder.kill()
    _until(lambda: not _members(groups), "every member of the registered groups is gone")
    _until(lambda: not _alive(watchdog), "the watchdog exited after killing them")


def test_a_released_group_is_left_alone(holder: Holder) -> None:
    kept, released = holder.start_group(), holder.start_group()
    assert holder.ask(f"release {released}") == "released"
    watchdog = int(holder.ask("watchdog"))
    holder.kill()
    _until(lambda: not _members({kept}), "the registered group is gone")
    _until(lambda: not _alive(watchdog), "the watchdog exited")
    assert len(_members({released})) == 3, "a released group (its id may be reused) was killed"


def test_a_killed_watchdog_is_replaced_and_told_every_group(holder: Holder) -> None:
    first = holder.start_group()
    watchdog = int(holder.ask("watchdog"))
    os.kill(watchdog, signal.SIGKILL)
    _until(lambda: not _alive(watchdog), "the first watchdog died")
    second = holder.start_group()
    replacement = int(holder.ask("watchdog"))
    assert replacement not in (0, watchdog)
    holder.kill()
    _until(lambda: not _members({first, second}), "both groups are gone, the first one included")


def test_a_gated_child_whose_parent_goes_first_never_runs(tmp_path: Path) -> None:
    """The parent's end of the pipe closing (as it does when the parent dies) before the gate
    opened: the command never starts."""
    marker = tmp_path / "ran"
    with subprocess.Popen(gated(["sh", "-c", f"touch {marker}"]), stdin=subprocess.PIPE) as child:
        assert child.stdin is not None
        child.stdin.close()
        assert child.wait(DEADLINE) == 125
    assert not marker.exists()


def test_a_gated_child_gets_its_stdin_after_the_gate_line() -> None:
    echo = [sys.executable, "-c", "import sys; sys.stdout.buffer.write(sys.stdin.buffer.read())"]
    payload = b'{"job": 1}\nsecond line\n'
    done = subprocess.run(
        gated(echo), input=GATE_OPEN + payload, capture_output=True, timeout=DEADLINE, check=True
    )
    assert done.stdout == payload


def _watchdog_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "_group_watchdog", Path(_group_guard.__file__).parent / "_group_watchdog.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_watchdog_spares_a_group_id_that_now_names_another_process() -> None:
    """Registered, then reaped without a release, then reused: the id's process has another start
    time than the one registered, and the watchdog leaves it alone."""
    watchdog = _watchdog_module()
    with subprocess.Popen(["sh", "-c", "sleep 600 & sleep 600 & wait"], start_new_session=True) as group:
        try:
            _until(lambda: len(_members({group.pid})) == 3, "the group started")
            watchdog.kill_groups({group.pid: b"0"})  # as if registered for an earlier process
            assert len(_members({group.pid})) == 3
            watchdog.kill_groups({group.pid: watchdog.started(group.pid)})
            _until(lambda: not _members({group.pid}), "the group registered for this process is gone")
        finally:
            for pid in _members({group.pid}):
                os.kill(pid, signal.SIGKILL)
