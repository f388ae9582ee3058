"""The environment of each instance known to be live, so MCP requests skip the store.

Every MCP request names its instance in the path, and both the endpoint and the tool handler
need that instance's environment. Reading it from the store costs a worker-thread hop, a SQLite
read and a pydantic model per lookup, twice per request. An instance's environment never changes
while it lives, and it stops living only in ``_instances.delete_instance``, whose end hook
forgets it here; a hit is also checked against the instance's folder, which ``delete_instance``
removes before its hooks run, so a lookup racing a delete falls back to the store.
"""

from __future__ import annotations

import os
import threading

__all__ = ["LiveInstances"]


class LiveInstances:
    """``env_key`` by instance id, of instances seen live (thread-safe)."""

    def __init__(self) -> None:
        self._env_keys: dict[str, str] = {}
        self._lock = threading.Lock()

    def env_key(self, instance_id: str, folder: str | os.PathLike[str]) -> str | None:
        """The environment of a live instance, or None when not known (ask the store).

        Args:
            instance_id: The instance.
            folder: Its folder (``LocalState.instance_dir``): gone once it is deleted.
        """
        env_key = self._env_keys.get(instance_id)
        if env_key is not None and not os.path.isdir(folder):  # as ``Path.is_dir``, without a Path
            self.forget(instance_id)
            return None
        return env_key

    def remember(self, instance_id: str, env_key: str) -> None:
        """Note an instance the store just showed live.

        Args:
            instance_id: The instance.
            env_key: Its environment.
        """
        with self._lock:
            self._env_keys[instance_id] = env_key

    def forget(self, instance_id: str) -> None:
        """Drop an instance that ended (an instance end hook).

        Args:
            instance_id: The instance.
        """
        with self._lock:
            self._env_keys.pop(instance_id, None)

    def __len__(self) -> int:
        return len(self._env_keys)
