"""Plain httpx clients of a local server carrying its key, for tests that speak the wire directly."""

from __future__ import annotations

from typing import Any

import httpx
from _waits import PATIENCE

from fleet_local import LocalFleet

__all__ = ["bearer", "raw_async_client", "raw_client"]


def bearer(server: LocalFleet) -> dict[str, str]:
    """The ``Authorization`` header of ``server``'s key."""
    return {"Authorization": f"Bearer {server.api_key}"}


def raw_client(server: LocalFleet, timeout: float = PATIENCE, **kwargs: Any) -> httpx.Client:
    """A sync client of ``server`` with its key (``kwargs`` go to ``httpx.Client``)."""
    return httpx.Client(base_url=server.base_url, headers=bearer(server), timeout=timeout, **kwargs)


def raw_async_client(server: LocalFleet, timeout: float = PATIENCE, **kwargs: Any) -> httpx.AsyncClient:
    """An async client of ``server`` with its key (``kwargs`` go to ``httpx.AsyncClient``)."""
    return httpx.AsyncClient(base_url=server.base_url, headers=bearer(server), timeout=timeout, **kwargs)
