"""The local server, found through an entry point: the SDK never imports it by name.

A server package registers one object in the ``fleet_sdk.server`` entry-point group (the
``fleet_local`` package of this distribution does, in ``pyproject.toml``). It brings
``add_commands(subcommands)`` (``fleet-sdk serve`` and ``demo``), ``LocalFleet`` (the server as
a child process, which ``fleet-sdk eval`` starts when it has no ``--remote``) and
``bundled_environments()``. ``from fleet_sdk._server_plugin import LocalFleet`` loads the server
on that first use only, so ``import fleet_sdk.cli`` stays light.
"""

from __future__ import annotations

import functools
from importlib.metadata import entry_points
from typing import Any

__all__ = ["ENTRY_POINT_GROUP", "server"]

ENTRY_POINT_GROUP = "fleet_sdk.server"


@functools.cache
def server() -> Any | None:
    """The installed server's entry-point object, or None when no server is installed."""
    for entry_point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        return entry_point.load()
    return None


def __getattr__(name: str) -> Any:
    if name in ("LocalFleet", "bundled_environments"):
        found = server()
        if found is None:
            from ._exceptions import ConfigurationError

            raise ConfigurationError(
                "no local server is installed (the fleet_sdk.server entry point): "
                "pip install 'fleet-sdk[server]'"
            )
        return getattr(found, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
