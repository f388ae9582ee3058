"""Fleet tasks as an OpenEnv environment (``pip install 'fleet-sdk[openenv]'``).

``FleetTaskEnvironment`` is an ``openenv.core.Environment``: ``reset`` provisions the task's
instance and returns an observation with the prompt and the tools; ``step`` takes an MCP-style
``call_tool`` action (``tool_name``, ``arguments``; ``done`` ends the episode after the call, or
alone), runs it through ``fleet_sdk.TaskEnv`` and returns the tool's result with ``reward`` and
``done``. A ``list_tools`` action returns the tools without using a step. The verifier's reward
arrives on the observation that ends the episode (``None``: the verifier could not grade it).

Serve it with OpenEnv's own server and talk to it with its client::

    app = create_fleet_app(task_config, max_concurrent_envs=8)   # FastAPI app: /ws, /reset, /step...
    async with FleetEnvClient(base_url="http://127.0.0.1:8000") as client:
        result = await client.reset()
        result = await client.step(FleetAction(tool_name="list_orders", arguments={}))

Each WebSocket session of the server gets its own environment, hence its own instance. (The
server's stateless ``POST /reset`` and ``/step`` routes build a fresh environment per request,
so an episode needs the WebSocket client.) ``FleetAction(done=True)`` with no tool ends the
episode and grades it, for tasks that offer no ``submit_final_answer`` tool.

Importing this module loads OpenEnv's client side only: its server (FastAPI, fastmcp, and gradio
for the web interface) loads when ``create_fleet_app`` is called (``_openenv_packages`` says how).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from ._extras import not_installed

try:
    from . import _openenv_packages  # noqa: F401  (first: OpenEnv's client then loads without its server)
except ModuleNotFoundError as exc:
    if exc.name != "openenv":
        raise
    raise not_installed("openenv", extra="openenv", adapter=__name__) from exc

# isort: split
from openenv.core.client_types import StepResult
from openenv.core.env_client import EnvClient
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State

from .._client import Fleet
from ..task_env import TaskEnv
from ._common import build_task_env

if TYPE_CHECKING:
    from fastapi import FastAPI
    from pydantic import BaseModel
    from starlette.types import ASGIApp, Receive, Scope, Send

    from .._client import AsyncFleet
    from ..task_env import Observation as TaskObservation
    from ..tasks import Task

__all__ = [
    "FleetAction",
    "FleetEnvClient",
    "FleetObservation",
    "FleetState",
    "FleetTaskEnvironment",
    "create_fleet_app",
]


class FleetAction(Action):
    """One MCP-style action: call a tool, list the tools, or end the episode.

    ``FleetAction(done=True)`` alone ends the episode without a call (the verifier grades it),
    for tasks that offer no ``submit_final_answer`` tool.

    Attributes:
        type: ``call_tool`` (the default) or ``list_tools`` (no step is used).
        tool_name: The tool to call (None with ``done=True`` ends the episode without a call).
        arguments: The tool's arguments.
        tool_call_id: The model's id for the call (the env makes one when None).
        done: End the episode after this action.
    """

    type: Literal["call_tool", "list_tools"] = "call_tool"
    tool_name: str | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)
    tool_call_id: str | None = None
    done: bool = False


class FleetObservation(Observation):
    """What ``reset`` and ``step`` return (``done`` and ``reward`` are OpenEnv's own fields).

    Attributes:
        task_key: The task.
        prompt: The task prompt.
        tools: The tools offered, in OpenAI format.
        step: Steps used so far.
        max_steps: The step budget.
        tool_name: The last tool this action ran (None after ``reset``).
        tool_call_id: Its call id.
        result: What the model is shown from that call.
        error: The call's error message, or None.
        results: Every call of the action (``fleet_sdk.task_env.ToolResult`` dicts).
        done_reason: Why the episode ended (``agent``, ``submitted``, ``max_steps``, ``closed``).
        verifier_error: Why the verifier could not grade the episode, when it could not.
        verifier_execution_id: The platform's id of the verifier run.
    """

    task_key: str
    prompt: str
    tools: list[dict[str, Any]] = Field(default_factory=list)
    step: int = 0
    max_steps: int = 0
    tool_name: str | None = None
    tool_call_id: str | None = None
    result: Any = None
    error: str | None = None
    results: list[dict[str, Any]] = Field(default_factory=list)
    done_reason: str | None = None
    verifier_error: str | None = None
    verifier_execution_id: str | None = None


class FleetState(State):
    """The episode's state (``episode_id`` and ``step_count`` are OpenEnv's own fields).

    Attributes:
        task_key: The task.
        instance_id: The environment instance, None before ``reset``.
        done: Whether the episode ended.
        done_reason: Why it ended.
        final_reward: The verifier's reward (None: unknown or not graded yet).
        tool_errors: Every tool error of the episode, as ``"tool(): message"``.
    """

    task_key: str
    instance_id: str | None = None
    done: bool = False
    done_reason: str | None = None
    final_reward: float | None = None
    tool_errors: list[str] = Field(default_factory=list)


class FleetTaskEnvironment(Environment[FleetAction, FleetObservation, FleetState]):
    """A Fleet task as an OpenEnv ``Environment``, one instance per environment object.

    Args:
        task_config: The task: a task config mapping (as exported for training), a
            ``fleet_sdk.Task``, or the API's ``Task`` model. ``reset(task_config=...)`` switches
            to another task for the next episode.
        api_key: Key of the client created when ``fleet`` is None (default: ``FLEET_API_KEY``).
        ttl_seconds: Lifetime of each instance.
        max_steps: Steps (tool-calling actions) before the episode ends.
        partial_reward: Grade with the partial reward when the score is 0.0.
        request_timeout_s: Per-attempt HTTP timeout of the created client, in seconds; the
            tool-call deadline (retries included) is ``call_deadline`` in ``task_env_options``.
        fleet: The client to use instead of creating one. A sync ``Fleet`` works from any
            thread or loop (what OpenEnv's server needs); an ``AsyncFleet`` only from the loop
            that created it. With ``fleet``, leave ``api_key`` and ``request_timeout_s`` unset.
        **task_env_options: More ``fleet_sdk.TaskEnv`` arguments (``context_tools``,
            ``trace_job_id``, ``make_kwargs``...).

    The argument names are the ones of the OpenEnv Fleet environment trainers used before
    this SDK; they map onto ``fleet_sdk.TaskEnv`` as ``task_config`` → ``task``,
    ``request_timeout_s`` → the client's ``Timeout(total=...)``, the others unchanged.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(
        self,
        task_config: Task | Mapping[str, Any] | BaseModel,
        *,
        api_key: str | None = None,
        ttl_seconds: int | None = None,
        max_steps: int = 50,
        partial_reward: bool = False,
        request_timeout_s: float | None = None,
        fleet: AsyncFleet | Fleet | None = None,
        **task_env_options: Any,
    ) -> None:
        super().__init__()
        self._settings: dict[str, Any] = {
            "fleet": fleet,
            "api_key": api_key,
            "ttl_seconds": ttl_seconds,
            "max_steps": max_steps,
            "partial_reward": partial_reward,
            "request_timeout_s": request_timeout_s,
            "options": task_env_options,
        }
        self._task_env, self._made = build_task_env(task_config, **self._settings)
        if self._made is not None:  # one client for every task of this environment
            self._settings.update(fleet=self._made, api_key=None, request_timeout_s=None)
        self._episode_id: str | None = None
        self._pending_close: TaskEnv | None = None

    @property
    def task_env(self) -> TaskEnv:
        """The ``fleet_sdk.TaskEnv`` running the current episode."""
        return self._task_env

    def _sync_client(self) -> bool:
        return isinstance(self._settings["fleet"], Fleet)

    # -- conversions ---------------------------------------------------------------------

    def _observation(
        self, obs: TaskObservation, reward: float | None, done: bool, info: Mapping[str, Any] | None = None
    ) -> FleetObservation:
        results = obs["results"]
        last = results[-1] if results else None
        info = info or {}
        return FleetObservation(
            task_key=obs["task_key"],
            prompt=obs["prompt"],
            tools=obs["tools"],
            step=obs["step"],
            max_steps=obs["max_steps"],
            tool_name=obs["tool"],
            tool_call_id=obs["tool_call_id"],
            result=obs["content"],
            error=last["error"] if last else None,
            results=[dict(r) for r in results],
            done=done,
            reward=reward,
            done_reason=info.get("done_reason"),
            verifier_error=info.get("verifier_error"),
            verifier_execution_id=info.get("verifier_execution_id"),
        )

    def _tools_observation(self) -> FleetObservation:
        env = self._task_env
        return FleetObservation(
            task_key=env.task.task_key,
            prompt=env.task.prompt,
            tools=env.tool_specs(),
            step=env.step_count,
            max_steps=env.max_steps,
            done=env.done,
            reward=env.final_reward if env.done else 0.0,
        )

    @staticmethod
    def _native(action: FleetAction) -> dict[str, Any]:
        native: dict[str, Any] = {"done": action.done}
        if action.tool_name is not None:
            native.update(tool=action.tool_name, params=action.arguments)
            if action.tool_call_id:
                native["tool_call_id"] = action.tool_call_id
        return native

    def _switch_task(self, task_config: Any) -> None:
        """Start using another task; the old episode's instance is deleted first."""
        old = self._task_env
        self._task_env, _ = build_task_env(task_config, **self._settings)
        if self._sync_client():
            old.close()
        else:  # an AsyncFleet episode is closed by the async caller (reset_async)
            self._pending_close = old

    # -- OpenEnv API ---------------------------------------------------------------------

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_config: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> FleetObservation:
        """Start an episode (sync; use with a sync ``Fleet`` client, the default).

        Args:
            seed: Forwarded to the instance's reset.
            episode_id: The caller's id for the episode (kept in ``state``).
            task_config: Another task to run from now on (default: the current one).
            **kwargs: Ignored (OpenEnv forwards any reset field).
        """
        if task_config is not None:
            self._switch_task(task_config)
            old, self._pending_close = self._pending_close, None
            if old is not None:  # an AsyncFleet episode, left for the async caller: this is it
                old.close()
        self._episode_id = episode_id
        return self._observation(self._task_env.reset(seed), None, False)

    async def reset_async(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        task_config: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> FleetObservation:
        """Start an episode (async).

        Args:
            seed: Forwarded to the instance's reset.
            episode_id: The caller's id for the episode (kept in ``state``).
            task_config: Another task to run from now on (default: the current one).
            **kwargs: Ignored (OpenEnv forwards any reset field).
        """
        if self._sync_client():  # the sync twins run on the SDK's loop; keep this loop free
            return await asyncio.to_thread(self.reset, seed, episode_id, task_config)
        if task_config is not None:
            self._switch_task(task_config)
            old, self._pending_close = self._pending_close, None
            if old is not None:
                await old.close_async()
        self._episode_id = episode_id
        return self._observation(await self._task_env.reset_async(seed), None, False)

    def step(self, action: FleetAction, timeout_s: float | None = None, **kwargs: Any) -> FleetObservation:
        """Run one action (sync).

        Args:
            action: A ``FleetAction`` (``call_tool`` or ``list_tools``).
            timeout_s: Not used: every tool call has the episode's ``call_deadline``.
            **kwargs: Ignored.

        Raises:
            ActionError: The action names no tool and is not ``done`` (no step is used).
            EpisodeError: The episode ended or ``reset`` was not called.
        """
        if action.type == "list_tools":
            return self._tools_observation()
        obs, reward, done, info = self._task_env.step(self._native(action))
        return self._observation(obs, reward, done, info)

    async def step_async(
        self, action: FleetAction, timeout_s: float | None = None, **kwargs: Any
    ) -> FleetObservation:
        """Run one action (async).

        Args:
            action: A ``FleetAction`` (``call_tool`` or ``list_tools``).
            timeout_s: Not used: every tool call has the episode's ``call_deadline``.
            **kwargs: Ignored.
        """
        if self._sync_client():
            return await asyncio.to_thread(self.step, action)
        if action.type == "list_tools":
            return self._tools_observation()
        obs, reward, done, info = await self._task_env.step_async(self._native(action))
        return self._observation(obs, reward, done, info)

    @property
    def state(self) -> FleetState:
        """The episode's state."""
        env = self._task_env
        return FleetState(
            episode_id=self._episode_id,
            step_count=env.step_count,
            task_key=env.task.task_key,
            instance_id=env.env.instance_id if env.env is not None else None,
            done=env.done,
            done_reason=env.done_reason,
            final_reward=env.final_reward,
            tool_errors=list(env.tool_errors),
        )

    def close(self) -> None:
        """End the episode (grading it if abandoned), delete the instance, close the client made here."""
        try:
            self._task_env.close()
        finally:
            if self._made is not None:
                self._made.close()


class FleetEnvClient(EnvClient[FleetAction, FleetObservation, FleetState]):
    """OpenEnv's WebSocket client for a served ``FleetTaskEnvironment``.

    ``async with FleetEnvClient(base_url=...) as client`` then ``await client.reset()`` and
    ``await client.step(FleetAction(...))``; ``client.sync()`` is OpenEnv's sync wrapper.
    """

    def _step_payload(self, action: FleetAction) -> dict[str, Any]:
        payload: dict[str, Any] = action.model_dump(exclude_none=True)
        return payload

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[FleetObservation]:
        observation = FleetObservation(
            **payload.get("observation", {}), done=payload.get("done", False), reward=payload.get("reward")
        )
        return StepResult(
            observation=observation, reward=payload.get("reward"), done=payload.get("done", False)
        )

    def _parse_state(self, payload: dict[str, Any]) -> FleetState:
        return FleetState(**payload)


class _QuietClientClose:
    """ASGI middleware: a WebSocket client that leaves first is not an error.

    OpenEnv's WebSocket route closes the socket once it has destroyed the session (grading an
    abandoned episode, deleting the instance); a client that already closed its end makes that
    close raise ``WebSocketDisconnect``, which uvicorn logged as a 60-line traceback after every
    episode. The session itself ended normally.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        from starlette.websockets import WebSocketDisconnect

        try:
            await self.app(scope, receive, send)
        except WebSocketDisconnect:
            if scope["type"] != "websocket":
                raise


def create_fleet_app(
    task_config: Task | Mapping[str, Any] | BaseModel,
    *,
    fleet_factory: Callable[[], Fleet] | None = None,
    max_concurrent_envs: int = 1,
    **environment_options: Any,
) -> FastAPI:
    """OpenEnv's FastAPI app serving ``FleetTaskEnvironment`` (run it with uvicorn).

    OpenEnv's server modules are imported here, not with this module.

    Args:
        task_config: The task every session starts with (``reset(task_config=...)`` changes it).
        fleet_factory: Makes the client of each session (default: one from the environment,
            ``FLEET_API_KEY``); each session closes the client it got.
        max_concurrent_envs: WebSocket sessions (hence instances) served at once.
        **environment_options: More ``FleetTaskEnvironment`` arguments (``max_steps``...).
    """

    def factory() -> FleetTaskEnvironment:
        if fleet_factory is None:
            return FleetTaskEnvironment(task_config, **environment_options)
        env = FleetTaskEnvironment(task_config, fleet=fleet_factory(), **environment_options)
        env._made = env._settings["fleet"]  # the session owns the client it was given
        return env

    from openenv.core.env_server.http_server import create_app

    app: FastAPI = create_app(
        factory, FleetAction, FleetObservation, env_name="fleet", max_concurrent_envs=max_concurrent_envs
    )
    app.add_middleware(_QuietClientClose)
    return app
