"""The local server's bearer-key check, shared by the API routes and the fault admin API."""

from __future__ import annotations

import secrets

from ._errors import LocalAPIError

__all__ = ["X_API_KEY_REFUSAL", "auth_refusal"]

# The platform's own answer to an X-API-Key header (seed): Bearer is the only scheme.
X_API_KEY_REFUSAL = "Authentication required. Provide either API key or JWT token with team ID"


def auth_refusal(authorization: str, api_key: str | None) -> LocalAPIError | None:
    """The 401 for a request's ``Authorization`` header, or None when it may pass.

    Args:
        authorization: The header's value ("" when absent).
        api_key: The server's key; None accepts any bearer key.
    """
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return LocalAPIError(401, X_API_KEY_REFUSAL, code="unauthorized", retryable=False)
    if api_key is not None and not secrets.compare_digest(token.encode(), api_key.encode()):
        return LocalAPIError(401, "invalid API key", code="unauthorized", retryable=False)
    return None
