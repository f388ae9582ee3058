"""One episode of a run played here: a ``TaskEnv`` episode played by ``play_episode`` with the model's
policy, turned into the report's row (``Outcome``) and what the run directory keeps of it.

A crash is an errored row, never an exception; the row tells a model's failure from the
infrastructure's and the verifier's. The episode is not uploaded here: ``Played.upload`` is what
its trace upload sends, which the run sends once the row is stored. An errored episode that no
session will hold keeps its own transcript (``keep_transcript``). ``play_job`` is the same as an
executor's job: module-level, so executors in other processes can ship it.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._client import AsyncFleet
from .._exceptions import PolicyError
from ..episodes import EpisodeResult, play_episode
from ..policies import ModelEndpoint, Policy, PolicyContext, PolicyFactory, PolicyTurn, make_policy
from ..reports import ErrorKind, Outcome, classify
from ..rewards import verifier_feedback
from ..task_env import TaskEnv
from ..tasks import Task
from ._run import safe_name
from ._rundir import TRANSCRIPTS_DIR, RunDir

__all__ = ["ERROR_LIMIT", "Played", "keep_transcript", "lost_episode", "play", "play_job"]

ERROR_LIMIT = 500
"""Characters of an error a row keeps."""
_ACTION_LIMIT = 300


class _ModelWatch:
    """A policy factory whose policies note when the model itself failed (a ``PolicyError``), so
    an errored episode can be told apart as a model error from an infrastructure one.

    Args:
        factory: The model's policy factory.
    """

    def __init__(self, factory: PolicyFactory) -> None:
        self._factory = factory
        self.failed = False

    def __call__(self, context: PolicyContext) -> Policy:
        return _WatchedPolicy(self._factory(context), self)


class _WatchedPolicy:
    def __init__(self, policy: Policy, watch: _ModelWatch) -> None:
        self._policy = policy
        self._watch = watch

    async def next_turn(self, messages: Sequence[Mapping[str, Any]]) -> PolicyTurn:
        try:
            return await self._policy.next_turn(messages)
        except PolicyError:
            self._watch.failed = True
            raise

    async def aclose(self) -> None:
        await self._policy.aclose()


def _last_action(env: TaskEnv) -> str | None:
    """The episode's last tool call, as ``tool({...arguments})``."""
    for message in reversed(env.chat_history):
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        if calls:
            function = calls[-1].get("function") or {}
            return f"{function.get('name')}({function.get('arguments') or ''})"[:_ACTION_LIMIT]
    return None


def _outcome(
    model: str, sample: int, result: EpisodeResult, *, env: TaskEnv | None = None, model_failed: bool = False
) -> Outcome:
    """An episode's report row: the result, and what the played ``env`` shows of how it went
    (what the verifier said, the last action)."""
    error = result.error or result.verifier_error
    error_kind: ErrorKind | None = None
    if result.reward is None:
        error_kind = "model" if model_failed else "infrastructure" if result.error else "verifier"
    passed = result.reward is not None and result.reward >= 1.0
    return Outcome(
        task_key=result.task_key,
        model=model,
        sample=sample,
        status=classify(result.reward),
        score=result.reward,
        session_id=result.session_id,
        verifier_execution_id=result.verifier_execution_id,
        error=error[:ERROR_LIMIT] if error else None,
        duration_ms=int(result.duration_s * 1000),
        error_kind=error_kind,
        done_reason=result.done_reason,
        feedback=None if env is None or passed else verifier_feedback(env.verifier_stdout),
        tool_errors=len(result.tool_errors),
        last_tool_error=result.tool_errors[-1][:ERROR_LIMIT] if result.tool_errors else None,
        last_action=None if env is None else _last_action(env),
    )


