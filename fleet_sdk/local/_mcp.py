"""(placeholder: being written)"""

from __future__ import annotations

from fastapi import FastAPI

from ._state import LocalState


def mount(app: FastAPI, state: LocalState) -> None:
    """Mount the per-instance MCP endpoints."""
