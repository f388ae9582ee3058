"""A server whose verifier runs are forked from the zygote leaves nothing behind, however it ends.

The zygote is one long-lived jailed interpreter per server: SIGKILL of the server runs no
shutdown code, so the zygote, the run's middle and init and the run itself must all end by
themselves (the process-group guard kills the zygote's ``bwrap``; bubblewrap's PID namespace
takes every run below it; each level also has its parent-death signal). The fresh runner's
twin of this test is ``test_server_lifecycle.py``'s.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from _procs import Proc, processes
from _waits import PATIENCE, wait_until
from test_server_lifecycle import _procs_of, _sigkill_leaves_nothing, post_slow_verifier

from fleet_local import LocalFleet
from fleet_local.sandbox import _sandbox, jail_status

pytestmark = [
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc"),
    pytest.mark.skipif(
        not _sandbox._zygote_serves_here(jail_status()), reason="the zygote needs every part of the jail"
    ),
]


def _zygote_run(proc: Proc) -> bool:
    try:
        argv = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return (
        proc.session == proc.pid
        and not argv[0].endswith(b"bwrap")
        and any(a.endswith(b"/_zygote_main.py") for a in argv)
    )


def _start_slow_zygote_verifier(server: LocalFleet) -> list[Proc]:
    """Run ``test_server_lifecycle.SLOW_VERIFIER`` on ``server``; the server's processes once it runs."""
    post_slow_verifier(server)
    wait_until(lambda: [p for p in _procs_of(server) if _zygote_run(p)], "the zygote's run started")
    return _procs_of(server)


def test_a_sigkilled_server_leaves_no_zygote_or_run_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGKILL of a server mid-run (runner ``zygote``): its zygote (``bwrap`` and interpreter),
    the run's middle and init, and the run itself all end, with no shutdown code run."""
    monkeypatch.setenv("FLEET_VERIFIER_RUNNER", "zygote")
    server = LocalFleet(s3=False).start()
    try:
        procs = _start_slow_zygote_verifier(server)
        kinds = {p.pid for p in procs if _zygote_run(p)}
        assert len(kinds) == 1, "one run, forked from the zygote"
        assert [p for p in procs if b"bwrap" in Path(f"/proc/{p.pid}/cmdline").read_bytes()[:200]], "a zygote"
        _sigkill_leaves_nothing(server, procs)
    finally:
        server.stop()


def test_stop_ends_the_zygote_and_its_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server stopped mid-run (runner ``zygote``) leaves no zygote or run."""
    monkeypatch.setenv("FLEET_VERIFIER_RUNNER", "zygote")
    server = LocalFleet(s3=False).start()
    try:
        procs = _start_slow_zygote_verifier(server)
    finally:
        server.stop()
    pids = {p.pid for p in procs}
    deadline = time.monotonic() + PATIENCE
    while alive := pids & {p.pid for p in processes() if p.alive}:
        assert time.monotonic() < deadline, f"outlived stop(): {sorted(alive)}"
        time.sleep(0.05)
