"""``play_episode``: one ``TaskEnv`` episode played by a policy, start to end, as one result.

Every caller that plays episodes goes through it: ``fleet-sdk demo``, the executors
(``AsyncioExecutor``, ``RayExecutor``), the evaluation runner and the local server's jobs. It holds
the boundary they all need:

- **never raise** for the episode: an episode that fails on its own (the policy raised, the
  platform refused, a tool call broke) is an ``EpisodeResult`` with ``error`` set and
  ``reward=None``, never an exception; cancellation still propagates (after the env is closed);
- **close**: the env is always closed, whatever happened, so its instance and browser lease are
  deleted;
- **grade**: an episode the policy abandoned, or that ran out of ``time_limit``, is still graded
  (``TaskEnv`` runs the verifier when it closes an unfinished episode);
- **record**: the result keeps the reward (``None``: unknown or errored, never confused with
  0.0), why the episode ended, its steps, tool errors, the verifier's error and execution id, the
  uploaded trace session and the duration.

A failed episode is not uploaded to the env's trace job: grading it on close gives it a reward
that would read as graded.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ._twin import sync_function
from .actions import Action, ToolCall
from .policies import Policy, PolicyContext, PolicyFactory, PolicyTurn
from .task_env import TaskEnv

__all__ = ["TIME_LIMIT", "EpisodeResult", "play_episode", "play_episode_sync"]

TIME_LIMIT = "time_limit"
"""``EpisodeResult.done_reason`` of an episode that ``time_limit`` cut short (graded anyway)."""

_ARGUMENTS_SHOWN = 200
"""Characters of a model's malformed arguments quoted back to it."""


@dataclass(frozen=True)
class EpisodeResult:
    """What one episode came to.

    Attributes:
        episode_id: The episode's id (``play_episode``'s, else the task key; an executor's spec id).
        task_key: The task.
        reward: The verifier's reward; None when it is unknown (the verifier could not grade)
            or the episode failed, never 0.0 for either.
        done_reason: Why the episode ended: ``TaskEnv.done_reason`` (``agent``, ``submitted``,
            ``max_steps``, ``closed``), or ``time_limit``; None when it never started.
        steps: Steps used (a turn without tool calls, which ends the episode, is one too).
        tool_errors: The episode's tool errors, as ``"tool(): message"``.
        verifier_error: Why the verifier could not grade, when it could not.
        verifier_execution_id: The platform's id of the verifier run.
        error: Why the episode itself failed (``"TypeName: message"``; ``reward`` is then None), or,
            after a played episode, why closing it failed (``"close failed: ..."``; its instance
            is left to its TTL and the reward stands). None when it ran and closed.
        attempts: Workers it was started on (more than 1 after an executor lost a worker).
        worker: Where it ran (``pid@host``), when an executor played it.
        duration_s: Wall-clock seconds, closing included.
        session_id: The trace session it was uploaded as (``TaskEnv(trace_job_id=...)``).
    """

    episode_id: str
    task_key: str
    reward: float | None
    done_reason: str | None
    steps: int
    tool_errors: list[str]
    verifier_error: str | None
    verifier_execution_id: str | None
    error: str | None = None
    attempts: int = 1
    worker: str | None = None
    duration_s: float = 0.0
    session_id: str | None = None

    @classmethod
    def unplayed(cls, episode_id: str, task_key: str, error: str, **fields: Any) -> EpisodeResult:
        """The result of an episode that never started (its env could not even be made).

        Args:
            episode_id: The episode.
            task_key: Its task.
            error: Why.
            **fields: Other fields (``attempts``, ``worker``).
        """
        return cls(episode_id, task_key, None, None, 0, [], None, None, error=error, **fields)

    def to_json(self) -> str:
        """One JSON line."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, line: str) -> EpisodeResult:
        """Read a line written by ``to_json``.

        Args:
            line: The JSON line.
        """
        return cls(**json.loads(line))


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def _action(turn: PolicyTurn) -> Action:
    """A policy's turn as one ``TaskEnv`` action; without tool calls it ends the episode."""
    if not turn.tool_calls:
        return Action((), done=True, content=turn.content)
    calls = []
    for call in turn.tool_calls:
        error = None
        if call.arguments is None:  # told to the model as the call's result; the episode goes on
            error = (
                f"arguments of {call.name} are not a JSON object: {call.arguments_json[:_ARGUMENTS_SHOWN]!r}"
            )
        written = call.arguments_json if error is not None else None
        calls.append(ToolCall(call.name, call.arguments or {}, call.id, error, written))
    return Action(tuple(calls), content=turn.content)


