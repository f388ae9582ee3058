"""A Fleet-compatible server that runs everything on one machine (the ``server`` extra).

``LocalFleet`` starts it as a child process on a free loopback port and hands out clients
connected to it; ``serve`` (what ``fleet-sdk serve`` runs) runs it in the foreground;
``run_demo`` is ``fleet-sdk demo``. The server stack (FastAPI, uvicorn, mcp) is only imported by
the server process itself. This package is one more client of ``fleet_sdk``: it uses the SDK's
public API, its generated models (``fleet_sdk.types``) and ``fleet_sdk.protocol``, and the SDK
imports it only where its command line starts a server (``tests/test_import_graph.py``).
"""

from ._chromium import browser_unavailable
from ._server import API_KEY_ENV, LocalFleet, serve
from ._state import LocalSettings
from .demo import run_demo

__all__ = [
    "API_KEY_ENV",
    "LocalFleet",
    "LocalSettings",
    "browser_unavailable",
    "run_demo",
    "serve",
]
