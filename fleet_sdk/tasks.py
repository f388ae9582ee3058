"""Task configs (docs/wire.md#episodes) and task files.

A task file is ``{"tasks": [...]}`` or a bare list. Field aliases of the
platform's exports are accepted on input (``key``, ``env_id``, ``version``,
``data_id``, ``verifier_func``); the canonical names are what the model holds.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from ._exceptions import TaskConfigError
from .protocol import normalize_version

__all__ = ["Task", "TaskModality", "as_task", "load_tasks", "parse_tasks"]

TaskModality = Literal["tool_use", "computer_use", "browser_use"]


class Task(BaseModel):
    """One task: a prompt, the environment it runs in, and the verifier that grades it.

    What ``fleet.tasks`` (``list``, ``get``, ``load``) returns and ``TaskEnv`` runs. The API's own
    models (``TaskResponse`` from ``fleet.api.control_plane.list_tasks``) convert with
    ``Task.model_validate(response)``; ``TaskEnv`` takes either.

    Attributes:
        task_key: Unique key (alias ``key``, also readable as ``task.key``).
        prompt: What the agent is asked to do.
        env_key: Environment key (alias ``env_id``).
        env_version: Environment version (alias ``version``); ``1.2.3`` becomes ``v1.2.3``.
        data_key: Data snapshot key (alias ``data_id``).
        data_version: Data snapshot version.
        env_variables: Variables for the instance (``CURRENT_DATE``, ``LOGGED_IN_USER``...).
        verifier_code: Python source defining ``verify`` (alias ``verifier_func``).
        task_modality: ``tool_use`` (default), ``computer_use`` or ``browser_use``.
        metadata: Anything else (reference solutions, tags...).
    """

    # defer_build: the schema is built on first use, not when the SDK is imported.
    model_config = ConfigDict(populate_by_name=True, extra="ignore", frozen=True, defer_build=True)

    task_key: str = Field(validation_alias=AliasChoices("task_key", "key"), min_length=1)
    prompt: str
    env_key: str = Field(validation_alias=AliasChoices("env_key", "env_id"), min_length=1)
    env_version: str | None = Field(default=None, validation_alias=AliasChoices("env_version", "version"))
    data_key: str | None = Field(default=None, validation_alias=AliasChoices("data_key", "data_id"))
    data_version: str | None = None
    env_variables: dict[str, Any] = Field(default_factory=dict)
    verifier_code: str | None = Field(
        default=None, validation_alias=AliasChoices("verifier_code", "verifier_func")
    )
    task_modality: TaskModality = "tool_use"
    metadata: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _from_other_model(cls, data: Any) -> Any:
        # The API's generated ``Task`` (and any other pydantic model) is read through its fields,
        # so ``TaskEnv(fleet.api.control_plane.list_tasks().tasks[0])`` works.
        if isinstance(data, BaseModel) and not isinstance(data, Task):
            return data.model_dump(exclude_none=True)
        return data

    @field_validator("env_variables", "metadata", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        # The wire format allows null for both; the model holds an empty dict instead.
        return {} if value is None else value

    @property
    def key(self) -> str:
        """``task_key``, under the name task files and the platform's exports give it."""
        return self.task_key

    @property
    def env_spec(self) -> str:
        """``"key:version"`` (or just the key) for ``Fleet.make``."""
        version = normalize_version(self.env_version)
        return f"{self.env_key}:{version}" if version else self.env_key

    @property
    def data_spec(self) -> str | None:
        """``"key:version"`` of the data snapshot, or None."""
        if not self.data_key:
            return None
        version = normalize_version(self.data_version)
        return f"{self.data_key}:{version}" if version else self.data_key


def _describe_error(error: ValidationError) -> str:
    parts = []
    for issue in error.errors()[:5]:
        field = ".".join(str(p) for p in issue["loc"]) or "<task>"
        parts.append(f"field {field!r}: {issue['msg']}")
    return "; ".join(parts)


def parse_tasks(data: Any, *, source: str = "<tasks>") -> list[Task]:
    """Validate task configs, naming the task index and field of the first bad one.

    Args:
        data: ``{"tasks": [...]}`` or a list of task dicts.
        source: Where the data came from, for error messages.
    """
    items: Any = data.get("tasks") if isinstance(data, Mapping) else data
    if isinstance(data, Mapping) and "tasks" not in data:
        raise TaskConfigError(
            f'{source}: expected {{"tasks": [...]}} or a list, got keys {sorted(data)[:10]}'
        )
    if not isinstance(items, list):
        raise TaskConfigError(f"{source}: 'tasks' must be a list, got {type(items).__name__}")
    tasks: list[Task] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(items):
        if not isinstance(item, Mapping):
            raise TaskConfigError(f"{source}: task {index} must be an object, got {type(item).__name__}")
        try:
            task = Task.model_validate(item)
        except ValidationError as exc:
            key = item.get("task_key") or item.get("key")
            label = f"task {index}" + (f" ({key!r})" if key else "")
            raise TaskConfigError(f"{source}: {label}: {_describe_error(exc)}") from None
        if task.task_key in seen:
            raise TaskConfigError(
                f"{source}: task {index}: duplicate task_key {task.task_key!r} "
                f"(also task {seen[task.task_key]})"
            )
        seen[task.task_key] = index
        tasks.append(task)
    return tasks


def load_tasks(path: str | Path) -> list[Task]:
    """Read a task file (JSON: ``{"tasks": [...]}`` or a bare list).

    Args:
        path: The file.

    Raises:
        TaskConfigError: The file is missing, not JSON, or a task is invalid (the message names
            the task index and field).
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise TaskConfigError(f"{file}: cannot read task file: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TaskConfigError(
            f"{file}: not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    return parse_tasks(data, source=str(file))


def tasks_from(items: Iterable[Task | Mapping[str, Any]]) -> list[Task]:
    """Accept Task objects or dicts alike.

    Args:
        items: Tasks or task dicts.
    """
    return [as_task(item) for item in items]


def as_task(value: Task | Mapping[str, Any] | BaseModel) -> Task:
    """A ``Task`` from a ``Task``, a task config mapping or the API's generated ``Task`` model.

    Args:
        value: The task.

    Raises:
        TaskConfigError: The value is not a valid task (the message names the field).
    """
    if isinstance(value, Task):
        return value
    try:
        return Task.model_validate(value)
    except ValidationError as exc:
        key = value.get("task_key") or value.get("key") if isinstance(value, Mapping) else None
        label = f"task {key!r}" if key else "task"
        raise TaskConfigError(f"{label}: {_describe_error(exc)}") from None
