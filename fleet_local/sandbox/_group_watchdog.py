"""The watchdog of ``fleet_local/sandbox/_process_groups.py``, run as ``python -I -S _group_watchdog.py``.

Imports nothing of ``fleet_sdk`` (and ``fleet_sdk`` never imports it): it must start fast and
hold no more than the standard library. It reads ``+<pgid>`` / ``-<pgid>`` lines on stdin, the pipe whose
only writer is the process that started it. End of file means that process is gone (it
exited, or was killed, SIGKILL included: the kernel closes the pipe either way), so the
watchdog SIGKILLs every process group still registered and exits.
"""

import contextlib
import os
import signal
import sys


def started(pid: int) -> bytes | None:
    """When ``pid`` started (Linux: ``/proc/<pid>/stat``), or None where that cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def kill_groups(groups: dict[int, bytes | None]) -> None:
    """SIGKILL each group, unless its id now names another process than when it was registered.

    A group left registered after its leader was reaped (a wait that timed out) may have had
    its id reused by then: pids wrap around within minutes on a busy machine.
    """
    for group, registered in groups.items():
        now = started(group)
        if registered is not None and now is not None and now != registered:
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)


def main() -> int:
    # Its own session keeps it out of reach of the terminal's Ctrl-C and of a killpg of its
    # parent's group; it ignores SIGINT/SIGTERM too, so only end of file ends it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    groups: dict[int, bytes | None] = {}
    for line in sys.stdin.buffer:
        sign, number = line[:1], line[1:].strip()
        if not number.isdigit() or int(number) <= 1:  # never our own group (0) or init's
            continue
        if sign == b"+":
            groups[int(number)] = started(int(number))  # the leader is alive: just registered
        elif sign == b"-":
            groups.pop(int(number), None)
    kill_groups(groups)
    return 0


if __name__ == "__main__":
    sys.exit(main())
