"""A Fleet-compatible server that runs everything on one machine.

``LocalFleet`` starts it as a child process on a free loopback port; ``serve`` (what
``fleet-sdk serve`` runs) runs it in the foreground. The server stack (FastAPI, uvicorn, mcp) is
only imported by the server process itself. These names are the server's public entry points:
the demo, the CLI and the client-side evaluation runner (which plays the bundled policies) use
nothing else from this package.
"""

from ._chromium import browser_unavailable
from ._policies import (
    ChatCompletionsPolicy,
    PolicyContext,
    RandomPolicy,
    ScriptedPolicy,
    random_value,
)
from ._server import API_KEY_ENV, LocalFleet, serve
from ._state import LocalSettings

__all__ = [
    "API_KEY_ENV",
    "ChatCompletionsPolicy",
    "LocalFleet",
    "LocalSettings",
    "PolicyContext",
    "RandomPolicy",
    "ScriptedPolicy",
    "browser_unavailable",
    "random_value",
    "serve",
]
