"""The local server's bearer-key check, shared by the API routes and the fault admin API."""

from __future__ import annotations

import secrets

from ._errors import LocalAPIError

__all__ = ["BEARER_HINT", "X_API_KEY_REFUSAL", "auth_refusal"]

# The platform's own answer to an X-API-Key header (docs/wire.md#hosts): Bearer is the only scheme.
X_API_KEY_REFUSAL = "Authentication required. Provide either API key or JWT token with team ID"
# What every other 401 says: what to send and where the key comes from.
BEARER_HINT = (
    "send `Authorization: Bearer <key>` with this server's key: the --api-key or "
    "FLEET_LOCAL_API_KEY it was started with, or the key `fleet-sdk serve` printed at startup"
)


def auth_refusal(authorization: str, api_key: str | None, *, x_api_key: bool = False) -> LocalAPIError | None:
    """The 401 for a request's ``Authorization`` header, or None when it may pass.

    Args:
        authorization: The header's value ("" when absent).
        api_key: The server's key; None accepts any bearer key (``--allow-any-key``).
        x_api_key: The request sent an ``X-API-Key`` header (answered as the platform does).
    """
    scheme, _, token = authorization.partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        detail = X_API_KEY_REFUSAL if x_api_key else f"missing API key: {BEARER_HINT}"
        return LocalAPIError(401, detail, code="unauthorized", retryable=False)
    # Constant time: the comparison must not reveal how much of a guess was right.
    if api_key is not None and not secrets.compare_digest(token.encode(), api_key.encode()):
        return LocalAPIError(401, f"invalid API key: {BEARER_HINT}", code="unauthorized", retryable=False)
    return None
