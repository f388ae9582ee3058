"""The watchdog of :mod:`fleet_sdk._group_guard`, run as ``python -I -S _group_watchdog.py``.

Never imported, and imports nothing of ``fleet_sdk``: it must start fast and hold no more
than the standard library. It reads ``+<pgid>`` / ``-<pgid>`` lines on stdin, the pipe whose
only writer is the process that started it. End of file means that process is gone (it
exited, or was killed, SIGKILL included: the kernel closes the pipe either way), so the
watchdog SIGKILLs every process group still registered and exits.
"""

import contextlib
import os
import signal
import sys


def main() -> int:
    # Its own session keeps it out of reach of the terminal's Ctrl-C and of a killpg of its
    # parent's group; it ignores SIGINT/SIGTERM too, so only end of file ends it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    groups: set[int] = set()
    for line in sys.stdin.buffer:
        sign, number = line[:1], line[1:].strip()
        if not number.isdigit() or int(number) <= 1:  # never our own group (0) or init's
            continue
        if sign == b"+":
            groups.add(int(number))
        elif sign == b"-":
            groups.discard(int(number))
    for group in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
