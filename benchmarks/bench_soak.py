"""A long, trainer-shaped run against the local server: does anything grow?

A server of this checkout (``LocalFleet``, its own temporary data dir) gets ``--concurrency``
episodes at once for ``--minutes`` (or ``--episodes``), cycling through four kinds as a
training run's episodes end:

* ``right``: the task's reference solution, then ``done`` (reward 1.0 expected);
* ``wrong``: ``done`` with no tool call and no answer (reward 0.0 expected);
* ``abandoned``: one step of the reference solution, then closed (graded on close);
* ``leaked``: an instance made with a short TTL (``--ttl``), one tool call over MCP, then
  dropped without a delete or an MCP ``DELETE``, as a trainer that never closes its envs
  leaves it; the server's reaper ends it.

First the same load runs for ``--warmup`` seconds (one TTL by default: long enough for the live
instances and sessions to reach their steady number once) and everything it leaked is reaped;
the sample taken then is the warmed-up start. Then every ``--sample`` seconds the server is
sampled: its RSS, open fds and threads (``/proc``), the
data dir's size on disk, and from ``GET /metrics`` its live instances and MCP sessions; a probe
times ``GET /v1/account`` (a control-plane route that reads the store) every 0.2 s, and each
sample keeps the p99 of its window. After the load, the run waits for the reaper to end every
leaked instance and session, and samples again.

Printed: every sample, then per figure the median of the last third of the load's samples over
the first third's (growth; samples of the first TTL, while leaked instances pile up towards
their steady number, left out), and the RSS once everything was reaped over the RSS of the
warmed-up start. Targets (the issue this was written for): RSS last third / first third at most
1.1x, and after the reap within 1.1x of the warmed-up start.

``python benchmarks/bench_soak.py [--minutes 3] [--episodes N] [--concurrency 32] [--ttl 45]
[--sample 5] [--warmup SECONDS] [--retention-seconds S]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import logging
import math
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from fleet_local import LocalFleet
from fleet_sdk import AsyncFleet, TaskEnv
from fleet_sdk.tasks import Task

KINDS = ("right", "wrong", "abandoned", "leaked")
DEFAULT_MIX = "right,right,wrong,abandoned,leaked"
"""The cycle of episode kinds each worker goes through."""


@dataclass
class Tally:
    """What the load did so far."""

    episodes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    wrong_rewards: int = 0  # a right episode not rewarded 1.0, or a wrong one rewarded 1.0
    errors: int = 0
    last_error: str = ""

    @property
    def total(self) -> int:
        """Episodes finished, every kind."""
        return sum(self.episodes.values())


async def _solve(env: TaskEnv, task: Task, steps: int | None = None) -> None:
    for step in task.metadata["reference_solution"][:steps]:
        _, _, done, _ = await env.step_async({"tool": step["tool"], "params": step.get("params") or {}})
        if done:
            return


async def play(fleet: AsyncFleet, task: Task, kind: str, tally: Tally, ttl: int) -> None:
    """Play one episode of ``kind`` and count it (errors are counted, never raised).

    Args:
        fleet: The client.
        task: A tool-use task with a ``reference_solution``.
        kind: One of :data:`KINDS`.
        tally: Where the outcome is counted.
        ttl: TTL of a leaked instance.
    """
    try:
        if kind == "leaked":
            env = await fleet.make(task.env_key, ttl_seconds=ttl)
            first = task.metadata["reference_solution"][0]
            await env.mcp.call_tool(first["tool"], first.get("params") or {})
            # Dropped: no close(), no MCP DELETE; the reaper ends the instance.
        else:  # closed by the episode itself: the server's default TTL
            async with TaskEnv(task, fleet=fleet) as env:
                await env.reset_async()
                if kind == "right":
                    await _solve(env, task)
                elif kind == "abandoned":
                    await _solve(env, task, steps=1)
                if kind != "abandoned" and not env.done:
                    await env.step_async({"done": True})
                reward = env.final_reward
            if (kind == "right" and reward != 1.0) or (kind == "wrong" and reward == 1.0):
                tally.wrong_rewards += 1
        tally.episodes[kind] += 1
    except Exception as exc:  # counted: a soak keeps going and reports them
        tally.errors += 1
        tally.last_error = f"{kind}: {type(exc).__name__}: {exc}"[:300]


async def drive(
    fleet: AsyncFleet,
    tasks: Sequence[Task],
    *,
    concurrency: int,
    mix: Sequence[str],
    ttl: int,
    tally: Tally,
    until: Callable[[], bool],
) -> None:
    """Run ``concurrency`` workers, each cycling through ``mix``, until ``until()`` is true.

    Args:
        fleet: The client.
        tasks: Tool-use tasks, used in turn.
        concurrency: Episodes in flight.
        mix: The kinds each worker cycles through.
        ttl: TTL of a leaked instance.
        tally: Where outcomes are counted.
        until: Checked before each episode starts.
    """
    counter = itertools.count()

    async def worker(offset: int) -> None:
        kinds = itertools.islice(itertools.cycle(mix), offset, None)
        for kind in kinds:
            if until():
                return
            await play(fleet, tasks[next(counter) % len(tasks)], kind, tally, ttl)

    async with asyncio.TaskGroup() as group:
        for i in range(concurrency):
            group.create_task(worker(i % len(mix)))


async def tool_use_tasks(fleet: AsyncFleet) -> list[Task]:
    """The server's tool-use tasks that carry a reference solution."""
    return [
        Task.model_validate(t.model_dump())
        for t in (await fleet.api.control_plane.list_tasks()).tasks
        if t.task_modality in (None, "tool_use") and (t.metadata or {}).get("reference_solution")
    ]


