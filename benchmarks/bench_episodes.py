"""Throughput of scripted TaskEnv episodes on the local server, against one-at-a-time.

The concurrency levels are interleaved (1, 16, 64, 1, 16, 64, ...) in one run, and every
level's rate is printed as a ratio to concurrency 1 of the same run. Failed episodes (an
exception or a reward other than 1.0) and retried requests (the SDK logs each retry as a
warning on ``fleet_sdk.http`` / ``fleet_sdk.mcp``) are counted. ``--burst 256`` then runs
that many episodes at once, one time, for the errors and retries at full concurrency.

Each level also prints the CPU per episode of the client (this process), of the server (its
process and the children it waited for), and of the jailed verifiers, and how many cores the
whole machine kept busy (from ``/proc/stat``). A jailed verifier's interpreter outlives the
``bwrap`` the server waits for, so its CPU reaches no ancestor's ``cutime`` (it used to count only
in the machine's busy time): the process that starts the server makes itself the subreaper of
its descendants (``PR_SET_CHILD_SUBREAPER``), reaps what is reparented to it, and counts that as
the verifiers' CPU. Runs forked from the verifier zygote (``FLEET_VERIFIER_RUNNER=zygote``)
are reaped inside the zygote, which lives as long as the server, so no subreaper ever sees
them: their CPU is read from the zygote's own processes instead (``utime + stime + cutime +
cstime`` of its ``bwrap``, bwrap's init and the interpreter, from ``/proc/<pid>/stat``, before
and after; each run's CPU reaches the interpreter's ``cutime`` when it is reaped down its
chain). From N=1's busy cores follows the ceiling of any concurrency on this
machine: cores / busy(N=1), when the CPU per episode stays flat.

``--baseline DIR`` compares this checkout with another (``git archive main | tar -x -C DIR``)
instead: each side is a fresh interpreter with its own server and its SDK from its checkout,
warmed up once; each round runs every level on both sides back to back, in alternating order
(A/B, B/A, ...), so a busy machine's swings land on both. Printed are the episodes/s of each
side per round and level, and per level the median ratio this/baseline with its quartiles and
range over the rounds, for episodes/s, for the server's CPU per episode, for the verifiers' and
for the two together.

``python benchmarks/bench_episodes.py [--episodes 32] [--concurrency 1,16,64] [--rounds 2] [--burst 256]``
``python benchmarks/bench_episodes.py --baseline DIR [--concurrency 1,16] [--episodes 16] [--rounds 20]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from _side import Side, spread

from fleet_local import LocalFleet
from fleet_sdk import AsyncFleet, TaskEnv
from fleet_sdk.tasks import Task

HERE = Path(__file__).resolve().parent.parent


class RetryCounter(logging.Handler):
    """Counts the SDK's retry warnings."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.retries = 0

    def emit(self, record: logging.LogRecord) -> None:
        if "retry" in record.getMessage():
            self.retries += 1


@dataclass
class Run:
    rate: float
    errors: int
    retries: int
    cpu_ms: float  # client CPU per episode (this process; the server runs in its own)
    server_cpu_ms: float  # the server's CPU per episode, and the children it waited for
    busy_cores: float  # the whole machine's busy CPU over the run, in cores
    verifier_cpu_ms: float = float("nan")  # the jailed verifiers' (adopted) CPU per episode


async def episode(fleet: AsyncFleet, task: Task) -> float | None:
    async with TaskEnv(task, fleet=fleet) as env:
        await env.reset_async()
        for step in task.metadata["reference_solution"]:
            _, _, done, _ = await env.step_async({"tool": step["tool"], "params": step.get("params") or {}})
            if done:
                break
        if not env.done:
            await env.step_async({"done": True})
        return env.final_reward


def process_cpu(pid: int | None) -> float:
    """CPU seconds of a process and its waited-for children (Linux ``/proc``; 0 elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    # utime, stime, cutime, cstime are fields 14-17 of stat(5); [0] here is field 3.
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


_PR_SET_CHILD_SUBREAPER = 36


def adopt_orphans() -> bool:
    """Make this process the subreaper of its descendants (Linux): bubblewrap's inner process,
    which runs the jailed verifier, outlives the ``bwrap`` the server waits for, so its CPU
    reaches no ancestor's ``cutime`` unless someone adopts and reaps it."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def reap_orphans(keep: int | None) -> None:
    """Reap every exited adopted process (never ``keep``, the server)."""
    while True:
        try:
            found = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if found is None or found.si_pid == keep:
            return
        os.waitpid(found.si_pid, 0)


def orphans_cpu() -> float:
    """CPU seconds of the adopted (jailed) processes reaped so far."""
    times = os.times()
    return times.children_user + times.children_system


