"""Creating an instance through the orchestrator's transient failures.

One instance creation is a POST that carries an ``Idempotency-Key`` and an ``X-Request-ID``,
the same on every attempt, so repeating it can never leave two instances behind. That is
why it is retried on more than the runtime's usual transient statuses: every 5xx
too (a failed health check, a placement blip), besides connection errors, 408,
429 and any error flagged ``"retryable": true`` wherever the body carries the flag.
``is_transient`` in the runtime makes the call and ``fleet_sdk._retry.call_with_retries`` runs
the attempts; this module only adds the longer, provisioning-sized backoff.

A server that recognises a repeat by its ``X-Request-ID`` rather than by the idempotency key
answers 409 ``duplicate_request_id`` naming the instance the earlier attempt made
(``schemas/env-instance.yaml``): that instance is the result. Should it already be dead, the
create is sent once more as a new request.

A creation that fails or is cancelled after an attempt whose answer never came (cut off,
unreadable, or cancelled in flight) may have made an instance nobody will hold: it is sent once
more with the same keys, which names that instance (or makes one), and what comes back is deleted
(``delete_instance``, which retries every transient failure), in a cancelled task too.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import anyio

from ._exceptions import APIResponseValidationError, APIStatusError, ConflictError, NotFoundError
from ._retry import call_with_retries
from ._runtime import Deadline, RequestOptions, RetryPolicy, is_transient, within
from ._runtime._cleanup import CLEANUP_DEADLINE, run_cleanup

if TYPE_CHECKING:
    from fleet_generated.env_instance import models
    from fleet_generated.env_instance.client import AsyncControlPlaneClient

__all__ = [
    "PROVISIONING_RETRY",
    "create_instance",
    "delete_instance",
    "duplicate_instance_id",
    "is_transient_provisioning_error",
]

log = logging.getLogger("fleet_sdk.fleet")

PROVISIONING_RETRY = RetryPolicy(max_retries=5, backoff_base=2.0, backoff_max=30.0)
"""The default backoff between creation attempts: instances take seconds to place."""


def is_transient_provisioning_error(exc: BaseException) -> bool:
    """Whether creating an instance may succeed if tried again.

    Decided by the runtime's one classifier (``fleet_sdk._runtime.is_transient``) with
    every 5xx counted as transient, since a create that carries an idempotency key
    cannot duplicate an instance.

    Args:
        exc: The error from ``create_instance``.
    """
    return is_transient(exc, server_errors=True)


DUPLICATE_REQUEST = "duplicate_request_id"
_DEAD = frozenset({"error", "stopped", "terminated"})


def duplicate_instance_id(exc: BaseException) -> str | None:
    """The instance a 409 ``duplicate_request_id`` names (an earlier attempt made it), or None.

    Args:
        exc: The error from ``create_instance``.
    """
    if not isinstance(exc, ConflictError) or exc.code != DUPLICATE_REQUEST:
        return None
    detail = exc.body.get("detail") if isinstance(exc.body, dict) else None
    instance_id = detail.get("instance_id") if isinstance(detail, dict) else None
    return instance_id if isinstance(instance_id, str) and instance_id else None


async def _recover(
    api: AsyncControlPlaneClient, instance_id: str, deadline: Deadline
) -> models.InstanceResponse:
    """The instance an earlier attempt made (the caller waits for it to run)."""
    delay = 0.5
    while True:
        try:
            return await api.get_instance(instance_id, options=within(deadline))
        except NotFoundError:
            # The id is bound before the instance is stored: the first request may still be on it.
            if not deadline.allows(delay):
                raise
            await anyio.sleep(delay)
            delay = min(delay * 2, 5.0)


async def create_instance(
    api: AsyncControlPlaneClient,
    request: models.InstanceRequest,
    *,
    deadline: Deadline,
    policy: RetryPolicy = PROVISIONING_RETRY,
) -> models.InstanceResponse:
    """``POST /v1/env/instances`` until it succeeds, fails for good, or runs out of time.

    Every attempt carries the same idempotency key and ``X-Request-ID``. Each retry is logged
    with the error (its ``code`` and where the body's ``retryable`` flag was found). A 409
    ``duplicate_request_id`` returns the instance it names (see the module docstring).

    Args:
        api: The control-plane client.
        request: The instance to create.
        deadline: Overall deadline for every attempt and wait.
        policy: Attempts and backoff between them (the server's ``Retry-After`` wins).

    Raises:
        FleetError: The last error, once it is permanent, retries are used up, or the
            next wait would pass the deadline.
    """
    key = str(uuid.uuid4())
    request_id = str(uuid.uuid4())

    async def send(limit: Deadline) -> models.InstanceResponse:
        # Every retry of a create happens in call_with_retries, under one policy: the runtime makes
        # one attempt.
        options: RequestOptions = {**(within(limit) or {}), "max_retries": 0}
        return await api.create_instance(
            request, idempotency_key=key, x_request_id=request_id, options=options
        )

    async def attempt(limit: Deadline) -> models.InstanceResponse:
        nonlocal request_id
        try:
            return await send(limit)
        except ConflictError as exc:
            original = duplicate_instance_id(exc)
            if original is None:
                raise
        instance = await _recover(api, original, limit)
        if instance.status not in _DEAD:
            log.warning(
                "creating %s: an earlier attempt made instance %s; using it", request.env_key, original
            )
            return instance
        log.warning(
            "creating %s: the instance an earlier attempt made (%s) is %s; creating another",
            request.env_key,
            original,
            instance.status,
        )
        request_id = str(uuid.uuid4())
        return await send(limit)

    maybe_made = False  # an attempt may have created an instance whose answer never came

    async def tracked() -> models.InstanceResponse:
        nonlocal maybe_made
        try:
            return await attempt(deadline)
        except APIStatusError:
            raise  # the server answered with an error: nothing was made by this attempt
        except BaseException:
            maybe_made = True  # lost on the way back, cut off, unreadable, or cancelled
            raise

    try:
        return await call_with_retries(
            tracked,
            what=f"creating {request.env_key}",
            policy=policy,
            deadline=deadline,
            log=log,
            transient=is_transient_provisioning_error,
        )
    except BaseException:
        if maybe_made:
            reclaim = Deadline(CLEANUP_DEADLINE)
            await run_cleanup(
                lambda: _reclaim(api, lambda: attempt(reclaim), reclaim),
                what=f"reclaiming a {request.env_key} instance",
            )
        raise


async def _reclaim(
    api: AsyncControlPlaneClient,
    attempt: Callable[[], Awaitable[models.InstanceResponse]],
    deadline: Deadline,
) -> None:
    """Find the instance a failed creation may have made and delete it.

    Sending the create once more with the same ``Idempotency-Key`` and ``X-Request-ID`` names the
    instance an earlier attempt made (its replay, or a 409 ``duplicate_request_id``); when none
    was made it makes one, deleted at once all the same. Failures are logged, never raised: the
    caller is already raising the creation's own error.
    """
    try:
        instance = await attempt()
        await delete_instance(api, instance.instance_id, deadline=deadline)
        log.warning("a failed creation had made instance %s; deleted it", instance.instance_id)
    except Exception as exc:
        log.warning("could not reclaim the instance of a failed creation: %s", type(exc).__name__)


_DELETE_RETRY = RetryPolicy(max_retries=4, backoff_base=0.5, backoff_max=4.0)


async def delete_instance(api: AsyncControlPlaneClient, instance_id: str, *, deadline: Deadline) -> None:
    """Delete an instance until it is gone, or the deadline or the retries run out.

    A delete is safe to repeat, so every transient failure is retried, every 5xx included (as a
    create's are); an instance already gone (404) is deleted; a 2xx answer whose body cannot be
    read still says the instance was deleted.

    Args:
        api: The control-plane client.
        instance_id: The instance.
        deadline: Overall deadline for every attempt.

    Raises:
        FleetError: The last error once it is permanent or time or retries ran out.
    """

    async def attempt() -> None:
        options: RequestOptions = {**(within(deadline) or {}), "max_retries": 0}
        try:
            await api.delete_instance(instance_id, options=options)
        except NotFoundError:
            pass
        except APIResponseValidationError as exc:
            if not 200 <= exc.status_code < 300:
                raise

    await call_with_retries(
        attempt,
        what=f"deleting instance {instance_id}",
        policy=_DELETE_RETRY,
        deadline=deadline,
        log=log,
        transient=is_transient_provisioning_error,
    )
