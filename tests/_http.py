"""Plain httpx clients of a local server carrying its key, for tests that speak the wire directly."""

from __future__ import annotations

from typing import Any

import httpx
from _waits import PATIENCE
from prometheus_client.parser import text_string_to_metric_families

from fleet_local import LocalFleet

__all__ = ["bearer", "metric_value", "raw_async_client", "raw_client"]


def bearer(server: LocalFleet) -> dict[str, str]:
    """The ``Authorization`` header of ``server``'s key."""
    return {"Authorization": f"Bearer {server.api_key}"}


def raw_client(server: LocalFleet, timeout: float = PATIENCE, **kwargs: Any) -> httpx.Client:
    """A sync client of ``server`` with its key (``kwargs`` go to ``httpx.Client``)."""
    return httpx.Client(base_url=server.base_url, headers=bearer(server), timeout=timeout, **kwargs)


def raw_async_client(server: LocalFleet, timeout: float = PATIENCE, **kwargs: Any) -> httpx.AsyncClient:
    """An async client of ``server`` with its key (``kwargs`` go to ``httpx.AsyncClient``)."""
    return httpx.AsyncClient(base_url=server.base_url, headers=bearer(server), timeout=timeout, **kwargs)


async def metric_value(server: LocalFleet, name: str, **labels: str) -> float:
    """The sum of ``server``'s ``GET /metrics`` samples named ``name`` whose labels include
    ``labels``, read by Prometheus's own parser."""
    async with raw_async_client(server, timeout=30) as http:
        page = await http.get("/metrics")
    page.raise_for_status()
    return sum(
        sample.value
        for family in text_string_to_metric_families(page.text)
        for sample in family.samples
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())
    )
