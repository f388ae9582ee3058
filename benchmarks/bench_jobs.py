"""Throughput of server-side jobs (``POST /v1/jobs``): scripted sessions per second, this checkout
against another one (``--baseline DIR``: e.g. ``git archive main | tar -x -C DIR``).

Each round starts one server per side, in alternating order (A/B, B/A, ...), runs one job of every
bundled tool_use task with a reference solution x ``--pass-k`` sessions of ``local/scripted``, and
times it from the create to the last session's end; server start-up is not timed. Every session
must be ``completed`` with score 1.0, or the round is reported as failed. Printed: each side's
sessions/s per round and the median ratio this/baseline. Without ``--baseline`` only this
checkout is measured.

``python benchmarks/bench_jobs.py [--baseline DIR] [--rounds 4] [--pass-k 4] [--job-concurrency 8]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


async def one_job(pass_k: int, job_concurrency: int) -> dict[str, float]:
    """One server, one job: sessions and seconds (run in a subprocess per side)."""
    from fleet_local import LocalFleet
    from fleet_sdk.types import env_instance as models

    async with LocalFleet(s3=False, job_concurrency=job_concurrency) as local, local.async_fleet() as fleet:
        tasks = (await fleet.api.control_plane.list_tasks()).tasks
        keys = [
            t.task_key
            for t in tasks
            if (t.task_modality or "tool_use") == "tool_use" and (t.metadata or {}).get("reference_solution")
        ]
        started = time.perf_counter()
        created = await fleet.api.control_plane.create_job(
            models.JobCreateRequest(models=["local/scripted"], task_keys=keys, pass_k=pass_k)
        )
        deadline = started + 600
        while (await fleet.api.control_plane.get_job(created.job_id)).status in ("pending", "running"):
            if time.perf_counter() > deadline:
                raise TimeoutError(f"job {created.job_id} still running after 600 s")
            await asyncio.sleep(0.05)
        elapsed = time.perf_counter() - started
        results = await fleet.api.sessions.get_job_sessions(created.job_id)
        sessions = [s for group in results.tasks for s in group.sessions]
        bad = [s.session_id for s in sessions if s.status != "completed"]
        scores = [g.average_score for g in results.tasks]
        return {
            "sessions": len(sessions),
            "seconds": elapsed,
            "failed": len(bad) + sum(1 for score in scores if score != 1.0),
        }


def measure(checkout: Path, pass_k: int, job_concurrency: int) -> dict[str, float]:
    """``one_job`` in a fresh interpreter whose ``fleet_sdk`` and ``fleet_local`` come from ``checkout``."""
    env = {**os.environ, "PYTHONPATH": f"{checkout}{os.pathsep}{checkout / 'generated'}"}
    code = (
        "import asyncio, json, sys; sys.path.insert(0, sys.argv[1]);"
        "from bench_jobs import one_job;"
        "print(json.dumps(asyncio.run(one_job(int(sys.argv[2]), int(sys.argv[3])))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(HERE / "benchmarks"), str(pass_k), str(job_concurrency)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--baseline", type=Path, default=None)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--pass-k", type=int, default=4)
    parser.add_argument("--job-concurrency", type=int, default=8)
    args = parser.parse_args()
    sides = {"this": HERE} | ({"baseline": args.baseline.resolve()} if args.baseline else {})
    rates: dict[str, list[float]] = {name: [] for name in sides}
    for round_ in range(args.rounds):
        order = list(sides.items()) if round_ % 2 == 0 else list(reversed(sides.items()))
        line = []
        for name, checkout in order:
            run = measure(checkout, args.pass_k, args.job_concurrency)
            rate = run["sessions"] / run["seconds"]
            rates[name].append(rate)
            sessions, failed = int(run["sessions"]), int(run["failed"])
            line.append(f"{name} {rate:5.2f} sessions/s ({sessions}, {failed} failed)")
        print(f"round {round_ + 1}: " + "  ".join(line), flush=True)
    for name, values in rates.items():
        print(f"{name}: median {statistics.median(values):5.2f} sessions/s")
    if "baseline" in rates:
        ratios = [a / b for a, b in zip(rates["this"], rates["baseline"], strict=True)]
        each = ", ".join(f"{r:.2f}" for r in ratios)
        print(f"this/baseline: median {statistics.median(ratios):4.2f}x (rounds: {each})")


if __name__ == "__main__":
    main()
