"""Which instance-creation failures are worth retrying: by type, status and body, never text."""

from __future__ import annotations

import httpx
import pytest

from fleet_sdk import (
    APIConnectionError,
    AsyncFleet,
    BadRequestError,
    EnvNotFoundError,
    InternalServerError,
    NotFoundError,
    RetryPolicy,
    VersionNotFoundError,
)
from fleet_sdk._client import is_transient_provisioning_error
from fleet_sdk._exceptions import RateLimitError, status_error_class


def status_error(code: int, body: object) -> Exception:
    request = httpx.Request("POST", "https://orchestrator.fleetai.com/v1/env/instances")
    response = httpx.Response(code, json=body, request=request)
    cls = status_error_class(code, body)
    return cls("x", method="POST", url=str(request.url), request_id="r", response=response, body=body)


@pytest.mark.parametrize(
    ("error", "transient"),
    [
        (APIConnectionError("refused", method="POST", url="u", request_id="r"), True),
        (status_error(503, {"detail": "health check failed"}), True),
        (status_error(429, {"detail": "too many in-flight"}), True),
        (status_error(500, {"detail": "x", "code": "provisioning_failed", "retryable": True}), True),
        (status_error(500, {"detail": "x", "code": "provisioning_failed", "retryable": False}), False),
        (status_error(503, {"detail": "x", "retryable": False}), False),
        (status_error(404, {"detail": "env_key not found", "code": "env_not_found"}), False),
        (status_error(404, {"detail": "no such version", "code": "version_not_found"}), False),
        (status_error(400, {"detail": "Environment 'x' not found", "code": "env_not_found"}), False),
        (status_error(400, {"detail": "Region mars-1 not supported", "code": "region_not_supported"}), False),
        (status_error(400, {"detail": "bad"}), False),
        (ValueError("not an API error"), False),
    ],
)
def test_transient_provisioning_errors_by_type_and_body(error: Exception, transient: bool) -> None:
    assert is_transient_provisioning_error(error) is transient


def test_permanent_provisioning_error_classes() -> None:
    assert isinstance(status_error(404, {"code": "env_not_found", "detail": ""}), EnvNotFoundError)
    assert isinstance(status_error(404, {"code": "version_not_found", "detail": ""}), VersionNotFoundError)
    # The orchestrator answers an unknown env or version in a create 400: the same classes, by code.
    for code, cls in (("env_not_found", EnvNotFoundError), ("version_not_found", VersionNotFoundError)):
        error = status_error(400, {"code": code, "detail": "Environment 'x' not found"})
        assert (
            isinstance(error, cls) and isinstance(error, NotFoundError) and isinstance(error, BadRequestError)
        )
    assert isinstance(status_error(429, {"detail": ""}), RateLimitError)
    assert isinstance(status_error(502, {"detail": ""}), InternalServerError)


def instance_json(instance_id: str, status: str) -> dict[str, object]:
    now = "2025-01-01T00:00:00Z"
    root = f"https://{instance_id}.fleetai.com/"
    manager = {
        name: f"{root}api/v1/env/{name}"
        for name in ("docs", "reset", "diff", "snapshot", "execute_verifier_function")
    }
    manager["execute_verifier_function_with_upload"] = manager["execute_verifier_function"]
    return {
        "urls": {"root": root, "app": [root], "manager": {**manager, "api": f"{root}api/v1/env"}},
        "instance_id": instance_id,
        "env_key": "orderdesk",
        "version": "v1.0.0",
        "status": status,
        "subdomain": instance_id,
        "created_at": now,
        "updated_at": now,
        "team_id": "t",
        "region": "us-west-1",
    }


def duplicate(instance_id: str) -> httpx.Response:
    """The orchestrator's answer to a create whose X-Request-ID already made an instance."""
    detail = {"error": "duplicate_request_id", "instance_id": instance_id, "message": "duplicate request"}
    return httpx.Response(409, json={"detail": detail})


@pytest.mark.parametrize("first_status", ["running", "error"])
async def test_a_create_repeated_by_request_id_gets_the_instance_it_made(first_status: str) -> None:
    """A server that recognises a repeated create by its ``X-Request-ID`` (not the idempotency key)
    answers 409 ``duplicate_request_id``: ``make`` returns the instance the lost attempt made, or,
    when that one is dead, creates another as a new request."""
    creates: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            instance_id = request.url.path.rsplit("/", 1)[-1]
            return httpx.Response(200, json=instance_json(instance_id, first_status))
        creates.append(request)
        if len(creates) == 1:
            return httpx.Response(503, json={"detail": "upstream timed out"})  # made it, lost the answer
        if len(creates) == 2:
            return duplicate("inst_first")
        return httpx.Response(200, json=instance_json("inst_second", "running"))

    pool = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    fleet = AsyncFleet("sk-test-000000", http_client=pool)
    fast = RetryPolicy(max_retries=3, backoff_base=0.001, backoff_max=0.002)
    env = await fleet.make("orderdesk", keep_alive=False, retry=fast)
    ids = {r.headers["X-Request-ID"] for r in creates[:2]}
    keys = {r.headers["Idempotency-Key"] for r in creates}
    assert len(ids) == 1 and len(keys) == 1  # one call to the server: same id and key on each attempt
    if first_status == "running":
        assert env.instance_id == "inst_first" and len(creates) == 2
    else:
        assert env.instance_id == "inst_second" and len(creates) == 3
        assert creates[2].headers["X-Request-ID"] not in ids  # a new request this time
    await pool.aclose()
