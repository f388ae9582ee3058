"""Creating an instance through the orchestrator's transient failures.

One instance creation is a POST that carries an ``Idempotency-Key``, the same key
on every attempt, so repeating it can never leave two instances behind. That is
why it is retried on more than the runtime's usual transient statuses: every 5xx
too (a failed health check, a placement blip), besides connection errors, 408,
429 and any error flagged ``"retryable": true`` wherever the body carries the flag.
``is_transient`` in the runtime makes the call and ``fleet_sdk._retry.retry_async`` runs the
attempts; this module only adds the longer, provisioning-sized backoff.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING

from ._retry import retry_async
from ._runtime import Deadline, RequestOptions, RetryPolicy, is_transient, within

if TYPE_CHECKING:
    from fleet_generated.env_instance import models
    from fleet_generated.env_instance.client import AsyncControlPlaneClient

__all__ = ["PROVISIONING_RETRY", "create_instance", "is_transient_provisioning_error"]

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


async def create_instance(
    api: AsyncControlPlaneClient,
    request: models.InstanceRequest,
    *,
    deadline: Deadline,
    policy: RetryPolicy = PROVISIONING_RETRY,
) -> models.InstanceResponse:
    """``POST /v1/env/instances`` until it succeeds, fails for good, or runs out of time.

    Every attempt carries the same idempotency key. Each retry is logged with the
    error (its ``code`` and where the body's ``retryable`` flag was found).

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

    async def attempt() -> models.InstanceResponse:
        # Every retry of a create happens in retry_async, under one policy: the runtime makes one attempt.
        options: RequestOptions = {**(within(deadline) or {}), "max_retries": 0}
        return await api.create_instance(request, idempotency_key=key, options=options)

    return await retry_async(
        attempt,
        what=f"creating {request.env_key}",
        policy=policy,
        deadline=deadline,
        log=log,
        transient=is_transient_provisioning_error,
    )