def _messages(env: TaskEnv, system_prompt: str | None) -> Sequence[Mapping[str, Any]]:
    live: list[dict[str, Any]] = env.messages("openai", context=True)
    return [{"role": "system", "content": system_prompt}, *live] if system_prompt else live


async def _turns(
    env: TaskEnv,
    policy: PolicyFactory,
    episode_id: str,
    system_prompt: str | None,
    on_step: Callable[[TaskEnv], Awaitable[None]] | None,
) -> None:
    """Reset, then one step per policy turn until the episode is done."""
    await env.reset_async()
    if on_step is not None:
        await on_step(env)
    agent: Policy = policy(PolicyContext(episode_id, env.task, tuple(env.tools), env.max_steps))
    try:
        while not env.done:
            turn = await agent.next_turn(_messages(env, system_prompt))
            await env.step_async(_action(turn))
            if on_step is not None:
                await on_step(env)
    finally:
        await agent.aclose()


async def play_episode(
    env: TaskEnv,
    policy: PolicyFactory,
    *,
    episode_id: str | None = None,
    system_prompt: str | None = None,
    time_limit: float | None = None,
    on_step: Callable[[TaskEnv], Awaitable[None]] | None = None,
) -> EpisodeResult:
    """Play one episode of ``env`` with a policy, close it, and return what it came to.

    Never raises for the episode (see the module docstring); cancellation propagates once the
    env is closed.

    Args:
        env: The episode (a ``TaskEnv`` not yet reset; ``reset`` is called here).
        policy: Makes the episode's policy from its ``PolicyContext`` (``ScriptedPolicy``,
            ``make_policy(model)``...).
        episode_id: Names the episode in the result and seeds the random policy, so an id replays
            identically (default: the task key).
        system_prompt: A system message the policy sees before the history (not part of the env's
            history).
        time_limit: Seconds for the episode before closing; when they run out the episode is
            closed and graded, with ``done_reason="time_limit"`` (None: no limit).
        on_step: Awaited with the env after ``reset`` and after every step (e.g. to persist
            progress); what it raises fails the episode like anything else.
    """
    started = time.monotonic()
    episode_id = episode_id or env.task.task_key
    error: str | None = None
    timed_out = False
    try:
        async with asyncio.timeout(time_limit) as budget:
            await _turns(env, policy, episode_id, system_prompt, on_step)
    except TimeoutError as exc:
        if budget.expired():
            timed_out = True
        else:  # a timeout of the episode's own (a tool call's deadline)
            error = _describe(exc)
    except Exception as exc:  # the episode failed on its own: a result, not a raise
        error = _describe(exc)
    finally:
        close_error = await _close(env, failed=error is not None)
    return EpisodeResult(
        episode_id=episode_id,
        task_key=env.task.task_key,
        reward=None if error is not None else env.final_reward,
        done_reason=TIME_LIMIT if timed_out else env.done_reason,
        steps=env.step_count,
        tool_errors=list(env.tool_errors),
        verifier_error=env.verifier_error,
        verifier_execution_id=env.verifier_execution_id,
        error=error or (f"close failed: {close_error}" if close_error else None),
        duration_s=round(time.monotonic() - started, 4),
        session_id=env.trace_session_id,
    )


async def _close(env: TaskEnv, *, failed: bool) -> str | None:
    """Close ``env`` (grading an unfinished episode); why it failed, or None. A failed episode
    (or one being cancelled, whose outcome is unknown) is not uploaded to the trace job."""
    trace_job_id = env.trace_job_id
    if failed or _cancelling():
        env.trace_job_id = None
    try:
        await env.close_async()
    except Exception as exc:
        return _describe(exc)
    finally:
        env.trace_job_id = trace_job_id
    return None


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


play_episode_sync = sync_function(play_episode)
"""Sync twin of :func:`play_episode`: the same arguments (a ``TaskEnv`` on a sync ``Fleet``
works too); runs on the loop bridge."""
