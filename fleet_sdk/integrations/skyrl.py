"""Fleet tasks as a SkyRL-gym text environment (``pip install 'fleet-sdk[skyrl]'``).

Importing this module registers ``FleetTextEnv`` in ``skyrl_gym``'s registry as ``"fleet"``::

    import fleet_sdk.integrations.skyrl  # registers "fleet"
    env = skyrl_gym.make("fleet", env_config={"max_steps": 20}, extras={"task": task_config})

(``skyrl_gym`` has no plugin discovery, so the import must come first, e.g. in the trainer's
entry point.)

``init`` provisions the task's instance and returns the prompt with the tools and the
tool-call format; ``step`` takes the model's raw text, reads its tool calls
(``fleet_sdk.integrations.text_actions``), runs them through ``fleet_sdk.TaskEnv`` and returns
SkyRL's step output. ``get_metrics`` reports tool errors and the verifier's feedback, so a
trainer can build hints from them without another model call.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._extras import not_installed

try:
    import skyrl_gym
except ModuleNotFoundError as exc:
    if exc.name != "skyrl_gym":
        raise
    raise not_installed("skyrl_gym", extra="skyrl", adapter=__name__) from exc
from skyrl_gym.envs.base_text_env import BaseTextEnv, BaseTextEnvStepOutput, ConversationType

from .._exceptions import ActionError, ConfigurationError
from ..task_env import TaskEnv, ToolResult
from ._common import build_task_env
from .text_actions import TOOL_CALL_FORMAT, parse_text_action

if TYPE_CHECKING:
    from .._client import Fleet

__all__ = ["ENV_ID", "FleetTextEnv", "register"]

ENV_ID = "fleet"

# Seed-era names a training config carries, and their defaults (see ``FleetTextEnv``).
_CONFIG_DEFAULTS: dict[str, Any] = {
    "api_key": None,
    "ttl_seconds": None,
    "max_steps": 50,
    "partial_reward": False,
    "request_timeout_s": None,
    "observation_role": "user",
    "unknown_reward": None,
    "feedback_chars": 2000,
}


def _config(env_config: Any) -> dict[str, Any]:
    """The settings of an ``env_config`` (a mapping, an OmegaConf ``DictConfig`` or None)."""
    if env_config is None:
        return dict(_CONFIG_DEFAULTS)
    if not isinstance(env_config, Mapping) and not hasattr(env_config, "items"):
        raise ConfigurationError(f"env_config must be a mapping, got {type(env_config).__name__}")
    given = {str(k): v for k, v in env_config.items()}
    unknown = sorted(set(given) - set(_CONFIG_DEFAULTS) - {"task_env_options"})
    if unknown:
        raise ConfigurationError(f"env_config: unknown key(s) {unknown}; known: {sorted(_CONFIG_DEFAULTS)}")
    if given.get("observation_role", "user") not in ("user", "tool"):
        raise ConfigurationError(
            f"env_config.observation_role must be 'user' or 'tool', got {given['observation_role']!r}"
        )
    return {**_CONFIG_DEFAULTS, **given}


def _task_of(extras: Mapping[str, Any], fleet: Fleet) -> Any:
    """The task of a dataset row: ``task`` (a config), or ``task_key`` looked up on the platform."""
    for row in (extras, extras.get("extra_info") or {}):
        if row.get("task") is not None:
            return row["task"]
        if row.get("task_key"):
            return fleet.tasks.get(str(row["task_key"]))
    raise ConfigurationError("extras needs 'task' (a task config) or 'task_key' (directly or in extra_info)")


def _render(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


class FleetTextEnv(BaseTextEnv):
    """A Fleet task as a SkyRL-gym ``BaseTextEnv``: raw model text in, tool results out.

    Args:
        env_config: Settings (a mapping or OmegaConf config), with the names of the OpenEnv
            Fleet environment trainers used before this SDK: ``api_key``, ``ttl_seconds``,
            ``max_steps`` (also SkyRL's ``max_turns``), ``partial_reward``,
            ``request_timeout_s`` (per-attempt HTTP timeout of the client made here); plus
            ``observation_role`` (``user``, the default, or ``tool``), ``unknown_reward``
            (the float to return when the verifier could not grade; default None, which
            SkyRL must mask: 0.0 would teach "failed"), ``feedback_chars`` (verifier output
            kept in ``get_metrics``) and ``task_env_options`` (more ``TaskEnv`` arguments).
        extras: The dataset row: ``task`` (the task config, named ``task_config`` in the old
            environment) or ``task_key``, at the top or in ``extra_info``.
        fleet: A sync ``Fleet`` to use (default: one made from ``api_key`` or the
            environment, closed with the env). SkyRL calls ``step`` from its own threads; the
            sync client works from any of them.
    """

    def __init__(
        self,
        env_config: Any = None,
        extras: Mapping[str, Any] | None = None,
        *,
        fleet: Fleet | None = None,
    ) -> None:
        super().__init__()
        config = _config(env_config)
        self._config = config
        self._made: Fleet | None = None
        if fleet is None:
            from .._client import Fleet
            from .._runtime import NOT_GIVEN, Timeout

            timeout = config["request_timeout_s"]
            fleet = self._made = Fleet(
                api_key=config["api_key"],
                timeout=Timeout(total=timeout) if timeout is not None else NOT_GIVEN,
            )
        elif config["api_key"] is not None or config["request_timeout_s"] is not None:
            raise ConfigurationError(
                "api_key and request_timeout_s configure the client made here; not with fleet="
            )
        self.task_env: TaskEnv
        try:
            task = _task_of(extras or {}, fleet)
            self.task_env, _ = build_task_env(
                task,
                fleet=fleet,
                api_key=None,
                ttl_seconds=config["ttl_seconds"],
                max_steps=int(config["max_steps"]),
                partial_reward=bool(config["partial_reward"]),
                request_timeout_s=None,
                options=dict(config.get("task_env_options") or {}),
            )
        except BaseException:
            if self._made is not None:  # nothing will close the client made here
                self._made.close()
            raise
        self.max_turns = self.task_env.max_steps
        self.parse_errors: list[str] = []
        self.tool_calls = 0

    # -- SkyRL API -----------------------------------------------------------------------

    def init(self, prompt: ConversationType) -> tuple[ConversationType, dict[str, Any]]:
        """Provision the instance; return the prompt with the tools and the call format.

        Args:
            prompt: The dataset's prompt messages (empty: the task's prompt is used).
        """
        observation = self.task_env.reset()
        tools = json.dumps(observation["tools"])
        system = {"role": "system", "content": f"You can use these tools:\n{tools}\n\n{TOOL_CALL_FORMAT}"}
        messages = list(prompt) or [{"role": "user", "content": observation["prompt"]}]
        if messages and messages[0].get("role") == "system":
            merged = f"{messages[0]['content']}\n\n{system['content']}"
            messages = [{"role": "system", "content": merged}, *messages[1:]]
        else:
            messages = [system, *messages]
        return messages, {"task_key": observation["task_key"], "tools": observation["tools"]}

    def step(self, action: str) -> BaseTextEnvStepOutput:
        """Run the model's output: its tool calls, or its final answer.

        Args:
            action: The model's raw text.

        Returns:
            ``observations`` (one message per tool result, or a note on an unreadable
            output), ``reward`` (0.0 until the episode ends, then the verifier's), ``done``,
            ``metadata`` (``done_reason``, this step's ``tool_errors``, ``parse_error``,
            ``reward_unknown``).
        """
        self.turns += 1
        env = self.task_env
        parse_error: str | None = None
        try:
            parsed = parse_text_action(
                action, offers_submit=any(t.name == "submit_final_answer" for t in env.tools)
            )
            obs, reward, done, info = env.step(parsed)
        except ActionError as exc:  # the model wrote something unreadable: tell it, use a turn
            self.parse_errors.append(str(exc))
            if self.turns < self.max_turns:
                note = f"Your last message could not be run: {exc}. {TOOL_CALL_FORMAT}"
                return BaseTextEnvStepOutput(
                    observations=[{"role": "user", "content": note}],
                    reward=0.0,
                    done=False,
                    metadata={"parse_error": str(exc), "tool_errors": [], "done_reason": None},
                )
            obs, reward, done, info = env.step({"done": True})  # out of turns: grade what was done
            parse_error = str(exc)
        self.tool_calls += len(obs["results"])
        unknown = done and reward is None
        if unknown:
            reward = self._config["unknown_reward"]
        return BaseTextEnvStepOutput(
            observations=[] if done else [self._message(r) for r in obs["results"]],
            reward=reward,  # None only when unknown and no unknown_reward is set
            done=done,
            metadata={
                "done_reason": info["done_reason"],
                "tool_errors": info["tool_errors"],
                "parse_error": parse_error,
                "reward_unknown": unknown,
                "verifier_error": info["verifier_error"],
            },
        )

    def _message(self, result: ToolResult) -> dict[str, str]:
        text = _render(result["content"])
        if self._config["observation_role"] == "tool":
            return {"role": "tool", "content": text, "tool_call_id": result["tool_call_id"]}
        return {
            "role": "user",
            "content": f'<tool_response name="{result["tool"]}">\n{text}\n</tool_response>',
        }

    def get_metrics(self) -> dict[str, Any]:
        """The episode's metrics: counts SkyRL averages, and feedback a trainer can build hints from.

        Returns:
            ``turns``, ``tool_calls``, ``tool_errors`` and ``parse_errors`` (counts),
            ``reward`` (None: unknown or not ended), ``reward_unknown``, ``done_reason``,
            ``tool_error_messages``, ``parse_error_messages``, ``verifier_error`` and
            ``verifier_feedback`` (the verifier's output, cut to ``feedback_chars``).
        """
        env = self.task_env
        feedback = env.verifier_stdout or ""
        limit = int(self._config["feedback_chars"])
        return {
            "turns": self.turns,
            "tool_calls": self.tool_calls,
            "tool_errors": len(env.tool_errors),
            "parse_errors": len(self.parse_errors),
            "reward": env.final_reward,
            "reward_unknown": env.done and env.final_reward is None,
            "done_reason": env.done_reason,
            "tool_error_messages": list(env.tool_errors),
            "parse_error_messages": list(self.parse_errors),
            "verifier_error": env.verifier_error,
            "verifier_feedback": feedback[-limit:] if limit > 0 else "",
        }

    def close(self) -> None:
        """End the episode (grading it if abandoned), delete the instance, close the client made here."""
        try:
            self.task_env.close()
        finally:
            if self._made is not None:
                self._made.close()


def register() -> None:
    """Register ``FleetTextEnv`` as ``"fleet"`` in ``skyrl_gym``'s registry (done on import; idempotent)."""
    if ENV_ID not in skyrl_gym.registry:
        skyrl_gym.register(id=ENV_ID, entry_point=f"{__name__}:FleetTextEnv")


register()