def zygote_cpu(server_pid: int | None) -> float:
    """CPU seconds of the server's verifier zygote so far (0 without one): its ``bwrap``, bwrap's
    init and the zygote interpreter, each ``utime + stime + cutime + cstime``. Every run forked
    from it is reaped down its chain (run by its init, init by its middle, middle by the zygote),
    so a finished run's CPU is in the interpreter's ``cutime``; the zygote itself never exits
    while the server runs, so no subreaper would ever see it."""
    if server_pid is None:
        return 0.0
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    total = 0.0
    for top in children.get(server_pid, []):
        try:
            argv = Path(f"/proc/{top}/cmdline").read_bytes()
        except OSError:
            continue
        if b"_zygote_main.py" not in argv:
            continue
        chain, pid = [top], top
        while len(chain) < 3 and children.get(pid):
            pid = min(children[pid])  # bwrap's init, then the interpreter (older than its middles)
            chain.append(pid)
        total += sum(process_cpu(p) for p in chain)
    return total


def machine_busy() -> tuple[float, float]:
    """(busy, total) CPU seconds of the whole machine so far, from ``/proc/stat`` (0s elsewhere)."""
    try:
        with open("/proc/stat") as f:
            ticks = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return 0.0, 0.0
    idle = ticks[3] + ticks[4]  # idle + iowait
    hz = os.sysconf("SC_CLK_TCK")
    return (sum(ticks) - idle) / hz, sum(ticks) / hz


async def measure(
    fleet: AsyncFleet,
    tasks: list[Task],
    episodes: int,
    concurrency: int,
    server_pid: int | None = None,
    *,
    adopting: bool = False,
) -> Run:
    gate = asyncio.Semaphore(concurrency)
    counter = RetryCounter()
    logging.getLogger("fleet_sdk").addHandler(counter)

    async def one(i: int) -> float | None:
        async with gate:
            return await episode(fleet, tasks[i % len(tasks)])

    reap_orphans(server_pid)
    verifier_cpu = orphans_cpu() + zygote_cpu(server_pid)
    started, cpu, server_cpu = time.perf_counter(), time.process_time(), process_cpu(server_pid)
    busy, total = machine_busy()
    outcomes = await asyncio.gather(*(one(i) for i in range(episodes)), return_exceptions=True)
    elapsed = time.perf_counter() - started
    cpu_ms = (time.process_time() - cpu) / episodes * 1e3
    server_cpu_ms = (process_cpu(server_pid) - server_cpu) / episodes * 1e3
    busy_after, total_after = machine_busy()
    share = (busy_after - busy) / (total_after - total) if total_after > total else 0.0
    busy_cores = share * (os.cpu_count() or 1)
    logging.getLogger("fleet_sdk").removeHandler(counter)
    errors = sum(1 for r in outcomes if r != 1.0)
    verifier_cpu_ms = float("nan")
    if adopting:
        await asyncio.sleep(0.3)  # the last run's inner process exits just after its bwrap
        reap_orphans(server_pid)
        verifier_cpu_ms = (orphans_cpu() + zygote_cpu(server_pid) - verifier_cpu) / episodes * 1e3
    return Run(
        episodes / elapsed, errors, counter.retries, cpu_ms, server_cpu_ms, busy_cores, verifier_cpu_ms
    )


async def tool_use_tasks(fleet: AsyncFleet) -> list[Task]:
    return [
        Task.model_validate(t.model_dump())
        for t in (await fleet.api.control_plane.list_tasks()).tasks
        if t.task_modality in (None, "tool_use")  # browser tasks: benchmarks/bench_browser.py
    ]


async def side_worker() -> None:
    """``--baseline``'s worker: one server of this interpreter's checkout, warmed up; each line
    ``N EPISODES`` on stdin is answered with that run as a JSON line on stdout."""
    adopting = adopt_orphans()  # before the server starts: its verifiers are then adopted here
    async with LocalFleet(s3=False) as local:
        fleet = local.async_fleet()
        tasks = await tool_use_tasks(fleet)
        await measure(fleet, tasks, 4, 4)  # warm up (seed databases, imports)
        print("ready", flush=True)
        loop = asyncio.get_running_loop()
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            level, episodes = (int(x) for x in line.split())
            run = await measure(fleet, tasks, episodes, level, local.pid, adopting=adopting)
            print(json.dumps(asdict(run)), flush=True)
        await fleet.close()


