"""The local server's typed records: what the store keeps of a thing, as pydantic models.

A record holds the wire model the API answers with (a generated model, validated where it is
made) and, beside it, the server's own fields that never reach the wire. It is stored as one
flat JSON document: the wire model's fields, plus each private field under its name prefixed
with ``_`` (the form documents had before there were records, so older data directories read
the same, and the store's SQL can still read ``$.status``).
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, ConfigDict

from fleet_sdk.types import env_instance as models

__all__ = ["InstancePrivate", "InstanceRecord"]


def _private_name(name: str) -> str:
    return "_" + name


class InstancePrivate(BaseModel):
    """An instance's server-side fields, stored as ``_<name>`` beside its wire fields.

    Attributes:
        window_seconds: Seconds the instance lives after its last heartbeat (or its creation);
            None in a document that predates it (the server's default TTL then applies).
        deadline: The ``time.time()`` at which the reaper ends it; None never.
        last_heartbeat: When it last received a heartbeat (ISO-8601), None before the first.
        image_type: ``image_type`` of the creating request (accepted, not used here).
        created_from: ``created_from`` of the creating request (accepted, not used here).
        reset_seed: The seed of its last reset, if any.
    """

    model_config = ConfigDict(alias_generator=_private_name, populate_by_name=True, extra="ignore")

    window_seconds: int | None = None
    deadline: float | None = None
    last_heartbeat: str | None = None
    image_type: str | None = None
    created_from: str | None = None
    reset_seed: int | None = None


class InstanceRecord:
    """An instance as the store keeps it: its wire model, and the server's fields beside it.

    A pair of pydantic models, each validated where it is made. A record read from the store
    parses its private part only when first asked for it: most reads (every manager route's,
    MCP session's and verifier run's lookup) need the wire part alone, and parsing both made
    such a lookup about a fifth dearer than the ``json.loads`` it replaces.

    Args:
        instance: The wire model.
        private: The server's own fields.

    Attributes:
        instance: What ``GET /v1/env/instances/{id}`` answers (its ``urls`` as last stored; the
            service rebuilds them from the server's current address when it answers).
    """

    __slots__ = ("_private", "_stored", "instance")

    def __init__(self, instance: models.InstanceResponse, private: InstancePrivate) -> None:
        self.instance = instance
        self._private: InstancePrivate | None = private
        self._stored: str | None = None

    @classmethod
    def from_json(cls, text: str) -> Self:
        """The record of a stored document: its wire fields now, its ``_`` fields when asked.

        Each part is validated by pydantic-core as it parses (unknown keys are ignored), which
        costs about what ``json.loads`` of the text does.

        Args:
            text: The stored JSON text.
        """
        record = cls.__new__(cls)
        record.instance = models.InstanceResponse.model_validate_json(text)
        record._private = None
        record._stored = text
        return record

    @property
    def private(self) -> InstancePrivate:
        """The server's own fields; nothing here reaches a response."""
        if self._private is None:
            assert self._stored is not None  # a record is made with one or the other
            self._private, self._stored = InstancePrivate.model_validate_json(self._stored), None
        return self._private

    def to_document(self) -> dict[str, Any]:
        """The flat JSON document to store (wire fields, then the ``_`` fields)."""
        return {
            **self.instance.model_dump(mode="json"),
            **self.private.model_dump(mode="json", by_alias=True),
        }

    def __repr__(self) -> str:
        return f"InstanceRecord(instance={self.instance!r}, private={self.private!r})"
