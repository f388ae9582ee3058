"""The record of one ``TaskEnv`` episode: what the model was shown and did, and its upload.

The chat history lives in the episode's ``ContextManager`` (``fleet_sdk.context``), which keeps
it whole and also keeps the live context the context tools manage; the recorder writes each turn
there, keeps the episode's tool errors, and uploads the finished episode as a trace session.
``TaskEnv`` makes a new one for each episode.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

# The public module's logger, for every part of TaskEnv: it is the name users configure.
log = logging.getLogger("fleet_sdk.task_env")

if TYPE_CHECKING:
    from ..actions import Action, ToolCall
    from ..context import ContextManager
    from ..env import AsyncEnv
    from ..traces import AsyncTraces, ScreenshotSink
    from . import DoneReason, ToolResult


def _written(call: ToolCall) -> str:
    """A call's arguments for the transcript: as the model wrote them when they were not an object."""
    return call.written if call.written is not None else json.dumps(call.arguments, default=str)


def _is_error(value: Any) -> bool:
    """Whether a tool value is an error: ``{"error": message}`` and nothing else."""
    return isinstance(value, dict) and set(value) == {"error"}


class Recorder:
    """Records one episode into its ``ContextManager`` and uploads it once, after grading.

    Args:
        context: The episode's context (a new one per episode).

    Attributes:
        context: That context: ``history`` is the whole chat, ``messages`` the live context.
        tool_errors: Every tool error of the episode, as ``"tool(): message"``.
        started_at: When ``start`` began the episode (None before: no episode to grade yet).
        session_id: The uploaded trace session (None until uploaded, or when the upload failed).
    """

    def __init__(self, context: ContextManager) -> None:
        self.context = context
        self.tool_errors: list[str] = []
        self.started_at: datetime | None = None
        self.session_id: str | None = None
        self._uploaded = False

    def start(self) -> None:
        """Begin the episode: the clock of its trace starts (before the instance is provisioned)."""
        self.started_at = datetime.now(UTC)

    def record_user(self, content: Any) -> None:
        """Record a ``user`` message: the task prompt, or the first screen of a multimodal task.

        Args:
            content: The prompt, or the screenshot as the model sees it (with its turn footer).
        """
        self.context.add_message({"role": "user", "content": content})

    def record_calls(self, action: Action, calls: list[ToolCall]) -> None:
        """Record a step's ``assistant`` message with its tool calls (or, without any, its text).

        Args:
            action: The parsed action (its ``content`` is the model's text).
            calls: Its calls, each with the id the episode uses for it.
        """
        if not calls:
            if action.content:  # the model's last words when it ends the episode
                self.context.add_message({"role": "assistant", "content": action.content})
            return
        self.context.add_message(
            {
                "role": "assistant",
                "content": action.content,
                "tool_calls": [
                    {
                        "id": call.call_id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": _written(call)},
                    }
                    for call in calls
                ],
            }
        )

    def record_result(self, call: ToolCall, value: Any, content: Any) -> ToolResult:
        """Record one call's result (a ``tool`` message, cut for the model) and say what was shown.

        Args:
            call: The call (with its id).
            value: What it returned; ``{"error": message}`` is an error, kept in ``tool_errors``.
            content: ``value`` as the model sees it (with the turn footer on multimodal tasks).
        """
        assert call.call_id is not None
        error: str | None = None
        if _is_error(value):
            error = f"{call.name}(): {value['error']}"
            self.tool_errors.append(error)
        shown, truncated = self.context.add_tool_result(call.call_id, call.name, content)
        return {
            "tool": call.name,
            "tool_call_id": call.call_id,
            "content": shown,
            "error": error,
            "truncated": truncated,
        }

    async def upload(
        self,
        destination: Callable[[], tuple[AsyncTraces, ScreenshotSink | None]],
        *,
        job_id: str,
        model: str | None,
        task_key: str,
        instance: AsyncEnv | None,
        reward: float | None,
        done_reason: DoneReason | None,
        steps: int,
        verifier_error: str | None,
        verifier_execution_id: str | None,
    ) -> None:
        """Upload the finished episode as a session of a trace job, once; never raises.

        A failed upload only logs (the episode's reward stands); a second call does nothing.

        Args:
            destination: Gives the traces client and the screenshot store (None: the client's);
                called inside the guard, so a client that cannot be made only logs too.
            job_id: The trace job.
            model: The model id stored with the session ("unknown" when None).
            task_key: The task.
            instance: The instance the episode ran on.
            reward: The graded reward (None uploads as ``errored``).
            done_reason: Why the episode ended.
            steps: Steps used.
            verifier_error: Why the verifier failed or could not run.
            verifier_execution_id: The verifier run that graded the episode.
        """
        if self._uploaded:
            return
        self._uploaded = True
        try:
            traces, store = destination()
            self.session_id = await traces.upload_session(
                job_id=job_id,
                task_key=task_key,
                model=model or "unknown",
                chat_history=self.context.history,
                reward=reward,
                instance_id=instance.instance_id if instance is not None else None,
                metadata={
                    "done_reason": done_reason,
                    "steps": steps,
                    "verifier_error": verifier_error,
                    "tool_errors": list(self.tool_errors),
                },
                verifier_execution_id=verifier_execution_id,
                status="completed" if reward is not None else "errored",
                started_at=self.started_at,
                ended_at=datetime.now(UTC),
                screenshot_store=store,
            )
        except Exception as exc:  # upload_session never raises; this guards the episode anyway
            log.warning("task %s: trace upload failed: %s", task_key, type(exc).__name__)
