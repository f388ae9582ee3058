"""``TaskEnv``: the episode loop a trainer drives (docs/wire.md#episodes).

``reset`` provisions (or restores) the task's environment and returns the
prompt and the tools in one observation; ``step`` runs one action (the tool
calls of one model turn, in any shape of ``fleet_sdk.actions``); the
episode ends when the agent says so (``done`` or ``submit_final_answer``), at
``max_steps``, or when the trainer closes it. The verifier always runs at the
end, an abandoned episode included, and its reward is kept in
``final_reward``.

Rewards are ``float | None``: None means unknown (the verifier could not be run
or crashed, a judge failed), 0.0 means graded and failed. Treating failures as 0
once poisoned 42% of training groups, so the two are never confused.

Every tool result goes through the episode's ``ContextManager``
(``fleet_sdk.context``): with ``max_output_chars`` or ``context_tools`` set it is
cut for the model and kept whole for the context tools.

Async is the source; ``reset``/``step``/``close`` run the async methods on the
SDK's loop bridge, so they work from scripts, threads and running loops alike.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypedDict, overload

from .._exceptions import ContextToolError, EpisodeError, MCPError
from .._runtime._cleanup import CLEANUP_DEADLINE, run_cleanup
from .._twin import sync_method
from ..actions import ToolCall, parse_action
from ..context import CONTEXT_TOOL_NAMES, CONTEXT_TOOLS, ContextManager
from ..env import AsyncEnv
from ..messages import AnthropicRequest, to_anthropic, to_openai
from ..protocol import SUBMIT_FINAL_ANSWER
from ..tasks import Task, as_task
from ..tools import Tool

# TaskEnv runs the episode and hands the rest to one collaborator each, made per episode where
# their state is the episode's: _grading (the verifier, run once), _recording (the chat history,
# tool errors and the trace upload) and _modality (tools, screens and calls by task modality).
# Imported as modules, so this public module shows none of their names.
from . import _grading, _modality, _recording

if TYPE_CHECKING:
    from pydantic import BaseModel

    from .._client import AsyncFleet, Fleet
    from ..browser import BrowserSession
    from ..remote_verifier import RemoteVerifierOutcome
    from ..traces import AsyncTraces, ScreenshotSink

__all__ = ["SUBMIT_FINAL_ANSWER", "DoneReason", "Observation", "StepInfo", "TaskEnv", "ToolResult"]

log = logging.getLogger("fleet_sdk.task_env")

CLOSE_DEADLINE = CLEANUP_DEADLINE
"""Seconds ``close_async`` may take to delete the instance, even in a cancelled task."""
DoneReason = Literal["agent", "submitted", "max_steps", "closed"]

# Without truncation asked for, no tool output is cut.
_NO_LIMIT = sys.maxsize


class ToolResult(TypedDict):
    """The outcome of one tool call of an action.

    Attributes:
        tool: The tool called.
        tool_call_id: The call's id (the model's, or one the env made).
        content: What the model is shown: the tool's value, or, when it was longer than
            ``max_output_chars``, the head of its text and a note saying how to read the rest.
        error: The tool's error message, or None.
        truncated: Whether ``content`` was cut (the full text is in ``context.outputs``).
    """

    tool: str
    tool_call_id: str
    content: Any
    error: str | None
    truncated: bool


class Observation(TypedDict):
    """What ``reset`` and ``step`` return: the same keys every time.

    Attributes:
        task_key: The task.
        prompt: The task prompt.
        tools: The tools offered, in OpenAI format (``TaskEnv.tools`` as ``Tool`` objects).
        step: Steps used so far (0 after ``reset``).
        max_steps: The step budget.
        tool: The last tool run by this action (None after ``reset`` or a bare ``done``).
        tool_call_id: Its call id.
        content: What the model is shown from that call; after ``reset`` the first screenshot
            on multimodal tasks, else None.
        results: One ``ToolResult`` per call of the action, in order (empty after ``reset``).
    """

    task_key: str
    prompt: str
    tools: list[dict[str, Any]]
    step: int
    max_steps: int
    tool: str | None
    tool_call_id: str | None
    content: Any
    results: list[ToolResult]


class StepInfo(TypedDict):
    """The ``info`` of ``step``: the same keys every time.

    Attributes:
        step: Steps used so far.
        done_reason: Why the episode ended (``agent``, ``submitted``, ``max_steps``, ``closed``),
            None while it runs.
        tool_error: The last tool error of this step, or None.
        tool_errors: This step's tool errors, as ``"tool(): message"``.
        verifier_execution_id: The platform's id of the verifier run (None until it ran, or
            unknown).
        verifier_error: Why the verifier failed or could not run (None when it graded).
    """

    step: int
    done_reason: DoneReason | None
    tool_error: str | None
    tool_errors: list[str]
    verifier_execution_id: str | None
    verifier_error: str | None


def _itself(env: TaskEnv) -> TaskEnv:
    # TaskEnv carries both forms: the sync methods drive the same object's async ones.
    return env


class TaskEnv:
    """A task-environment episode over a Fleet (or local) environment instance.

    Args:
        task: The task: a ``fleet_sdk.Task``, its config mapping, or the generated ``Task`` model
            the API returns (``fleet.api.control_plane.list_tasks().tasks[0]``).
        fleet: The client: an ``AsyncFleet`` for the async methods, a ``Fleet`` for the sync
            ones (None creates one from the environment).
        max_steps: Steps (actions) before the episode ends with ``done_reason == "max_steps"``.
        partial_reward: Use the partial reward of docs/wire.md#verifiers when the score is 0.0.
        call_deadline: Wall-clock seconds per tool call, retries included.
        verifier_timeout: Seconds the platform gives one verifier run.
        verifier_deadline: Overall seconds for the verifier, retries included.
        ttl_seconds: Lifetime of the instance (and of the browser lease); computer_use and
            browser_use tasks default to ``fleet_sdk.browser.MULTIMODAL_TTL_SECONDS``.
        make_kwargs: More arguments for ``make`` (``region``, ``image_type``...); computer_use
            tasks default to ``image_type="mcp"``.
        browser_kwargs: More arguments for ``BrowserSession.open`` on browser_use tasks
            (``lease_id``, ``ready_deadline``).
        trace_job_id: A trace job (``fleet.traces.create_job``): every finished episode is
            uploaded to it after the verifier, with its reward and ``verifier_execution_id``
            (``trace_session_id`` holds the session id). An upload never fails the episode.
        trace_model: The model id stored with uploaded sessions.
        screenshot_store: Where uploaded screenshots go (default: ``fleet.traces``' store,
            the production bucket).
        context_tools: Offer the model the context tools of ``fleet_sdk.context``
            (``check_context``, ``manage_context``, ``search_history``, ``search_tool_output``,
            ``view_tool_output``); they run locally and use a step like any tool. Tool output
            is then cut to ``max_output_chars`` (default 20,000).
        max_output_chars: Longest tool output the model is shown; longer ones are cut with a
            note and kept whole in ``context`` (None: no limit unless ``context_tools``).
        max_context_tokens: The model's context budget, reported by ``check_context``.
        tokenizer: Counts tokens for ``check_context`` (default: characters / 4).

    Attributes:
        task: The task (a ``fleet_sdk.Task``).
        env: The environment instance (``AsyncEnv``), None before ``reset`` and after ``close``.
        tools: The tools offered to the model (``Tool``), set by ``reset``.
        step_count: Steps used in this episode.
        done: Whether the episode ended.
        done_reason: Why it ended: ``agent``, ``submitted``, ``max_steps`` or ``closed`` (None
            while running).
        final_answer: The answer given to ``submit_final_answer`` (None without one).
        final_reward: The verifier's reward, ``float | None`` (None: unknown, never 0.0 for
            "could not grade").
        verifier_stdout: What the verifier printed.
        verifier_error: Why the verifier failed or could not run (None when it graded).
        verifier_execution_id: The platform's id of the verifier run (None: unknown).
        verifier_outcome: The full ``RemoteVerifierOutcome`` of the run.
        tool_errors: Every tool error of the episode, as ``"tool(): message"``.
        chat_history: The episode as OpenAI-shape messages: the prompt (``user``), one
            ``assistant`` message with ``tool_calls`` per step, and each tool result (``tool``,
            cut to ``max_output_chars``, with the turn footer on multimodal tasks). Messages
            ``manage_context`` dropped are still here; ``messages(context=True)`` leaves them out.
            Reset by ``reset``.
        context: The episode's ``ContextManager`` (live context, stored full outputs).
        multimodal: Whether the task is computer- or browser-use.
        trace_session_id: The uploaded trace session (with ``trace_job_id``).
        max_steps, partial_reward, call_deadline, verifier_timeout, verifier_deadline,
        ttl_seconds, make_kwargs, browser_kwargs, trace_job_id, trace_model, screenshot_store, context_tools,
        max_output_chars: The constructor's arguments.
    """

    def __init__(
        self,
        task: Task | Mapping[str, Any] | BaseModel,
        *,
        fleet: AsyncFleet | Fleet | None = None,
        max_steps: int = 50,
        partial_reward: bool = False,
        call_deadline: float = 120.0,
        verifier_timeout: int = 60,
        verifier_deadline: float = 300.0,
        ttl_seconds: int | None = None,
        make_kwargs: Mapping[str, Any] | None = None,
        browser_kwargs: Mapping[str, Any] | None = None,
        trace_job_id: str | None = None,
        trace_model: str | None = None,
        screenshot_store: ScreenshotSink | None = None,
        context_tools: bool = False,
        max_output_chars: int | None = None,
        max_context_tokens: int | None = None,
        tokenizer: Callable[[str], int] | None = None,
    ) -> None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {max_steps}")
        given: object = task  # the annotation says no str; a newcomer passes the task key anyway
        if isinstance(given, str):
            # pydantic's "Input should be a valid dictionary" would not say what to do instead.
            raise TypeError(
                f"TaskEnv takes a Task, not a task key: fetch it first, "
                f"TaskEnv(fleet.tasks.get({given!r}), fleet=fleet) "
                f"(with an AsyncFleet: await fleet.tasks.get({given!r}))"
            )
        self.task = as_task(task)
        self._fleet_arg = fleet
        self._fleet: AsyncFleet | None = None
        self.max_steps = max_steps
        self.partial_reward = partial_reward
        self.call_deadline = call_deadline
        self.verifier_timeout = verifier_timeout
        self.verifier_deadline = verifier_deadline
        self.ttl_seconds = ttl_seconds
        self.make_kwargs = dict(make_kwargs or {})
        self.browser_kwargs = dict(browser_kwargs or {})
        self.trace_job_id = trace_job_id
        self.trace_model = trace_model
        self.screenshot_store = screenshot_store
        self.context_tools = context_tools
        if max_output_chars is None and context_tools:
            from ..context import DEFAULT_MAX_OUTPUT_CHARS

            max_output_chars = DEFAULT_MAX_OUTPUT_CHARS
        self.max_output_chars = max_output_chars
        self._max_context_tokens = max_context_tokens
        self._tokenizer = tokenizer
        self._new_context()  # fails early on a bad max_output_chars
        self.env: AsyncEnv | None = None
        self._mode = _modality.Modality(self.task)  # keeps a browser_use lease across episodes
        self.tools: list[Tool] = []
        self._tool_specs: list[dict[str, Any]] = []
        self._closed = False
        self._reset_episode()

    def __repr__(self) -> str:
        return f"TaskEnv(task_key={self.task.task_key!r}, step={self.step_count}, done={self.done})"

    def _new_context(self) -> ContextManager:
        return ContextManager(
            max_output_chars=self.max_output_chars or _NO_LIMIT,
            max_context_tokens=self._max_context_tokens,
            tokenizer=self._tokenizer,
            offer_tools=self.context_tools,
        )

    def _reset_episode(self) -> None:
        self.step_count = 0
        self.done = False
        self.done_reason: DoneReason | None = None
        self.final_answer: Any = None
        self._grader = _grading.Grader()
        self._recorder = _recording.Recorder(self._new_context())

    # -- what the collaborators keep, read where it always was (see the class docstring) --

    @property
    def chat_history(self) -> list[dict[str, Any]]:
        """Every message of the episode, OpenAI shape (see the class docstring)."""
        return self.context.history

    @property
    def context(self) -> ContextManager:
        """The episode's ``ContextManager`` (live context, stored full outputs)."""
        return self._recorder.context

    @property
    def tool_errors(self) -> list[str]:
        """Every tool error of the episode, as ``"tool(): message"``."""
        return self._recorder.tool_errors

    @property
    def trace_session_id(self) -> str | None:
        """The uploaded trace session (with ``trace_job_id``)."""
        return self._recorder.session_id

    @property
    def final_reward(self) -> float | None:
        """The verifier's reward (None: unknown, never 0.0 for "could not grade")."""
        return self._grader.reward

    @property
    def verifier_stdout(self) -> str | None:
        """What the verifier printed."""
        return self._grader.stdout

    @property
    def verifier_error(self) -> str | None:
        """Why the verifier failed or could not run (None when it graded)."""
        return self._grader.error

    @property
    def verifier_execution_id(self) -> str | None:
        """The platform's id of the verifier run (None: unknown)."""
        return self._grader.execution_id

    @property
    def verifier_outcome(self) -> RemoteVerifierOutcome | None:
        """The full ``RemoteVerifierOutcome`` of the run."""
        return self._grader.outcome

    @property
    def browser(self) -> BrowserSession | None:
        """The browser lease of a browser_use task (None before ``reset`` and after ``close``)."""
        return self._mode.browser

    @overload
    def messages(
        self, format: Literal["openai"] = "openai", *, context: bool = False
    ) -> list[dict[str, Any]]: ...

    @overload
    def messages(self, format: Literal["anthropic"], *, context: bool = False) -> AnthropicRequest: ...

    def messages(
        self, format: Literal["openai", "anthropic"] = "openai", *, context: bool = False
    ) -> list[dict[str, Any]] | AnthropicRequest:
        """The chat history rendered for a model API (a copy: change it freely).

        Args:
            format: ``openai``: a list of chat-completions messages (``system``, ``user``,
                ``assistant`` with ``tool_calls``, ``tool``), for ``messages=``. ``anthropic``: an
                ``AnthropicRequest``, ``{"system": str | None, "messages": [...]}`` with roles
                alternating and tool calls and results as ``tool_use`` / ``tool_result`` blocks.
            context: Only the live context (without the turns ``manage_context`` dropped).
        """
        history = self.context.messages if context else self.context.history
        if format == "openai":
            return to_openai(history)
        if format == "anthropic":
            return to_anthropic(history)
        raise ValueError(f"format must be 'openai' or 'anthropic', got {format!r}")

    def tool_specs(self, format: Literal["openai", "anthropic"] = "openai") -> list[dict[str, Any]]:
        """The offered tools in a model API's format.

        Args:
            format: ``openai`` or ``anthropic``.
        """
        if format == "openai":
            return [tool.to_openai() for tool in self.tools]
        if format == "anthropic":
            return [tool.to_anthropic() for tool in self.tools]
        raise ValueError(f"format must be 'openai' or 'anthropic', got {format!r}")

    # -- helpers ------------------------------------------------------------------------

    def _async_fleet(self) -> AsyncFleet:
        if self._fleet is None:
            from .._client import AsyncFleet, Fleet

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
        return self._mode.multimodal

    def _content(self, value: Any) -> Any:
        """A tool value as the model sees it; multimodal observations get the turn footer."""
        return self._mode.shown(value, step=self.step_count, max_steps=self.max_steps)

    def _trace_destination(self) -> tuple[AsyncTraces, ScreenshotSink | None]:
        """Where an episode's trace goes: the client's traces, and the screenshot store."""
        from .._client import Fleet

        fleet = self._async_fleet()
        store = self.screenshot_store
        if store is None and isinstance(self._fleet_arg, Fleet):
            store = self._fleet_arg.traces.screenshot_store  # what the caller set on the sync client
        return fleet.traces, store

    def _observation(self, results: list[ToolResult]) -> Observation:
        last = results[-1] if results else None
        return {
            "task_key": self.task.task_key,
            "prompt": self.task.prompt,
            "tools": self._tool_specs,
            "step": self.step_count,
            "max_steps": self.max_steps,
            "tool": last["tool"] if last else None,
            "tool_call_id": last["tool_call_id"] if last else None,
            "content": last["content"] if last else None,
            "results": results,
        }

    # -- the episode --------------------------------------------------------------------

    async def reset_async(self, seed: int | None = None) -> Observation:
        """Start an episode: provision or restore the instance, list tools, return the first observation.

        Args:
            seed: Forwarded to the instance's reset, the first one (right after the instance is
                provisioned) included.

        Returns:
            The ``Observation``: prompt, tools (OpenAI format), ``step`` 0, and as ``content`` a
            screenshot with the turn footer on multimodal tasks (else None).

        An episode still running is abandoned: it is graded first (``done_reason`` ``closed``),
        and uploaded with a trace job, before its instance is restored, as ``close`` does.
        """
        if self.env is not None and self._recorder.started_at is not None and not self.done:
            reward = await self._abandon(self.env)
            log.info("task %s: the abandoned episode was graded %s", self.task.task_key, reward)
        self._reset_episode()
        self._closed = False
        self._recorder.start()
        ttl = self._mode.ttl(self.ttl_seconds)
        if self.env is None:
            self.env = await self._async_fleet().make(
                self.task.env_spec,
                data_key=self.task.data_spec,
                env_variables=self.task.env_variables or None,
                ttl_seconds=ttl,
                **self._mode.make_kwargs(self.make_kwargs),
            )
            if seed is not None:  # a fresh instance holds its seed data; the seed still goes to it
                await self.env.reset(seed)
        else:
            await self.env.reset(seed)
        tools = await self._mode.tools(
            self._async_fleet,
            self.env,
            ttl=ttl,
            call_deadline=self.call_deadline,
            browser_kwargs=self.browser_kwargs,
        )
        if self.context_tools:
            tools = [*tools, *CONTEXT_TOOLS]
        self.tools = tools
        self._tool_specs = [tool.to_openai() for tool in tools]
        observation = self._observation([])
        self._recorder.record_user(self.task.prompt)
        if self.multimodal:
            screenshot = await self._mode.screenshot(self.env, call_deadline=self.call_deadline)
            observation["content"] = self._content(screenshot)
            self._recorder.record_user(observation["content"])
        return observation

    async def step_async(self, action: Any) -> tuple[Observation, float | None, bool, StepInfo]:
        """Run one action: every tool call in it, in order.

        Args:
            action: Any shape of ``fleet_sdk.actions``: the native ``{"tool", "params", "done"}``
                (optional ``tool_call_id`` and ``content``), an OpenAI tool call, an OpenAI
                assistant message with ``tool_calls`` (or a whole chat-completions response), an
                Anthropic ``tool_use`` block or assistant message, or the SDK objects of those.

        Returns:
            ``(observation, reward, done, info)``. The reward is 0.0 until the episode ends, then
            the verifier's reward (``None`` when unknown). ``info`` is a ``StepInfo``: ``step``,
            ``done_reason``, ``tool_error`` (the last), ``tool_errors`` (this step's),
            ``verifier_execution_id`` and ``verifier_error``.

        Raises:
            ActionError: The action has no accepted shape (no step is used; ``field`` says where).
            EpisodeError: The episode already ended or was closed, or ``reset`` was not called.
        """
        if self._closed:
            raise EpisodeError(
                f"the episode of {self.task.task_key!r} was closed (its instance is deleted); "
                "reset() starts a new one"
            )
        if self.env is None:
            raise EpisodeError("call reset() before step()")
        if self.done:
            raise EpisodeError(
                f"the episode of {self.task.task_key!r} is done ({self.done_reason}); call reset()"
            )
        parsed = parse_action(action)  # a malformed action raises here, before a step is used
        self.step_count += 1
        # Calls the model gave no id get one that is unique in the episode and reproducible.
        calls = [
            ToolCall(c.name, c.arguments, c.call_id or f"call_{self.step_count}_{index}", c.error, c.written)
            for index, c in enumerate(parsed.calls)
        ]
        self._recorder.record_calls(parsed, calls)
        results: list[ToolResult] = []
        for call in calls:
            results.append(await self._run_call(call))
        if not self.done and parsed.done:
            self._finish("agent")
        if not self.done and self.step_count >= self.max_steps:
            self._finish("max_steps")
        reward: float | None = 0.0
        if self.done_reason is not None:  # this step ended the episode
            reward = await self._end_episode(self.env)
        errors = [r["error"] for r in results if r["error"] is not None]
        info: StepInfo = {
            "step": self.step_count,
            "done_reason": self.done_reason,
            "tool_error": errors[-1] if errors else None,
            "tool_errors": errors,
            "verifier_execution_id": self.verifier_execution_id,
            "verifier_error": self.verifier_error,
        }
        return self._observation(results), reward, self.done, info

    async def _run_call(self, call: ToolCall) -> ToolResult:
        """Run one call (unless the episode already ended) and record what the model is shown."""
        assert self.env is not None
        offered = {tool.name for tool in self.tools}
        value: Any
        if self.done:  # an earlier call of this action ended the episode
            value = {"error": f"not run: the episode ended ({self.done_reason})"}
        elif call.error is not None:
            value = {"error": call.error}
        elif call.name not in offered:
            value = {"error": f"tool {call.name!r} not found; available: {sorted(offered)}"}
        elif call.name == SUBMIT_FINAL_ANSWER:
            self.final_answer = call.arguments.get("answer")
            value = "Final answer submitted."
            self._finish("submitted")
        elif call.name in CONTEXT_TOOL_NAMES:
            try:
                value = await self.context.acall(call.name, call.arguments)
            except ContextToolError as exc:
                value = {"error": str(exc)}
        else:
            try:
                value = await self._mode.call(
                    self.env, call.name, call.arguments, deadline=self.call_deadline
                )
            except MCPError as exc:
                value = {"error": str(exc)}
        return self._recorder.record_result(call, value, self._content(value))

    def _finish(self, reason: DoneReason) -> None:
        self.done = True
        self.done_reason = reason

    async def _abandon(self, env: AsyncEnv) -> float | None:
        """End a running episode as ``closed`` (``reset`` or ``close`` left it) and grade it."""
        self._finish("closed")
        return await self._end_episode(env)

    async def _end_episode(self, env: AsyncEnv) -> float | None:
        """Grade the episode (once), then upload its trace when a trace job is set."""
        reward = await self._grader.grade(
            self.task,
            self._async_fleet,
            instance=env,
            final_answer=self.final_answer,
            partial=self.partial_reward,
            run_timeout=self.verifier_timeout,
            deadline=self.verifier_deadline,
        )
        if self.trace_job_id is not None:
            await self._recorder.upload(
                self._trace_destination,
                job_id=self.trace_job_id,
                model=self.trace_model,
                task_key=self.task.task_key,
                instance=env,
                reward=reward,
                done_reason=self.done_reason,
                steps=self.step_count,
                verifier_error=self.verifier_error,
                verifier_execution_id=self.verifier_execution_id,
            )
        return reward

    async def close_async(self) -> None:
        """End the episode (running the verifier if it was abandoned) and delete the instance.

        An episode closed after ``reset`` is graded whether or not it took a step (with
        ``final_answer=None`` unless one was submitted), as any abandoned episode is.
        A client this episode created for itself (``fleet=None``) is closed too. ``step`` then
        raises ``EpisodeError`` until ``reset`` starts a new episode.
        """
        self._closed = True
        env, self.env = self.env, None
        browser = self._mode.release_browser()
        try:
            try:
                if browser is not None:
                    await browser.close()  # the lease goes first: the verifier reads only the instance
            finally:
                if env is not None:
                    try:
                        if not self.done:
                            await self._abandon(env)
                    finally:
                        # Runs to its end (bounded) in a cancelled task too: see ``AsyncEnv.close``.
                        await env.close()
        finally:
            if self._fleet_arg is None and self._fleet is not None:
                owned, self._fleet = self._fleet, None
                await run_cleanup(owned.close, what="closing its own client", seconds=CLOSE_DEADLINE)

    # -- sync twins (fleet_sdk._twin: same signatures and docstrings, run on the loop bridge) --

    reset = sync_method(reset_async, target=_itself)
    step = sync_method(step_async, target=_itself)
    close = sync_method(close_async, target=_itself)

    async def __aenter__(self) -> TaskEnv:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close_async()

    def __enter__(self) -> TaskEnv:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
