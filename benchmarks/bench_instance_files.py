"""Instances made and ended on a file system that has seen many: folders spread, or in one group.

Every episode makes an instance folder (``mkdir``, ``current.db``, ``action_log.db``; ``seed.db``
is a link) and removes it when the instance ends. On an ext4 without a journal the server marks
its ``instances`` folder with the top-directory flag (``fleet_local/_folder_spread.py``) so that
each instance's folder lands in a lightly used block group: in one shared group, each new file
scans past every inode freed there in the last minutes, under the group's lock, which the
server's worker threads then queue for. This measures that in this process, without HTTP:
``create_instance`` then ``delete_instance`` from ``--threads`` threads, ``--live`` instances
alive at a time, in two data dirs side by side on the same file system, one flagged (``this``)
and one not (``baseline``). Each side first churns ``--warm`` instances (the freed inodes a
running server leaves behind), then the rounds alternate the sides (A/B, B/A, ...). Printed per
round and side: the CPU (user + system, ``getrusage``) per instance made and ended; then the
median ratio this/baseline with its range. From one thread the spread side is the slower (ext4
searches for a lightly used group on each new folder, and one thread's scans are short); on a
file system without the flag (tmpfs, XFS, ...) both sides are the same. On a journaled ext4
there is no scan, and the server does not set the flag (``skips_recently_freed_inodes``).

``python benchmarks/bench_instance_files.py [--instances 2000] [--warm 10000] [--live 64] [--threads 8]``
"""

from __future__ import annotations

import argparse
import collections
import resource
import statistics
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _side import spread

from fleet_local import _instances
from fleet_local._folder_spread import has_spread_flag, spread_subfolders
from fleet_local._server import build_state
from fleet_local._state import LocalSettings, LocalState
from fleet_sdk.types import env_instance as models


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def churn(state: LocalState, count: int, live: int, threads: int) -> float:
    """Make ``count`` instances from ``threads`` worker threads (the server's are many), each
    ending its oldest whenever it holds more than its share of ``live`` (a trainer's episodes at
    once), then the rest; CPU ms per instance made and ended."""
    request = models.InstanceRequest(env_key="orderdesk")

    def worker(share: int) -> None:
        alive: collections.deque[str] = collections.deque()
        for _ in range(share):
            alive.append(_instances.create_instance(state, request).instance_id)
            if len(alive) > max(1, live // threads):
                _instances.delete_instance(state, alive.popleft())
        while alive:
            _instances.delete_instance(state, alive.popleft())

    started = cpu_seconds()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(worker, [count // threads] * threads))
    return (cpu_seconds() - started) / (count // threads * threads) * 1e3


def main(*, instances: int, warm: int, live: int, threads: int, rounds: int, root: Path) -> None:
    with tempfile.TemporaryDirectory(dir=root, prefix="bench-instance-files-") as tmp:
        sides: dict[str, LocalState] = {}
        for name in ("this", "baseline"):
            sides[name] = build_state(LocalSettings(data_dir=Path(tmp) / name))
            folder = sides[name].instances_dir
            spread_subfolders(folder, spread=name == "this")
        flagged = {name: has_spread_flag(state.instances_dir) for name, state in sides.items()}
        print(f"under {tmp}: spread flag on this side {flagged['this']}, baseline {flagged['baseline']}")
        for name, state in sides.items():
            print(
                f"warm-up, {name}: {warm} instances, {churn(state, warm, live, threads):.2f} ms each",
                flush=True,
            )
        figures: dict[str, list[float]] = {name: [] for name in sides}
        for round_ in range(rounds):
            order = ("this", "baseline") if round_ % 2 == 0 else ("baseline", "this")
            for name in order:
                figures[name].append(churn(sides[name], instances, live, threads))
            this, baseline = figures["this"][-1], figures["baseline"][-1]
            print(f"round {round_ + 1}: CPU per instance, this {this:.2f} ms, baseline {baseline:.2f} ms")
        ratios = [a / b for a, b in zip(figures["this"], figures["baseline"], strict=True)]
        this, baseline = statistics.median(figures["this"]), statistics.median(figures["baseline"])
        print(f"this {this:.2f}, baseline {baseline:.2f} ms per instance; this/baseline {spread(ratios)})")
        for state in sides.values():
            state.store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--instances", type=int, default=2000)
    parser.add_argument("--warm", type=int, default=10000)
    parser.add_argument("--live", type=int, default=64)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    args = parser.parse_args()
    main(
        instances=args.instances,
        warm=args.warm,
        live=args.live,
        threads=args.threads,
        rounds=args.rounds,
        root=args.dir,
    )
