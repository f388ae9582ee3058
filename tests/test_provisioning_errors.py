"""Which instance-creation failures are worth retrying: by type, status and body, never text."""

from __future__ import annotations

import httpx
import pytest

from fleet_sdk import (
    APIConnectionError,
    EnvNotFoundError,
    InternalServerError,
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
        (status_error(400, {"detail": "bad"}), False),
        (ValueError("not an API error"), False),
    ],
)
def test_transient_provisioning_errors_by_type_and_body(error: Exception, transient: bool) -> None:
    assert is_transient_provisioning_error(error) is transient


def test_permanent_provisioning_error_classes() -> None:
    assert isinstance(status_error(404, {"code": "env_not_found", "detail": ""}), EnvNotFoundError)
    assert isinstance(status_error(404, {"code": "version_not_found", "detail": ""}), VersionNotFoundError)
    assert isinstance(status_error(429, {"detail": ""}), RateLimitError)
    assert isinstance(status_error(502, {"detail": ""}), InternalServerError)
