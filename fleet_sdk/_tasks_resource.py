"""``fleet.tasks``: task configs from the API or from files, always as ``fleet_sdk.Task``.

The API answers with its generated ``Task`` model; this resource converts, so everything a
trainer gets (``list``, ``get``, ``load``) goes straight into ``TaskEnv``.
"""

from __future__ import annotations

import builtins
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from ._twin import sync_method
from .tasks import Task, as_task, load_tasks

if TYPE_CHECKING:
    from ._api import AsyncAPIOwner, SyncAPIOwner

__all__ = ["AsyncTasks", "Tasks"]


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

        Args:
            env_key: Only tasks of this environment.
            task_keys: Only these tasks.
            project_key: Only tasks of this project.
            data_key: Only tasks bound to this data snapshot.
            data_version: Only tasks bound to this data snapshot version.
        """
        page = await self._fleet.api.control_plane.list_tasks(
            env_key=env_key,
            task_keys=task_keys,
            project_key=project_key,
            data_id=data_key,
            data_version=data_version,
        )
        return [as_task(task) for task in page.tasks]

    async def get(self, task_key: str) -> Task:
        """One task by key.

        Args:
            task_key: The task's key.

        Raises:
            NotFoundError: No task has this key.
        """
        return as_task(await self._fleet.api.control_plane.get_task(task_key))

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
