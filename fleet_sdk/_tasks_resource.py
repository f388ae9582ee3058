"""``fleet.tasks``: task configs from the API or from files, always as ``fleet_sdk.Task``.

The API answers with its generated ``Task`` model; this resource converts, so everything a
trainer gets (``list``, ``get``, ``load``) goes straight into ``TaskEnv``.
"""

from __future__ import annotations

import builtins
import difflib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import anyio

from ._exceptions import APIStatusError, NotFoundError
from ._twin import sync_method
from .tasks import Task, as_task, load_tasks

if TYPE_CHECKING:
    from ._api import AsyncAPIOwner, SyncAPIOwner

__all__ = ["AsyncTasks", "Tasks"]

_E = TypeVar("_E", bound=APIStatusError)


def _did_you_mean(word: str, known: Iterable[str]) -> str:
    found = difflib.get_close_matches(word, list(known), n=1)
    return f"; did you mean {found[0]!r}?" if found else ""


def _with_hint(exc: _E, hint: str) -> _E:
    """``exc`` again (same class, status, body and request), its message ending with ``hint``."""
    return type(exc)(
        exc.message + hint,
        method=exc.method,
        url=exc.url,
        request_id=exc.request_id,
        response=exc.response,
        body=exc.body,
    )


class AsyncTasks:
    """Task configs (async).

    Args:
        fleet: The client.
    """

    def __init__(self, fleet: AsyncAPIOwner) -> None:
        self._fleet = fleet

    async def list(
        self,
        *,
        env_key: str | None = None,
        task_keys: builtins.list[str] | None = None,
        project_key: str | None = None,
        data_key: str | None = None,
        data_version: str | None = None,
    ) -> builtins.list[Task]:
        """Tasks visible to the key; filters combine with AND.

        An empty answer for an ``env_key`` no environment has is a misspelling, not "no tasks":
        that raises, naming the closest key.

        Args:
            env_key: Only tasks of this environment.
            task_keys: Only these tasks.
            project_key: Only tasks of this project.
            data_key: Only tasks bound to this data snapshot.
            data_version: Only tasks bound to this data snapshot version.

        Raises:
            EnvNotFoundError: No environment has ``env_key`` (the message suggests the closest).
        """
        api = self._fleet.api.control_plane
        page = await api.list_tasks(
            env_key=env_key,
            task_keys=task_keys,
            project_key=project_key,
            data_id=data_key,
            data_version=data_version,
        )
        if not page.tasks and env_key is not None:
            # One more request, only when nothing matched: is the environment itself unknown?
            try:
                await api.get_env(env_key)
            except NotFoundError as exc:
                known = [env.env_key for env in await api.list_envs()]
                raise _with_hint(exc, _did_you_mean(env_key, known)) from None
        return [as_task(task) for task in page.tasks]

    async def get(self, task_key: str) -> Task:
        """One task by key.

        Args:
            task_key: The task's key.

        Raises:
            NotFoundError: No task has this key (the message suggests the closest one).
        """
        api = self._fleet.api.control_plane
        try:
            return as_task(await api.get_task(task_key))
        except NotFoundError as exc:
            known = [task.task_key for task in (await api.list_tasks()).tasks]
            raise _with_hint(exc, _did_you_mean(task_key, known)) from None

    async def load(self, path: str | Path) -> builtins.list[Task]:
        """Tasks from a JSON task file (``{"tasks": [...]}`` or a bare list), read off the loop.

        Args:
            path: The file.

        Raises:
            TaskConfigError: The file is missing, not JSON, or a task is invalid.
        """
        return await anyio.to_thread.run_sync(load_tasks, path)


class Tasks:
    """Task configs (sync twin of ``AsyncTasks``; every method runs the async one).

    Args:
        fleet: The sync client; the work runs on its ``async_fleet``.
    """

    def __init__(self, fleet: SyncAPIOwner) -> None:
        self._fleet = fleet

    @property
    def _inner(self) -> AsyncTasks:
        return AsyncTasks(self._fleet.async_fleet)

    list = sync_method(AsyncTasks.list)
    get = sync_method(AsyncTasks.get)
    load = sync_method(AsyncTasks.load)
