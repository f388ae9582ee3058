"""``TaskEnv``: the episode loop a trainer drives (PROTOCOL section 5).

``reset`` provisions (or restores) the task's environment and returns the
prompt and the tools in one observation; ``step`` runs one tool call; the
episode ends when the agent says so (``done`` or ``submit_final_answer``), at
``max_steps``, or when the trainer closes it. The verifier always runs at the
end, an abandoned episode included, and its reward is kept in
``final_reward``.

Rewards are ``float | None``: None means unknown (the verifier could not be run
or crashed, a judge failed), 0.0 means graded and failed. Treating failures as 0
once poisoned 42% of training groups, so the two are never confused.

Async is the source; ``reset``/``step``/``close`` run the async methods on the
SDK's loop bridge, so they work from scripts, threads and running loops alike.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from ._exceptions import EpisodeError, FleetError, MCPError
from ._runtime._bridge import run_sync
from .env import AsyncEnv, filter_tools
from .tasks import Task
from .tools import Tool

if TYPE_CHECKING:
    from ._client import AsyncFleet, Fleet
    from .traces import ScreenshotSink
    from .verifiers._remote import RemoteVerifierOutcome

__all__ = ["SUBMIT_FINAL_ANSWER", "DoneReason", "TaskEnv"]

log = logging.getLogger("fleet_sdk.task_env")

SUBMIT_FINAL_ANSWER = "submit_final_answer"
DoneReason = Literal["agent", "submitted", "max_steps", "closed"]

SUBMIT_TOOL = Tool(
    name=SUBMIT_FINAL_ANSWER,
    description="Submit your final answer to the task. This ends the episode.",
    input_schema={
        "type": "object",
        "properties": {"answer": {"description": "The final answer."}},
        "required": ["answer"],
    },
)


def _message_content(value: Any) -> Any:
    """A tool value as message content: a string or content blocks, else its JSON text."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(b, dict) and "type" in b for b in value):
        return value
    return json.dumps(value, default=str)


