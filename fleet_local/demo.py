"""``fleet-sdk demo``: every bundled task through ``TaskEnv`` on an embedded local server.

It plays each task's reference solution (the scripted policy, which must score
1.0; for browser_use tasks it replays ``computer`` actions on a leased browser)
and a few tool-use tasks with random tool calls, shows progress, prints a table of
task, policy, reward and steps, writes each transcript as JSON, and uploads them
to the local server's sessions API so they can be read back there too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from fleet_sdk import AsyncFleet, Task, TaskEnv
from fleet_sdk.policies import random_value
from fleet_sdk.protocol import SUBMIT_FINAL_ANSWER
from fleet_sdk.verifiers import jail_status

__all__ = ["EpisodeResult", "run_demo", "run_episode"]

BROWSER_CONCURRENCY = 2
"""browser_use episodes at once: each holds a headless Chromium (100-200 MB)."""


@dataclass
class EpisodeResult:
    """One demo episode.

    Attributes:
        task_key: The task.
        policy: ``scripted`` or ``random``.
        reward: The final reward (None: unknown).
        steps: Steps taken.
        done_reason: Why the episode ended.
        error: The verifier error, or an exception that ended the episode.
        transcript: The OpenAI-shaped chat history.
        verifier_execution_id: The verifier run to link.
    """

    task_key: str
    policy: str
    reward: float | None = None
    steps: int = 0
    done_reason: str | None = None
    error: str | None = None
    transcript: list[dict[str, Any]] = field(default_factory=list)
    verifier_execution_id: str | None = None


def _scripted_actions(task: Task) -> list[dict[str, Any]]:
    solution = task.metadata.get("reference_solution") or []
    return [{"tool": step["tool"], "params": dict(step.get("params") or {})} for step in solution]


def _random_actions(observation: Mapping[str, Any], seed: str, count: int = 3) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    tools = [t["function"] for t in observation["tools"] if t["function"]["name"] != SUBMIT_FINAL_ANSWER]
    actions = []
    for _ in range(count):
        tool = rng.choice(tools)
        params = random_value(rng, tool["parameters"])
        actions.append({"tool": tool["name"], "params": params if isinstance(params, dict) else {}})
    return actions


async def run_episode(fleet: AsyncFleet, task: Task, policy: str, *, max_steps: int = 30) -> EpisodeResult:
    """Play one episode and record its transcript; never raises.

    Args:
        fleet: The client.
        task: The task.
        policy: ``scripted`` (the reference solution) or ``random``.
        max_steps: Step budget.
    """
    result = EpisodeResult(task.task_key, policy)
    env = TaskEnv(task, fleet=fleet, max_steps=max_steps)
    try:
        observation = await env.reset_async()
        if policy == "scripted":
            actions = _scripted_actions(task)
        else:
            actions = _random_actions(observation, seed=f"{task.task_key}:{policy}")
        for action in actions:
            _obs, _reward, done, _info = await env.step_async(action)
            if done:
                break
        if not env.done:
            await env.step_async({"done": True})
        result.reward = env.final_reward
        result.error = env.verifier_error
        result.verifier_execution_id = env.verifier_execution_id
    except Exception as exc:  # a demo row per episode, whatever happened
        result.error = f"{type(exc).__name__}: {exc}"
    finally:
        result.transcript = list(env.chat_history)  # TaskEnv records prompt, tool calls and results
        result.steps = env.step_count
        result.done_reason = env.done_reason
        try:
            await env.close_async()
        except Exception as exc:
            result.error = result.error or f"close failed: {exc}"
    return result


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


def _table(results: Sequence[EpisodeResult]) -> str:
    headers = ("task", "policy", "reward", "steps", "ended by")
    rows = [
        (r.task_key, r.policy, _reward_text(r.reward), str(r.steps), r.done_reason or "-") for r in results
    ]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    return "\n".join(lines)


async def _upload(fleet: AsyncFleet, results: Sequence[EpisodeResult]) -> str:
    job_id = await fleet.traces.create_job("fleet-sdk demo")
    for result in results:
        if len(result.transcript) < 1:
            continue
        await fleet.traces.upload_session(
            job_id=job_id,
            task_key=result.task_key,
            model=f"local/{result.policy}",
            chat_history=result.transcript,
            reward=result.reward,
            metadata={"policy": result.policy},
            verifier_execution_id=result.verifier_execution_id,
            status="completed" if result.reward is not None else "errored",
        )
    return job_id


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
    from ._server import LocalFleet

    print("Starting the embedded local Fleet server...", file=out)
    server_data = out_dir / "server-data"  # kept, so the uploaded sessions can be read back later
    server_settings: dict[str, Any] = {}
    jail = jail_status()
    if not jail.available:
        # The demo grades only the bundled tasks, whose verifiers ship with this package, so it
        # opts in to running them under the audit hook alone rather than grading nothing.
        print(
            f"The verifier OS jail is unavailable ({jail.reason}); the demo runs its bundled "
            "verifiers under the audit hook alone. Install bubblewrap (apt) for the jail.",
            file=out,
        )
        server_settings["allow_unjailed_verifiers"] = True
    async with LocalFleet(server_data, **server_settings) as local:
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
            gate = asyncio.Semaphore(concurrency)
            browsers = asyncio.Semaphore(BROWSER_CONCURRENCY)
            finished = 0
            started = time.monotonic()

            async def play(task: Task, policy: str) -> EpisodeResult:
                nonlocal finished
                async with (
                    gate,
                    browsers if task.task_modality == "browser_use" else contextlib.nullcontext(),
                ):
                    result = await run_episode(fleet, task, policy)
                finished += 1
                _progress(out, finished, len(plan), started)
                return result

            _progress(out, 0, len(plan), started)
            results = list(await asyncio.gather(*(play(task, policy) for task, policy in plan)))
            out.write("\n" if out.isatty() else "")
            out.write("\n")
            print(_table(results), file=out)
            transcripts = out_dir / "transcripts"
            transcripts.mkdir(parents=True, exist_ok=True)
            for result in results:
                path = transcripts / f"{result.task_key}__{result.policy}.json"
                path.write_text(json.dumps(result.__dict__, indent=2, default=str))
            job_id = await _upload(fleet, results)
        finally:
            await fleet.close()
        scripted = [r for r in results if r.policy == "scripted"]
        passed = sum(1 for r in scripted if r.reward == 1.0)
        print(f"\nScripted policy: {passed}/{len(scripted)} tasks scored 1.0.", file=out)
        for r in results:
            if r.error:
                print(f"  {r.task_key} ({r.policy}): {r.error}", file=out)
        print(f"Transcripts: {transcripts.resolve()}/", file=out)
        print(
            f"Uploaded as trace job {job_id}; to read them back, run\n"
            f"  fleet-sdk serve --data-dir {server_data.resolve()}\n"
            f"and GET /v1/sessions/job/{job_id} with the API key it prints.",
            file=out,
        )
    return 0 if passed == len(scripted) else 1
