"""What the server holds for clients right now, for tests that check nothing was left behind.

Served as ``GET /_admin/state`` beside the fault admin API (only with fault injection on, with
the server's key): the live instances, browser leases and MCP sessions, each with its ids.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import _instances
from ._lease_book import LEASE_KIND, LIVE_STATUSES
from ._mcp import endpoint_sessions
from ._records import LeaseRecord
from ._store import Records

if TYPE_CHECKING:
    from ._state import LocalState

__all__ = ["live_objects"]


def _sessions(manager: Any) -> list[str]:
    # The MCP session manager keeps its open sessions in a private dict (mcp 1.x and 2.x alike);
    # a version without it shows none rather than failing the route.
    # The instance endpoint's own sessions (``_mcp.endpoint_sessions``) count as open too.
    return sorted([*(getattr(manager, "_server_instances", {}) or {}), *endpoint_sessions(manager)])


def live_objects(state: LocalState) -> dict[str, list[str]]:
    """The ids of the live instances (pending or running), live leases and open MCP sessions.

    Args:
        state: The server's state.
    """
    instances = [
        record.instance.instance_id
        for record in _instances.instance_records(state).list(exclude_status="terminated")
        if record.instance.status in ("pending", "running")
    ]
    leases = [
        record.lease.lease_id
        for record in Records(state.store, LEASE_KIND, LeaseRecord).list()
        if record.lease.status in LIVE_STATUSES
    ]
    return {
        "instances": sorted(instances),
        "leases": sorted(leases),
        "mcp_sessions": _sessions(state.mcp_sessions) + _sessions(state.lease_mcp_sessions),
    }