class TaskEnv:
    """A task-environment episode over a Fleet (or local) environment instance.

    Args:
        task: The task (a ``Task`` or its config dict).
        fleet: The client: an ``AsyncFleet`` for the async methods, a ``Fleet`` for the sync
            ones (None creates one from the environment).
        max_steps: Steps before the episode ends with ``done_reason == "max_steps"``.
        partial_reward: Use the partial reward of PROTOCOL section 6 when the score is 0.0.
        call_deadline: Wall-clock seconds per tool call, retries included.
        verifier_timeout: Seconds the platform gives one verifier run.
        verifier_deadline: Overall seconds for the verifier, retries included.
        ttl_seconds: Lifetime of the instance.
        make_kwargs: More arguments for ``make`` (``region``, ``image_type``...).
        trace_job_id: A trace job (``fleet.traces.create_job``): every finished episode is
            uploaded to it after the verifier, with its reward and ``verifier_execution_id``
            (``trace_session_id`` holds the session id). An upload never fails the episode.
        trace_model: The model id stored with uploaded sessions.
        screenshot_store: Where uploaded screenshots go (default: ``fleet.traces``' store,
            the production bucket).

    Attributes:
        chat_history: The episode as OpenAI-shape messages: the prompt (``user``), one
            ``assistant`` message with ``tool_calls`` per step, and each tool result (``tool``,
            with the turn footer on multimodal tasks). Reset by ``reset``.
    """

    def __init__(
        self,
        task: Task | Mapping[str, Any],
        *,
        fleet: AsyncFleet | Fleet | None = None,
        max_steps: int = 50,
        partial_reward: bool = False,
        call_deadline: float = 120.0,
        verifier_timeout: int = 60,
        verifier_deadline: float = 300.0,
        ttl_seconds: int | None = None,
        make_kwargs: Mapping[str, Any] | None = None,
        trace_job_id: str | None = None,
        trace_model: str | None = None,
        screenshot_store: ScreenshotSink | None = None,
    ) -> None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {max_steps}")
        self.task = task if isinstance(task, Task) else Task.model_validate(task)
        self._fleet_arg = fleet
        self._fleet: AsyncFleet | None = None
        self.max_steps = max_steps
        self.partial_reward = partial_reward
        self.call_deadline = call_deadline
        self.verifier_timeout = verifier_timeout
        self.verifier_deadline = verifier_deadline
        self.ttl_seconds = ttl_seconds
        self.make_kwargs = dict(make_kwargs or {})
        self.trace_job_id = trace_job_id
        self.trace_model = trace_model
        self.screenshot_store = screenshot_store
        self.env: AsyncEnv | None = None
        self.tools: list[Tool] = []
        self._reset_episode()

    def __repr__(self) -> str:
        return f"TaskEnv(task_key={self.task.task_key!r}, step={self.step_count}, done={self.done})"

    def _reset_episode(self) -> None:
        self.step_count = 0
        self.done = False
        self.done_reason: DoneReason | None = None
        self.final_answer: Any = None
        self.final_reward: float | None = None
        self.verifier_stdout: str | None = None
        self.verifier_error: str | None = None
        self.verifier_execution_id: str | None = None
        self.verifier_outcome: RemoteVerifierOutcome | None = None
        self.tool_errors: list[str] = []
        self._verified = False
        self.chat_history: list[dict[str, Any]] = []
        self.trace_session_id: str | None = None
        self._traced = False
        self._started_at: datetime | None = None

    # -- helpers ------------------------------------------------------------------------

    def _async_fleet(self) -> AsyncFleet:
        if self._fleet is None:
            from ._client import AsyncFleet, Fleet

            if isinstance(self._fleet_arg, Fleet):
                self._fleet = self._fleet_arg.async_fleet
            elif isinstance(self._fleet_arg, AsyncFleet):
                self._fleet = self._fleet_arg
            else:
                self._fleet = AsyncFleet()
        return self._fleet

    @property
    def multimodal(self) -> bool:
        """Whether the task is computer- or browser-use (observations carry images)."""
        return self.task.task_modality != "tool_use"

    def _offers_submit(self) -> bool:
        return self.task.task_modality == "tool_use" and SUBMIT_FINAL_ANSWER in self.task.prompt

    def _turn_footer(self) -> dict[str, Any]:
        return {"type": "text", "text": f"[Turn {self.step_count}/{self.max_steps}]"}

    def _content(self, value: Any) -> Any:
        """A tool value as the model sees it; multimodal observations get the turn footer."""
        if not self.multimodal:
            return value
        blocks = value if isinstance(value, list) else [{"type": "text", "text": str(value)}]
        return [*blocks, self._turn_footer()]

    # -- the episode --------------------------------------------------------------------

    async def reset_async(self, seed: int | None = None) -> dict[str, Any]:
        """Start an episode: provision or restore the instance, list tools, return the first observation.

        Args:
            seed: Forwarded to the instance's reset.

        Returns:
            ``{"prompt", "tools" (OpenAI format), "step", "task_key", "max_steps"}``, plus
            ``"content"`` (a screenshot and the turn footer) for multimodal tasks.
        """
        self._reset_episode()
        self._started_at = datetime.now(UTC)
        if self.env is None:
            self.env = await self._async_fleet().make(
                self.task.env_spec,
                data_key=self.task.data_spec,
                env_variables=self.task.env_variables or None,
                ttl_seconds=self.ttl_seconds,
                **self.make_kwargs,
            )
            all_tools = await self.env.mcp.list_tools()
        else:
            await self.env.reset(seed)
            all_tools = await self.env.mcp.list_tools()
        tools = filter_tools(all_tools, self.task.task_modality)
        if self._offers_submit():
            tools = [*tools, SUBMIT_TOOL]
        self.tools = tools
        observation: dict[str, Any] = {
            "prompt": self.task.prompt,
            "tools": [tool.to_openai() for tool in tools],
            "step": 0,
            "task_key": self.task.task_key,
            "max_steps": self.max_steps,
        }
        if self.multimodal:
            screenshot = await self.env.call_tool(
                "computer", {"action": "screenshot"}, deadline=self.call_deadline
            )
            observation["content"] = self._content(screenshot)
        self.chat_history.append({"role": "user", "content": self.task.prompt})
        if "content" in observation:
            self.chat_history.append({"role": "user", "content": observation["content"]})
        return observation

    async def step_async(
        self, action: Mapping[str, Any]
    ) -> tuple[dict[str, Any], float | None, bool, dict[str, Any]]:
        """Run one action.

        Args:
            action: ``{"tool": name, "params": {...}, "done": bool}``; ``tool`` may be omitted
                when only ``done`` is given. Optional ``tool_call_id`` (the model's call id) and
                ``content`` (the model's text) are recorded in ``chat_history``.

        Returns:
            ``(observation, reward, done, info)``. The reward is 0.0 until the episode ends, then
            the verifier's reward (``None`` when unknown).

        Raises:
            EpisodeError: The episode already ended, or ``reset`` was not called.
        """
        if self.env is None:
            raise EpisodeError("call reset() before step()")
        if self.done:
            raise EpisodeError(
                f"the episode of {self.task.task_key!r} is done ({self.done_reason}); call reset()"
            )
        name = action.get("tool")
        params = action.get("params") or {}
        if name is not None and not isinstance(name, str):
            raise EpisodeError(f"action['tool'] must be a string, got {type(name).__name__}")
        if not isinstance(params, Mapping):
            raise EpisodeError(f"action['params'] must be an object, got {type(params).__name__}")
        self.step_count += 1
        value: Any = None
        tool_error: str | None = None
        call_id = self._record_call(action, name, params)
        if name == SUBMIT_FINAL_ANSWER and self._offers_submit():
            self.final_answer = params.get("answer")
            value = "Final answer submitted."
            self._finish("submitted")
        elif name:
            try:
                value = await self.env.call_tool(name, params, deadline=self.call_deadline)
            except MCPError as exc:
                value = {"error": str(exc)}
            if isinstance(value, dict) and set(value) == {"error"}:
                tool_error = f"{name}(): {value['error']}"
                self.tool_errors.append(tool_error)
        if not self.done and action.get("done"):
            self._finish("agent")
        if not self.done and self.step_count >= self.max_steps:
            self._finish("max_steps")
        observation = {"tool": name, "content": self._content(value), "step": self.step_count}
        if call_id is not None:
            self.chat_history.append(
                {"role": "tool", "tool_call_id": call_id, "content": _message_content(observation["content"])}
            )
        reward: float | None = 0.0
        if self.done_reason is not None:  # this step ended the episode
            reward = await self._end_episode()
        info = {
            "step": self.step_count,
            "done_reason": self.done_reason,
            "tool_error": tool_error,
            "verifier_execution_id": self.verifier_execution_id,
            "verifier_error": self.verifier_error,
        }
        return observation, reward, self.done, info

    def _record_call(
        self, action: Mapping[str, Any], name: str | None, params: Mapping[str, Any]
    ) -> str | None:
        """Append the assistant's tool call to ``chat_history``; returns its id (None: no tool)."""
        if not name:
            return None
        given = action.get("tool_call_id") or action.get("id")
        call_id = given if isinstance(given, str) and given else f"call_{uuid.uuid4().hex[:24]}"
        text = action.get("content")
        self.chat_history.append(
            {
                "role": "assistant",
                "content": text if isinstance(text, str) else None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(dict(params), default=str)},
                    }
                ],
            }
        )
        return call_id

    def _finish(self, reason: DoneReason) -> None:
        self.done = True
        self.done_reason = reason

    async def _end_episode(self) -> float | None:
        """Run the verifier, then upload the episode's trace when a trace job is set."""
        reward = await self._verify()
        await self._upload_trace()
        return reward

    async def _upload_trace(self) -> None:
        """Upload the finished episode once; never raises (a failed upload only logs)."""
        if self.trace_job_id is None or self._traced:
            return
        self._traced = True
        try:
            from ._client import Fleet

            fleet = self._async_fleet()
            store = self.screenshot_store
            if store is None and isinstance(self._fleet_arg, Fleet):
                store = self._fleet_arg.traces.screenshot_store  # what the caller set on the sync client
            self.trace_session_id = await fleet.traces.upload_session(
                job_id=self.trace_job_id,
                task_key=self.task.task_key,
                model=self.trace_model or "unknown",
                chat_history=self.chat_history,
                reward=self.final_reward,
                instance_id=self.env.instance_id if self.env is not None else None,
                metadata={
                    "done_reason": self.done_reason,
                    "steps": self.step_count,
                    "verifier_error": self.verifier_error,
                    "tool_errors": list(self.tool_errors),
                },
                verifier_execution_id=self.verifier_execution_id,
                status="completed" if self.final_reward is not None else "errored",
                started_at=self._started_at,
                ended_at=datetime.now(UTC),
                screenshot_store=store,
            )
        except Exception as exc:  # upload_session never raises; this guards the episode anyway
            log.warning("task %s: trace upload failed: %s", self.task.task_key, type(exc).__name__)

    async def _verify(self) -> float | None:
        """Run the verifier once per episode and set the feedback properties."""
        if self._verified:
            return self.final_reward
        self._verified = True
        if not self.task.verifier_code:
            self.verifier_error = f"task {self.task.task_key!r} has no verifier_code; reward unknown"
            self.final_reward = None
            return None
        assert self.env is not None
        from .rewards import reward_from_outcome
        from .verifiers._remote import run_remote_async

        try:
            outcome = await run_remote_async(
                self._async_fleet(),
                self.task.verifier_code,
                key=self.task.task_key,
                instance_id=self.env.instance_id,
                final_answer=self.final_answer,
                run_timeout=self.verifier_timeout,
                deadline=self.verifier_deadline,
            )
        except FleetError as exc:
            self.verifier_error = f"verifier could not be executed: {exc}"
            log.warning("task %s: %s", self.task.task_key, self.verifier_error)
            self.final_reward = None
            return None
        self.verifier_outcome = outcome
        self.verifier_stdout = outcome.stdout
        self.verifier_execution_id = outcome.execution_id
        if outcome.error is not None:
            self.verifier_error = f"{outcome.error.type}: {outcome.error.message}"
            log.warning("task %s: verifier failed: %s", self.task.task_key, self.verifier_error)
        self.final_reward = reward_from_outcome(outcome, partial=self.partial_reward)
        return self.final_reward

    async def close_async(self) -> None:
        """End the episode (running the verifier if it was abandoned) and delete the instance.

        A client this episode created for itself (``fleet=None``) is closed too.
        """
        env, self.env = self.env, None
        try:
            if env is not None:
                try:
                    if not self.done and self.step_count > 0:
                        self._finish("closed")
                        self.env = env
                        await self._end_episode()
                        self.env = None
                finally:
                    await env.close()
        finally:
            if self._fleet_arg is None and self._fleet is not None:
                owned, self._fleet = self._fleet, None
                await owned.close()

    # -- sync twins ---------------------------------------------------------------------

    def reset(self, seed: int | None = None) -> dict[str, Any]:
        """Sync twin of ``reset_async``.

        Args:
            seed: Forwarded to the instance's reset.
        """
        return run_sync(self.reset_async(seed))

    def step(self, action: Mapping[str, Any]) -> tuple[dict[str, Any], float | None, bool, dict[str, Any]]:
        """Sync twin of ``step_async``.

        Args:
            action: ``{"tool": name, "params": {...}, "done": bool}``.
        """
        return run_sync(self.step_async(action))

    def close(self) -> None:
        """Sync twin of ``close_async``."""
        run_sync(self.close_async())

    async def __aenter__(self) -> TaskEnv:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close_async()

    def __enter__(self) -> TaskEnv:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
