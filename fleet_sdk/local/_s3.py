"""(placeholder: being written)"""

from __future__ import annotations

from fastapi import APIRouter

from ._state import LocalState


def router(state: LocalState) -> APIRouter:
    """Routes of this surface."""
    return APIRouter()