def parse_metrics(text: str) -> dict[str, float]:
    """The samples of a Prometheus text page, by name (labels joined in: ``name{a="b"}``)."""
    from prometheus_client.parser import text_string_to_metric_families

    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            values[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return values


def total(metrics: dict[str, float], name: str) -> float:
    """The sum of a metric's samples over all their labels (NaN when the server has none)."""
    found = [value for key, value in metrics.items() if key == name or key.startswith(name + "{")]
    return sum(found) if found else float("nan")


def _proc_status(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/status") as f:
        return dict(line.split(":", 1) for line in f if ":" in line)


def disk_usage(path: Path) -> int:
    """Bytes on disk under ``path``."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
    return total


@dataclass
class Sample:
    """One look at the server."""

    at: float
    episodes: int
    rss_mb: float
    fds: int
    threads: int
    data_mb: float
    live_instances: float
    mcp_sessions: float
    p99_ms: float


class Sampler:
    """Samples a running ``LocalFleet``'s process, data dir and ``/metrics``."""

    def __init__(self, local: LocalFleet) -> None:
        assert local.pid is not None
        self.local, self.pid = local, local.pid
        self.http = httpx.AsyncClient(
            base_url=local.base_url, headers={"Authorization": f"Bearer {local.api_key}"}, timeout=30
        )
        self.latencies: list[float] = []

    async def metrics(self) -> dict[str, float]:
        """The server's ``/metrics``, parsed; a server without it (an older checkout, run for a
        comparison) gets its live instances counted through the API and no MCP session count."""
        response = await self.http.get("/metrics")
        if response.status_code == 404:
            running = await self.http.get("/v1/env/instances", params={"status": "running"})
            running.raise_for_status()
            return {"fleet_local_instances_live": float(len(running.json()))}
        response.raise_for_status()
        return parse_metrics(response.text)

    async def probe_forever(self) -> None:
        """Time ``GET /v1/account`` every 0.2 s into ``latencies``."""
        while True:
            started = time.perf_counter()
            with contextlib.suppress(httpx.HTTPError):
                (await self.http.get("/v1/account")).raise_for_status()
                self.latencies.append(time.perf_counter() - started)
            await asyncio.sleep(0.2)

    async def sample(self, episodes: int) -> Sample:
        """Look now; the probe latencies since the last sample make its p99."""
        status = _proc_status(self.pid)
        metrics = await self.metrics()
        window, self.latencies = self.latencies, []
        p99 = statistics.quantiles(window, n=100)[98] if len(window) >= 2 else (window or [0.0])[0]
        return Sample(
            at=time.monotonic(),
            episodes=episodes,
            rss_mb=int(status["VmRSS"].split()[0]) / 1024,
            fds=len(os.listdir(f"/proc/{self.pid}/fd")),
            threads=int(status["Threads"]),
            data_mb=await asyncio.to_thread(disk_usage, self.local.data_dir) / 2**20,
            live_instances=total(metrics, "fleet_local_instances_live"),
            mcp_sessions=total(metrics, "fleet_local_mcp_sessions"),
            p99_ms=p99 * 1e3,
        )

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self.http.aclose()


def growth(samples: Sequence[Sample], name: str) -> tuple[float, float, float]:
    """(median of the first third, of the last third, last / first) of one figure."""
    third = max(1, len(samples) // 3)
    first = statistics.median(getattr(s, name) for s in samples[:third])
    last = statistics.median(getattr(s, name) for s in samples[-third:])
    return first, last, (last / first if first else float("nan"))


def _line(label: str, s: Sample) -> str:
    return (
        f"{label:>8} {s.episodes:7d} ep  rss {s.rss_mb:7.1f} MB  fds {s.fds:4d}  threads {s.threads:3d}"
        f"  data {s.data_mb:7.1f} MB  live {s.live_instances:5.0f}  mcp {s.mcp_sessions:5.0f}"
        f"  p99 {s.p99_ms:7.1f} ms"
    )


async def soak(
    *,
    minutes: float | None,
    episodes: int | None,
    concurrency: int,
    ttl: int,
    sample_every: float,
    mix: Sequence[str],
    retention_seconds: float | None,
    warmup: float,
) -> None:
    """Run the soak and print its figures (see the module docstring)."""
    logging.getLogger("fleet_sdk").setLevel(logging.ERROR)  # an abandoned episode's warnings
    settings: dict[str, Any] = {"s3": False, "reaper_interval": 1.0}
    if retention_seconds is not None:
        settings["retention_seconds"] = retention_seconds
    async with LocalFleet(**settings) as local:
        fleet = local.async_fleet()
        sampler = Sampler(local)
        tasks = await tool_use_tasks(fleet)
        tally = Tally()
        # Warm up: the same load for ``warmup`` seconds (every task and kind, and the peak of live
        # instances and sessions once), then let the leaked instances be reaped.
        warm_until = time.monotonic() + warmup
        await drive(
            fleet, tasks, concurrency=concurrency, mix=mix, ttl=ttl, tally=tally,
            until=lambda: time.monotonic() >= warm_until and tally.total >= len(tasks),
        )  # fmt: skip
        await _wait_reaped(sampler, ttl)
        probe = asyncio.create_task(sampler.probe_forever())
        await asyncio.sleep(1.0)
        start = await sampler.sample(tally.total)
        print(_line("start", start), flush=True)
        began = time.monotonic()
        goal = tally.total + episodes if episodes is not None else None

        def done() -> bool:
            if goal is not None:
                return tally.total >= goal
            return time.monotonic() - began >= (minutes or 0) * 60

        samples: list[Sample] = []

        async def sample_forever() -> None:
            while True:
                await asyncio.sleep(sample_every)
                samples.append(await sampler.sample(tally.total))
                print(_line(f"{samples[-1].at - began:6.0f}s", samples[-1]), flush=True)

        sampling = asyncio.create_task(sample_forever())
        await drive(fleet, tasks, concurrency=concurrency, mix=mix, ttl=ttl, tally=tally, until=done)
        elapsed = time.monotonic() - began
        sampling.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampling
        reaped_in = await _wait_reaped(sampler, ttl)
        await asyncio.sleep(2 * sample_every)  # a few quiet seconds, as a paused trainer's
        after = await sampler.sample(tally.total)
        print(_line("reaped", after), flush=True)
        probe.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await probe
        await sampler.aclose()
        await fleet.close()

    ran = tally.total - start.episodes
    print(
        f"\n{ran} episodes in {elapsed:.0f} s ({ran / elapsed:.1f}/s; {concurrency} at once; "
        + ", ".join(f"{k} {v}" for k, v in tally.episodes.items())
        + f" in all), {tally.wrong_rewards} wrong rewards, {tally.errors} errors"
        + (f" (last: {tally.last_error})" if tally.errors else "")
    )
    print(f"leaked instances and MCP sessions all ended {reaped_in:.0f} s after the load stopped")
    # Until one TTL has passed, leaked instances pile up towards their steady number: the growth
    # ratios compare the steady state's thirds.
    steady = [s for s in samples if s.at - began >= ttl]
    if len(steady) < 3:
        print("too few samples past the first TTL for growth ratios: run longer or sample more often")
        return
    samples = steady
    rates = [
        (b.episodes - a.episodes) / (b.at - a.at)
        for a, b in itertools.pairwise([start, *samples])
        if b.at > a.at
    ]
    third = max(1, len(rates) // 3)
    throughput = statistics.median(rates[-third:]) / statistics.median(rates[:third])
    print(f"growth, median of the last third of {len(samples)} samples / the first third's:")
    for name, unit in (
        ("rss_mb", "MB"), ("fds", ""), ("threads", ""), ("data_mb", "MB"),
        ("live_instances", ""), ("mcp_sessions", ""), ("p99_ms", "ms"),
    ):  # fmt: skip
        first, last, ratio = growth(samples, name)
        print(f"  {name:15s} {first:9.1f} -> {last:9.1f} {unit:2s} = {ratio:5.2f}x")
    print(f"  {'episodes/s':15s} {'':25s} = {throughput:5.2f}x")
    print(
        f"RSS once reaped / warmed-up start: {after.rss_mb:.1f} / {start.rss_mb:.1f} MB ="
        f" {after.rss_mb / start.rss_mb:.2f}x; data dir {start.data_mb:.1f} -> {after.data_mb:.1f} MB"
        f" ({(after.data_mb - start.data_mb) * 1024 / max(ran, 1):.1f} KB per episode)"
    )


async def _wait_reaped(sampler: Sampler, ttl: int) -> float:
    """Wait (bounded: the TTL plus a minute) until no instance or MCP session is live."""
    began = time.monotonic()
    deadline = began + ttl + 60
    while time.monotonic() < deadline:
        metrics = await sampler.metrics()
        sessions = total(metrics, "fleet_local_mcp_sessions")
        if not total(metrics, "fleet_local_instances_live") and (math.isnan(sessions) or not sessions):
            return time.monotonic() - began
        await asyncio.sleep(1.0)
    raise RuntimeError(f"instances or MCP sessions still live {ttl + 60} s after the load stopped")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--minutes", type=float, default=3.0, help="length of the load (unless --episodes)")
    parser.add_argument("--episodes", type=int, default=None, help="episodes to run instead of --minutes")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--ttl", type=int, default=45, help="TTL of a leaked instance")
    parser.add_argument("--sample", type=float, default=5.0, help="seconds between samples")
    parser.add_argument(
        "--mix", default=DEFAULT_MIX, help=f"kinds each worker cycles through ({', '.join(KINDS)})"
    )
    parser.add_argument("--retention-seconds", type=float, default=None, help="the server's retention")
    parser.add_argument(
        "--warmup", type=float, default=None, help="seconds of load before the start (default: --ttl)"
    )
    args = parser.parse_args()
    mix = [kind.strip() for kind in args.mix.split(",")]
    unknown = sorted(set(mix) - set(KINDS))
    if unknown:
        parser.error(f"--mix: unknown kinds {unknown}; known: {', '.join(KINDS)}")
    asyncio.run(
        soak(
            minutes=None if args.episodes is not None else args.minutes,
            episodes=args.episodes,
            concurrency=args.concurrency,
            ttl=args.ttl,
            sample_every=args.sample,
            mix=mix,
            retention_seconds=args.retention_seconds,
            warmup=args.ttl if args.warmup is None else args.warmup,
        )
    )
