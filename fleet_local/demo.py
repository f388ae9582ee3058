"""``fleet-sdk demo``: every bundled task through ``TaskEnv`` on an embedded local server.

It plays each task's reference solution (the scripted policy, which must score
1.0; for browser_use tasks it replays ``computer`` actions on a leased browser)
and a few tool-use tasks with random tool calls, each with ``fleet_sdk.episodes.play_episode``,
shows progress, prints a table of task, policy, reward and steps, writes each transcript as JSON,
and uploads them to a trace job of the local server so they can be read back there too.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from fleet_sdk import AsyncFleet, Task, TaskEnv
from fleet_sdk.episodes import EpisodeResult, play_episode
from fleet_sdk.policies import RANDOM_MODEL, SCRIPTED_MODEL, make_policy

__all__ = ["run_demo"]

BROWSER_CONCURRENCY = 2
"""browser_use episodes at once: each holds a headless Chromium (100-200 MB)."""


POLICIES = {"scripted": SCRIPTED_MODEL, "random": RANDOM_MODEL}
"""The demo's policies by the name its table shows, and their model ids."""


@dataclass(frozen=True)
class _Played:
    """One demo episode: its policy, its result and its transcript."""

    policy: str
    result: EpisodeResult
    transcript: list[dict[str, Any]]


async def _play(
    fleet: AsyncFleet, task: Task, policy: str, trace_job_id: str, *, max_steps: int = 30
) -> _Played:
    model = POLICIES[policy]
    env = TaskEnv(task, fleet=fleet, max_steps=max_steps, trace_job_id=trace_job_id, trace_model=model)
    result = await play_episode(env, make_policy(model), episode_id=f"{task.task_key}:{policy}")
    return _Played(policy, result, list(env.chat_history))


def _progress(out: TextIO, done: int, total: int, started: float) -> None:
    width = 30
    filled = int(width * done / max(total, 1))
    elapsed = time.monotonic() - started
    line = f"  [{'#' * filled}{'.' * (width - filled)}] {done}/{total} episodes  {elapsed:5.1f}s"
    if out.isatty():
        out.write("\r" + line)
    elif done in (0, total) or done % 10 == 0:  # a log file gets a few lines, not hundreds
        out.write(line + "\n")
    out.flush()


def _reward_text(reward: float | None) -> str:
    return "unknown" if reward is None else f"{reward:.2f}"


def _table(played: Sequence[_Played]) -> str:
    headers = ("task", "policy", "reward", "steps", "ended by")
    rows = [
        (
            p.result.task_key,
            p.policy,
            _reward_text(p.result.reward),
            str(p.result.steps),
            p.result.done_reason or "-",
        )
        for p in played
    ]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(lines)


async def run_demo(
    *,
    out_dir: Path,
    random_episodes: int = 4,
    concurrency: int = 8,
    limit: int | None = None,
    out: TextIO = sys.stdout,
) -> int:
    """Run the demo; returns the process exit code (1 if a scripted episode did not score 1.0).

    Args:
        out_dir: Where transcripts are written.
        random_episodes: How many tasks also get a random-policy episode.
        concurrency: Episodes run at once.
        limit: Only the first N tasks (for a quick look).
        out: Where to print.
    """
    from ._local_fleet import LocalFleet

    print("Starting the embedded local Fleet server...", file=out)
    server_data = out_dir / "server-data"  # kept, so the uploaded sessions can be read back later
    # Without the OS jail (no bubblewrap) LocalFleet says so; the bundled tasks it grades still run.
    async with LocalFleet(server_data) as local:
        fleet = local.async_fleet()
        try:
            tasks = [
                Task.model_validate(t.model_dump())
                for t in (await fleet.api.control_plane.list_tasks()).tasks
            ]
            from ._chromium import browser_unavailable

            no_browser = browser_unavailable()
            if no_browser is not None:  # the local server's browser leases need both
                left_out = [t for t in tasks if t.task_modality == "browser_use"]
                tasks = [t for t in tasks if t.task_modality != "browser_use"]
                print(f"Leaving out {len(left_out)} browser_use tasks: {no_browser}.", file=out)
            if limit is not None:
                tasks = tasks[:limit]
            rng = random.Random(0)
            plan = [(task, "scripted") for task in tasks]
            tool_tasks = [task for task in tasks if task.task_modality == "tool_use"]
            plan += [
                (task, "random") for task in rng.sample(tool_tasks, min(random_episodes, len(tool_tasks)))
            ]
            print(f"Server at {local.base_url}; {len(tasks)} tasks, {len(plan)} episodes.", file=out)
            job_id = await fleet.traces.create_job("fleet-sdk demo")  # each episode uploads itself
            gate = asyncio.Semaphore(concurrency)
            browsers = asyncio.Semaphore(BROWSER_CONCURRENCY)
            finished = 0
            started = time.monotonic()

            async def play(task: Task, policy: str) -> _Played:
                nonlocal finished
                async with (
                    gate,
                    browsers if task.task_modality == "browser_use" else contextlib.nullcontext(),
                ):
                    played = await _play(fleet, task, policy, job_id)
                finished += 1
                _progress(out, finished, len(plan), started)
                return played

            _progress(out, 0, len(plan), started)
            episodes = list(await asyncio.gather(*(play(task, policy) for task, policy in plan)))
            out.write("\n" if out.isatty() else "")
            out.write("\n")
            print(_table(episodes), file=out)
            transcripts = out_dir / "transcripts"
            transcripts.mkdir(parents=True, exist_ok=True)
            for played in episodes:
                path = transcripts / f"{played.result.task_key}__{played.policy}.json"
                record = {"policy": played.policy, **dataclasses.asdict(played.result)}
                path.write_text(
                    json.dumps({**record, "transcript": played.transcript}, indent=2, default=str)
                )
        finally:
            await fleet.close()
        scripted = [p.result for p in episodes if p.policy == "scripted"]
        passed = sum(1 for r in scripted if r.reward == 1.0)
        print(f"\nScripted policy: {passed}/{len(scripted)} tasks scored 1.0.", file=out)
        for p in episodes:
            error = p.result.error or p.result.verifier_error
            if error:
                print(f"  {p.result.task_key} ({p.policy}): {error}", file=out)
        print(f"Transcripts: {transcripts.resolve()}/", file=out)
        print(
            f"Uploaded as trace job {job_id}; to read them back, run\n"
            f"  fleet-sdk serve --data-dir {server_data.resolve()}\n"
            f"and GET /v1/sessions/job/{job_id} with the API key it prints.",
            file=out,
        )
    return 0 if passed == len(scripted) else 1
