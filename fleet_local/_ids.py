"""Ids and timestamps of the local server's records."""

from __future__ import annotations

import datetime as dt
import secrets

__all__ = ["iso", "new_id", "utcnow"]


def utcnow() -> dt.datetime:
    """Aware UTC now."""
    return dt.datetime.now(dt.UTC)


def iso(moment: dt.datetime | None = None) -> str:
    """ISO-8601 timestamp (now by default); a moment without a zone is taken as UTC."""
    moment = moment or utcnow()
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.isoformat()


def new_id(prefix: str) -> str:
    """A short random id with a readable prefix, e.g. ``inst_3f9a...``."""
    return f"{prefix}_{secrets.token_hex(8)}"
