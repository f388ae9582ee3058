"""A Fleet-compatible server that runs everything on one machine.

``LocalFleet`` starts it as a child process on a free loopback port; ``fleet-sdk
serve`` runs it in the foreground. The server stack (FastAPI, uvicorn, mcp) is
only imported by the server process itself.
"""

from ._server import LocalFleet
from ._state import LocalSettings

__all__ = ["LocalFleet", "LocalSettings"]