def against_baseline(baseline: Path, episodes: int, levels: list[int], rounds: int) -> None:
    sides = {"this": Side(HERE, "bench_episodes"), "baseline": Side(baseline.resolve(), "bench_episodes")}
    rates: dict[str, dict[int, list[float]]] = {name: {level: [] for level in levels} for name in sides}
    figures = ("server_cpu_ms", "verifier_cpu_ms")
    cpu_ms: dict[str, dict[str, dict[int, list[float]]]] = {
        figure: {name: {level: [] for level in levels} for name in sides} for figure in figures
    }
    try:
        for round_ in range(rounds):
            order = list(sides.items()) if round_ % 2 == 0 else list(reversed(sides.items()))
            line = []
            for level in levels:
                for name, side in order:
                    run = side.run(level, max(episodes, level))
                    rates[name][level].append(run["rate"])
                    for figure in figures:
                        cpu_ms[figure][name][level].append(run.get(figure, float("nan")))
                    line.append(
                        f"{name} N={level} {run['rate']:6.2f}/s server {run['server_cpu_ms']:5.1f} ms"
                        f" verifier {run.get('verifier_cpu_ms', float('nan')):5.1f} ms"
                        f" ({int(run['errors'])} errors)"
                    )
            print(f"round {round_ + 1}: " + "  ".join(line), flush=True)
    finally:
        for side in sides.values():
            side.close()
    for level in levels:
        ratios = [a / b for a, b in zip(rates["this"][level], rates["baseline"][level], strict=True)]
        this, base = statistics.median(rates["this"][level]), statistics.median(rates["baseline"][level])
        print(
            f"N={level}: this {this:6.2f} episodes/s, baseline {base:6.2f}; this/baseline median"
            f" {spread(ratios)}, {rounds} rounds)"
        )
        both = {  # this level only, as the other two are indexed
            name: {
                level: [
                    a + b
                    for a, b in zip(
                        cpu_ms["server_cpu_ms"][name][level],
                        cpu_ms["verifier_cpu_ms"][name][level],
                        strict=True,
                    )
                ]
            }
            for name in sides
        }
        for label, per_side in (
            ("server", cpu_ms["server_cpu_ms"]),
            ("verifier", cpu_ms["verifier_cpu_ms"]),
            ("server + verifier", both),
        ):
            this_ms, base_ms = per_side["this"][level], per_side["baseline"][level]
            cpu = [a / b for a, b in zip(this_ms, base_ms, strict=True) if b > 0]  # NaN > 0 is False
            if cpu:
                print(
                    f"     {label} CPU per episode: this {statistics.median(this_ms):5.1f} ms,"
                    f" baseline {statistics.median(base_ms):5.1f} ms; this/baseline median"
                    f" {spread(cpu)})"
                )


async def main(episodes: int, levels: list[int], rounds: int, burst: int) -> None:
    adopting = adopt_orphans()
    async with LocalFleet(s3=False) as local:
        fleet = local.async_fleet()
        tasks = await tool_use_tasks(fleet)
        await measure(fleet, tasks, 4, 4)  # warm up (seed databases, imports)
        runs: dict[int, list[Run]] = {level: [] for level in levels}
        for _ in range(rounds):
            for level in levels:
                run = await measure(fleet, tasks, max(episodes, level), level, local.pid, adopting=adopting)
                runs[level].append(run)
        base = statistics.median(r.rate for r in runs[levels[0]])
        print(f"{rounds} interleaved rounds, {episodes} episodes per level (at least N):")
        for level, rs in runs.items():
            rate = statistics.median(r.rate for r in rs)
            print(
                f"  N={level:3d}: {rate:6.2f} episodes/s = {rate / base:5.2f}x N={levels[0]}"
                f"  CPU/episode: client {statistics.median(r.cpu_ms for r in rs):5.1f} ms"
                f" server {statistics.median(r.server_cpu_ms for r in rs):5.1f} ms"
                f" verifier {statistics.median(r.verifier_cpu_ms for r in rs):5.1f} ms"
                f"  machine busy {statistics.median(r.busy_cores for r in rs):4.2f} cores"
                f"  errors {sum(r.errors for r in rs)}  retries {sum(r.retries for r in rs)}"
            )
        busy_1 = statistics.median(r.busy_cores for r in runs[levels[0]])
        if busy_1 > 0:
            # One episode at a time alternates client, server and verifier, so it keeps about
            # busy_1 cores busy; with flat CPU per episode no concurrency can beat this ratio.
            cores = os.cpu_count() or 1
            print(
                f"  ceiling: N={levels[0]} keeps {busy_1:.2f} of {cores} cores busy, so at most"
                f" {cores / busy_1:.2f}x N={levels[0]} on this machine"
            )
        if burst:
            run = await measure(fleet, tasks, burst, burst, local.pid, adopting=adopting)
            print(
                f"  burst: {burst} episodes at once: {run.rate:6.2f} episodes/s = {run.rate / base:5.2f}x"
                f" N={levels[0]}  CPU/episode: client {run.cpu_ms:5.1f} ms server {run.server_cpu_ms:5.1f} ms"
                f" verifier {run.verifier_cpu_ms:5.1f} ms"
                f"  errors {run.errors}"
                f"  retries {run.retries}"
            )
        await fleet.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--episodes", type=int, default=32)
    parser.add_argument("--concurrency", default="1,16,64")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--burst", type=int, default=0)
    parser.add_argument("--baseline", type=Path, default=None)
    args = parser.parse_args()
    levels = [int(x) for x in args.concurrency.split(",")]
    if args.baseline is not None:
        against_baseline(args.baseline, args.episodes, levels, args.rounds)
    else:
        asyncio.run(main(args.episodes, levels, args.rounds, args.burst))