async def play(
    fleet: AsyncFleet,
    task: Task,
    model: str,
    sample: int,
    *,
    max_steps: int,
    trace_job_id: str | None,
    endpoint: ModelEndpoint | None,
    factory: PolicyFactory | None = None,
) -> Played:
    """One episode; never raises (a crash is an errored outcome). ``factory``: the run's policy
    factory of ``model`` (one model HTTP client for the whole run), else one is made here."""
    episode_id = f"{task.task_key}:{model}:{sample}"  # seeds the random policy: a slot replays identically
    try:
        policy = factory or make_policy(model, endpoint)
    except PolicyError as exc:  # no instance is made for a model that cannot be asked
        error = f"{type(exc).__name__}: {exc} (run_evaluation's model_endpoint)"
        result = EpisodeResult.unplayed(episode_id, task.task_key, error)
        return Played(_outcome(model, sample, result, model_failed=True))
    watch = _ModelWatch(policy)
    # No trace job on the env: the run uploads the episode after storing it (``Played.upload``).
    env = TaskEnv(task, fleet=fleet, max_steps=max_steps)
    seen = _Seen()
    result = await play_episode(env, watch, episode_id=episode_id, on_step=seen.note)
    outcome = _outcome(model, sample, result, env=env, model_failed=watch.failed)
    # A failed episode is not uploaded (as ``play_episode`` has it): its reward would read as graded.
    failed = result.error is not None and result.reward is None
    if trace_job_id is not None and not failed:
        return Played(outcome, upload=_upload_of(model, result, env, seen))
    if outcome.status == "errored":  # no session will hold its transcript: it travels with it
        return Played(outcome, [dict(m) for m in env.chat_history])
    return Played(outcome)


class _Seen:
    """What an episode shows only while it runs: its instance and when it started."""

    def __init__(self) -> None:
        self.started_at = dt.datetime.now(dt.UTC)
        self.instance_id: str | None = None

    async def note(self, env: TaskEnv) -> None:
        if env.env is not None:
            self.instance_id = env.env.instance_id


def _upload_of(model: str, result: EpisodeResult, env: TaskEnv, seen: _Seen) -> dict[str, Any]:
    """What uploading the episode sends (``AsyncTraces.upload_session``'s arguments, JSON-ready),
    as ``TaskEnv`` would send it with a trace job."""
    return {
        "task_key": result.task_key,
        "model": model,
        "chat_history": [dict(m) for m in env.chat_history],
        "reward": result.reward,
        "instance_id": seen.instance_id,
        "metadata": {
            "done_reason": result.done_reason,
            "steps": result.steps,
            "verifier_error": result.verifier_error,
            "tool_errors": list(result.tool_errors),
        },
        "verifier_execution_id": result.verifier_execution_id,
        "status": "completed" if result.reward is not None else "errored",
        "started_at": seen.started_at.isoformat(),
        "ended_at": dt.datetime.now(dt.UTC).isoformat(),
    }


@dataclass(frozen=True)
class Played:
    """A played episode: its row, the transcript of an errored one no session will hold, and the
    trace upload it owes (sent once the row is stored)."""

    outcome: Outcome
    messages: list[dict[str, Any]] | None = None
    upload: dict[str, Any] | None = None


async def play_job(fleet: AsyncFleet, job: tuple[Any, ...], attempt: int) -> Played:
    """``play`` as an executor ``Job`` (module-level, so executors in other processes can ship it)."""
    task, model, sample, max_steps, trace_job_id, endpoint, factory = job
    return await play(
        fleet,
        task,
        model,
        sample,
        max_steps=max_steps,
        trace_job_id=trace_job_id,
        endpoint=endpoint,
        factory=factory,
    )


def keep_transcript(store: RunDir, played: Played) -> Outcome:
    """Write an errored episode's own transcript into the run directory; its row naming the file."""
    outcome = played.outcome
    if played.messages is None:
        return outcome
    name = safe_name(f"{outcome.task_key}.{outcome.model}.{outcome.sample}")
    relative = f"{TRANSCRIPTS_DIR}/episode-{name}.json"
    # The shape of a session's transcript (``transcript`` holds the messages), and why it errored.
    document = {
        "task": {"key": outcome.task_key},
        "model": outcome.model,
        "sample": outcome.sample,
        "error": outcome.error,
        "transcript": played.messages,
    }
    store.transcripts.mkdir(exist_ok=True)
    text = json.dumps(document, indent=2, ensure_ascii=False, default=str) + "\n"
    (store.path / relative).write_text(text, encoding="utf-8")
    return outcome.model_copy(update={"transcript": relative})


def lost_episode(task: Task, model: str, sample: int, why: object) -> Played:
    """The errored row of an episode every worker it was sent to was lost with."""
    return Played(
        Outcome(
            task_key=task.task_key,
            model=model,
            sample=sample,
            status=classify(None),
            score=None,
            error=f"worker lost: {why!r}"[:ERROR_LIMIT],
            error_kind="infrastructure",
        )
    )
