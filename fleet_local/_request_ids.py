"""``X-Request-ID`` dedup of instance creation (``create_instance`` in ``schemas/env-instance.yaml``).

Clients send an ``X-Request-ID`` with every call, the same on every attempt of it; the public
SDK's transport sends a create again after a 404, 429 or 5xx. So an id that already created an
instance marks a repeat: it is answered 409 ``duplicate_request_id`` with ``detail`` naming the
instance, and the client fetches that one instead of leaving a second instance behind.

The id is bound to the new instance's id before the instance is made (as the orchestrator binds
it at insert), so a repeat that arrives while the first request is still creating is a 409 too;
a create that fails releases the id. Bindings live in the store, so a repeat is recognised
across restarts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import Header

from ._errors import LocalAPIError
from ._state import iso
from ._store import Store

__all__ = ["REQUEST_ID_KIND", "DuplicateRequestError", "RequestId", "create_once"]

REQUEST_ID_KIND = "create_request_id"

RequestId = Annotated[str | None, Header(alias="X-Request-ID", min_length=1, max_length=255)]
"""The optional ``X-Request-ID`` header of a route."""

T = TypeVar("T")


class DuplicateRequestError(LocalAPIError):
    """409 ``duplicate_request_id``: the request's ``X-Request-ID`` already created an instance.

    Its ``detail`` is an object (``DuplicateRequestDetail``), which the public SDK reads.

    Args:
        request_id: The repeated id.
        instance_id: The instance the first request with it created.
    """

    def __init__(self, request_id: str, instance_id: str) -> None:
        super().__init__(
            409,
            f"X-Request-ID {request_id!r} already created instance {instance_id!r}; get that instance",
            code="duplicate_request_id",
            retryable=False,
        )
        self.instance_id = instance_id

    def body(self) -> dict[str, Any]:
        """The ``ErrorResponse`` body, ``detail`` holding the instance."""
        return {
            **super().body(),
            "detail": {
                "error": "duplicate_request_id",
                "instance_id": self.instance_id,
                "message": self.detail,
            },
        }


def create_once(store: Store, request_id: str | None, instance_id: str, create: Callable[[], T]) -> T:
    """Run ``create`` unless ``request_id`` already created an instance.

    Args:
        store: The server's store (it keeps the bindings).
        request_id: The request's ``X-Request-ID``; None runs ``create`` unconditionally.
        instance_id: The id ``create`` gives the new instance, bound to ``request_id`` first.
        create: Makes the instance.

    Raises:
        DuplicateRequestError: ``request_id`` is bound already.
    """
    if request_id is None:
        return create()
    # One check-and-bind per id at a time (the create itself runs outside the lock).
    with store.locks.hold(REQUEST_ID_KIND, request_id):
        # ``read``: no turn at the store's writer lock (see ``_idempotency.idempotent``).
        bound = store.read(REQUEST_ID_KIND, request_id)
        if bound is not None:
            raise DuplicateRequestError(request_id, str(bound["instance_id"]))
        store.put(REQUEST_ID_KIND, request_id, {"instance_id": instance_id, "created_at": iso()})
    try:
        return create()
    except BaseException:
        store.delete(REQUEST_ID_KIND, request_id)  # nothing was made: the id may be used again
        raise
