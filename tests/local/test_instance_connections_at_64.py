"""A trainer's 64 episodes at once keep their instances' open SQLite connections.

``_instance_dbs.InstanceConnections`` kept at most 96 idle connections, 32 instances' worth of
the three a tool-calling instance uses (``current.db`` read-only and read-write, and its action
log). With 64 episodes in flight, tool calls taking turns across the instances evicted each
other's connections least recently used first, so nearly every call opened and parsed its
databases afresh: work that appeared only under concurrency (the server's CPU per episode grew
from N=1 to N=64 in ``benchmarks/bench_episodes.py``). Real files, real SQLite.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import get_args

from fleet_local._instance_dbs import MAX_IDLE, InstanceConnections, Kind, default_max_idle


def test_64_instances_taking_turns_reuse_every_connection(tmp_path: Path) -> None:
    """Two rounds of calls over 64 instances, each using all three kinds: the second round
    borrows the very connections the first handed back (none was evicted and reopened)."""
    folders = []
    for n in range(64):
        folder = tmp_path / f"inst_{n}"
        folder.mkdir()
        for name in ("current.db", "action_log.db"):
            sqlite3.connect(folder / name).close()
        folders.append(folder)
    pool = InstanceConnections()
    kinds: tuple[Kind, ...] = get_args(Kind)
    first: dict[tuple[int, Kind], sqlite3.Connection] = {}
    for round_ in range(2):
        for n, folder in enumerate(folders):
            for kind in kinds:
                with pool.borrow(f"inst_{n}", folder, kind) as conn:
                    conn.execute("SELECT 1").fetchall()
                    if round_ == 0:
                        first[(n, kind)] = conn
                    else:
                        assert conn is first[(n, kind)], f"instance {n}'s {kind} connection was reopened"
    assert len(pool) == 64 * len(kinds)
    for conn in first.values():
        conn.close()


def test_the_bound_follows_a_low_descriptor_limit() -> None:
    """Under a 400-descriptor limit idle connections take at most a quarter of it (100), and
    under a high one the pool keeps ``MAX_IDLE``; checked in a child process whose limit is
    really lowered."""
    code = (
        "import resource\n"
        "soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)\n"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (400, hard))\n"
        "from fleet_local._instance_dbs import default_max_idle\n"
        "print(default_max_idle())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert int(out.stdout) == 100
    import resource

    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] >= 4 * MAX_IDLE:
        assert default_max_idle() == MAX_IDLE
