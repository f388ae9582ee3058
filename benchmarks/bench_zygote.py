"""CPU per jailed verifier run: a fresh interpreter per run against runs forked from the zygote.

Runs a small verifier (two queries on two SQLite databases, as a task's) ``--runs`` times in a
row with each runner, the runners interleaved (fresh, zygote, zygote, fresh, ...) over
``--rounds`` rounds, all in this process (``run_sandboxed``, as the server calls it). Counted
per run, every process's CPU:

- this process (the server's side of a run): ``time.process_time``;
- a fresh run's processes: the gate, ``bwrap`` and the jailed interpreter. bubblewrap's inner
  process outlives the ``bwrap`` this process waits for, so this process makes itself the
  subreaper of its descendants (``PR_SET_CHILD_SUBREAPER``), reaps what is reparented to it, and
  counts their ``cutime``/``cstime``;
- the zygote's processes: a run's middle, init and run are reaped by waitpid down the chain
  (run by init, init by middle, middle by the zygote), so their CPU lands in the zygote
  interpreter's ``cutime``/``cstime``; the zygote itself lives on. Read: ``utime + stime +
  cutime + cstime`` of every process of the zygote's tree (its ``bwrap``, bwrap's init, the
  interpreter) before and after, from ``/proc/<pid>/stat``. The zygote's own start (once per
  server process) is printed separately.

Printed: per round and runner, ms of CPU per run (this process, children, zygote, total) and the
ratio zygote/fresh of the totals; the median ratio over the rounds and its range. CPU is counted
in clock ticks (10 ms), so a figure needs a few dozen runs.

``python benchmarks/bench_zygote.py [--runs 40] [--rounds 4]``
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

from fleet_local.sandbox import _zygote, jail_status, run_sandboxed_sync

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_episodes import adopt_orphans, orphans_cpu, process_cpu
from bench_episodes import reap_orphans as reap_adopted

VERIFIER = """
def verify(env):
    before = env.db("seed").query("SELECT count(*) FROM users", []).rows[0][0]
    after = env.db("current").query("SELECT count(*) FROM users", []).rows[0][0]
    return 1.0 if after == before + 1 else 0.0
"""


def reap_orphans() -> None:
    """Reap every exited child (adopted or not) but the zygote's ``bwrap``, which lives on."""
    reap_adopted(_zygote.zygote_pid())


def zygote_tree() -> list[int]:
    """The zygote's long-lived processes: its ``bwrap``, bwrap's init and the interpreter."""
    top = _zygote.zygote_pid()
    if top is None:
        return []
    tree, todo = [top], [top]
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError):
                continue
            parents.setdefault(ppid, []).append(int(entry.name))
    while todo:
        for child in parents.get(todo.pop(), []):
            tree.append(child)
            if len(tree) < 3:  # bwrap -> init -> interpreter; the interpreter's middles come and go
                todo.append(child)
    return tree[:3]


def zygote_cpu() -> float:
    return sum(process_cpu(pid) for pid in zygote_tree())


def batch(runner: str, databases: dict[str, str], runs: int) -> tuple[float, float, float]:
    """(this process, children, zygote) CPU ms per run of ``runs`` sequential runs."""
    _zygote.set_runner(runner)
    reap_orphans()
    own, children, zygote = time.process_time(), orphans_cpu(), zygote_cpu()
    for _ in range(runs):
        outcome = run_sandboxed_sync(VERIFIER, databases=databases)
        if outcome.score != 1.0:
            raise SystemExit(f"{runner}: the verifier failed: {outcome.error}")
    time.sleep(0.2)  # a fresh run's inner process exits just after its bwrap
    reap_orphans()
    return (
        (time.process_time() - own) / runs * 1e3,
        (orphans_cpu() - children) / runs * 1e3,
        (zygote_cpu() - zygote) / runs * 1e3,
    )


def make_databases(root: Path) -> dict[str, str]:
    paths = {}
    for name, rows in (("seed", 1), ("current", 2)):
        path = root / f"{name}.db"
        with sqlite3.connect(path) as conn:
            conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
            conn.executemany("INSERT INTO users VALUES (?, ?)", [(i, f"user {i}") for i in range(rows)])
        conn.close()
        paths[name] = str(path)
    return paths


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    status = jail_status()
    if not status.available:
        raise SystemExit(status.summary())
    if not adopt_orphans():
        raise SystemExit("cannot become a subreaper: the fresh runs' CPU would not be counted")
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        databases = make_databases(root)
        _zygote.set_database_roots([root])
        # Warm up both (the jail probe, the bytecode copy); the zygote's start is counted apart.
        batch("fresh", databases, 2)
        reap_orphans()
        before_own, before_children = time.process_time(), orphans_cpu()
        _zygote.set_runner("zygote")
        run_sandboxed_sync(VERIFIER, databases=databases)
        start = (time.process_time() - before_own + orphans_cpu() - before_children + zygote_cpu()) * 1e3
        print(f"zygote start (once per server process, with its first run): {start:.1f} ms CPU")
        if "Runner: zygote" not in status.summary():
            raise SystemExit("the zygote does not serve runs here: " + status.summary())
        ratios, totals = [], {"fresh": [], "zygote": []}
        for round_ in range(args.rounds):
            order = ("fresh", "zygote") if round_ % 2 == 0 else ("zygote", "fresh")
            figures = {}
            for runner in order:
                own, children, zygote = batch(runner, databases, args.runs)
                figures[runner] = own + children + zygote
                totals[runner].append(figures[runner])
                print(
                    f"round {round_ + 1} {runner:6}: this process {own:5.1f}, children {children:5.1f}, "
                    f"zygote {zygote:5.1f} = {figures[runner]:5.1f} ms CPU per run"
                )
            ratios.append(figures["zygote"] / figures["fresh"])
            print(f"round {round_ + 1}: zygote / fresh = {ratios[-1]:.2f}x")
        _zygote.stop_zygote()
    print(
        f"median per run: fresh {statistics.median(totals['fresh']):.1f} ms, "
        f"zygote {statistics.median(totals['zygote']):.1f} ms; zygote / fresh median "
        f"{statistics.median(ratios):.2f}x (range {min(ratios):.2f}-{max(ratios):.2f}), "
        f"{args.runs} runs x {args.rounds} rounds per runner; load average {os.getloadavg()[0]:.1f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
