"""A Fleet-compatible server that runs everything on one machine (the ``server`` extra).

``LocalFleet`` starts it as a child process on a free loopback port and hands out clients
connected to it; ``serve`` (what ``fleet-sdk serve`` runs) runs it in the foreground, on the
address and data dir ``claim_server`` took; ``run_demo`` is ``fleet-sdk demo``. The server stack
(FastAPI, uvicorn, mcp) is only imported by the server process itself, and importing this
package loads nothing until a name is used, so ``fleet-sdk serve`` refuses a busy port or data
dir before any of it loads. This package is one more client of ``fleet_sdk``: it uses the SDK's
public API, its generated models (``fleet_sdk.types``) and ``fleet_sdk.protocol``; the SDK never
imports it, but finds its commands and ``LocalFleet`` through the ``fleet_sdk.server`` entry
point (``_cli.py``; the import-linter contracts in ``pyproject.toml``).
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._chromium import browser_unavailable
    from ._claim import ServerClaim, claim_server
    from ._local_fleet import LocalFleet
    from ._server import API_KEY_ENV, MODEL_API_KEY_ENV, serve
    from ._state import LocalSettings
    from .demo import run_demo

__all__ = [
    "API_KEY_ENV",
    "MODEL_API_KEY_ENV",
    "LocalFleet",
    "LocalSettings",
    "ServerClaim",
    "browser_unavailable",
    "claim_server",
    "run_demo",
    "serve",
]

_HOMES = {
    "API_KEY_ENV": "._server",
    "MODEL_API_KEY_ENV": "._server",
    "LocalFleet": "._local_fleet",
    "serve": "._server",
    "LocalSettings": "._state",
    "ServerClaim": "._claim",
    "claim_server": "._claim",
    "browser_unavailable": "._chromium",
    "run_demo": ".demo",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'fleet_local' has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
