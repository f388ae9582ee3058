"""``Idempotency-Key`` for the local server's creating POSTs.

The same key with the same body replays the first answer (so a client may retry
a POST safely); the same key with another body is a 409. Records live in the
store, so a replay works across restarts.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import Header
from pydantic import BaseModel

from ._errors import LocalAPIError
from ._store import Store

__all__ = ["IDEMPOTENCY_KIND", "IdempotencyKey", "body_digest", "conflict", "idempotent"]

IDEMPOTENCY_KIND = "idempotency"

IdempotencyKey = Annotated[str | None, Header(alias="Idempotency-Key", min_length=1, max_length=255)]
"""The optional ``Idempotency-Key`` header of a route."""

ModelT = TypeVar("ModelT", bound=BaseModel)


def body_digest(payload: Any) -> str:
    """SHA-256 of a payload's canonical JSON (keys sorted)."""
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def conflict(key: str) -> LocalAPIError:
    """The 409 for a key reused with a different body."""
    return LocalAPIError(
        409,
        f"Idempotency-Key {key!r} was already used with a different request body",
        code="idempotency_conflict",
        retryable=False,
    )


def idempotent(
    store: Store,
    *,
    scope: str,
    key: str | None,
    payload: Any,
    model: type[ModelT],
    create: Callable[[], ModelT],
) -> ModelT:
    """Run ``create`` once per ``(scope, key)``; replay its response for the same payload.

    Args:
        store: The server's store (it keeps the records).
        scope: The operation, e.g. ``"create_instance"``.
        key: The request's ``Idempotency-Key``; None runs ``create`` unconditionally.
        payload: What identifies the request body (compared by digest).
        model: The response model, to rebuild a replayed answer.
        create: Does the work and returns the response.

    Raises:
        LocalAPIError: 409 when the key was used with a different payload.
    """
    if key is None:
        return create()
    record_id = f"{scope}:{key}"
    digest = body_digest(payload)
    # One request per key at a time: a retry that arrives while the first still runs waits for
    # its answer instead of running ``create`` a second time.
    with store.locks.hold(IDEMPOTENCY_KIND, record_id):
        # ``read``, not ``get``: the lookup needs no turn at the store's one writer lock, which
        # dozens of creates at once queue for; the named lock orders it after any earlier put of
        # this key, which had returned (committed) before that lock was let go.
        record = store.read(IDEMPOTENCY_KIND, record_id)
        if record is not None:
            if record.get("digest") != digest:
                raise conflict(key)
            return model.model_validate(record["response"])
        response = create()
        store.put(
            IDEMPOTENCY_KIND, record_id, {"digest": digest, "response": response.model_dump(mode="json")}
        )
        return response
