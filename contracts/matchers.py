"""How a live request is matched against a recorded one, and which host expects which auth.

The replay suite matches on ``method, scheme, host, port, path, query`` (vcrpy's own matchers)
plus the two defined here:

* ``json_body``: JSON bodies are compared parsed (key order and whitespace do not matter, a
  renamed or missing field does); other bodies (the screenshot bytes of an S3 PUT) byte for byte.
* ``auth_scheme``: both requests use the same auth scheme, and it is the scheme docs/wire.md#hosts
  prescribes for the host: ``Bearer`` on the orchestrator and the platform host, nothing on an
  instance's manager API, SigV4 on S3. ``X-API-Key`` is never right: the platform answers it with
  "Authentication required..." (docs/wire.md#hosts).

The secret itself is never compared: both sides have been through the same redaction filter
(``contracts.recording.before_record_request``) before vcrpy matches them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any, Final

import vcr.matchers
from vcr.request import Request

__all__ = [
    "CONTRACT_HOSTS",
    "INSTANCE_HOST_RE",
    "MATCHERS",
    "MATCH_ON",
    "ORCHESTRATOR_HOST",
    "PLATFORM_HOST",
    "S3_HOST",
    "Matcher",
    "auth_scheme",
    "auth_scheme_of",
    "expected_auth_scheme",
    "json_body",
    "mismatches",
]

Matcher = Callable[[Request, Request], None]

# docs/wire.md#hosts, pinned literally here (never imported from the SDK under test).
ORCHESTRATOR_HOST: Final = "orchestrator.fleetai.com"
PLATFORM_HOST: Final = "api.internal.fleet-platform.fleetai.com"
S3_HOST: Final = "fleet-sessions-images.s3.us-east-1.amazonaws.com"
# Instance hosts as the recordings name them (see contracts/recording.py): ``inst-<hex>.env.fleetai.com``.
INSTANCE_HOST_RE: Final = re.compile(r"^[a-z0-9][a-z0-9-]*\.env\.fleetai\.com$")

BEARER: Final = "Bearer"
SIGV4: Final = "AWS4-HMAC-SHA256"
X_API_KEY: Final = "X-API-Key"

CONTRACT_HOSTS: Final = {
    ORCHESTRATOR_HOST: BEARER,
    PLATFORM_HOST: BEARER,
    S3_HOST: SIGV4,
}
"""Every fixed host a Fleet client may talk to, with the auth scheme it takes."""


def expected_auth_scheme(host: str) -> str | None:
    """The auth scheme docs/wire.md#hosts prescribes for ``host`` (None: no credentials at all).

    Raises:
        AssertionError: ``host`` is none of the contract's hosts.
    """
    if host in CONTRACT_HOSTS:
        return CONTRACT_HOSTS[host]
    if INSTANCE_HOST_RE.match(host):
        return None  # the instance manager API takes no API key (an optional X-Runner-Token only)
    raise AssertionError(f"{host!r} is not a host of the Fleet contract")


def _header(request: Request, name: str) -> str | None:
    wanted = name.lower()
    for key, value in request.headers.items():
        if key.lower() == wanted:
            return value if isinstance(value, str) else str(value)
    return None


def auth_scheme_of(request: Request) -> str | None:
    """The auth scheme a request carries: ``X-API-Key``, the ``Authorization`` scheme, or None."""
    if _header(request, "x-api-key") is not None:
        return X_API_KEY
    authorization = _header(request, "authorization")
    if authorization is None:
        return None
    return authorization.strip().split(" ", 1)[0] or None


def auth_scheme(r1: Request, r2: Request) -> None:
    """vcrpy matcher: same auth scheme on both sides, and the one the host expects."""
    got, recorded = auth_scheme_of(r1), auth_scheme_of(r2)
    assert got == recorded, f"auth scheme {got!r} != recorded {recorded!r}"
    expected = expected_auth_scheme(r1.host)
    assert got == expected, f"{r1.host} expects auth scheme {expected!r}, got {got!r}"


def _body_bytes(request: Request) -> bytes:
    # ``Request.body`` re-wraps file and iterator bodies (boto3 sends a file); read the stored bytes.
    body: Any = request._body
    if body is None:
        return b""
    if isinstance(body, list):
        return b"".join(part if isinstance(part, bytes) else str(part).encode() for part in body)
    if isinstance(body, str):
        return body.encode()
    return bytes(body)


def _parsed(raw: bytes) -> tuple[bool, Any]:
    if not raw:
        return False, None
    try:
        return True, json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return False, None


def json_body(r1: Request, r2: Request) -> None:
    """vcrpy matcher: equal JSON documents (parsed, key order free), else equal bytes."""
    raw1, raw2 = _body_bytes(r1), _body_bytes(r2)
    (is_json1, doc1), (is_json2, doc2) = _parsed(raw1), _parsed(raw2)
    if is_json1 or is_json2:
        assert is_json1 and is_json2, "one body is JSON, the other is not"
        assert doc1 == doc2, f"JSON bodies differ: {_first_difference(doc1, doc2)}"
        return
    assert raw1 == raw2, f"bodies differ ({len(raw1)} vs {len(raw2)} bytes)"


def _first_difference(a: Any, b: Any, path: str = "$") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            if key not in a or key not in b:
                side = "recorded" if key not in a else "live"
                return f"{path}.{key} missing on the {side} side"
            if a[key] != b[key]:
                return _first_difference(a[key], b[key], f"{path}.{key}")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return _first_difference(x, y, f"{path}[{index}]")
    return f"{path}: {a!r:.80} != {b!r:.80}"


MATCHERS: Final[dict[str, Matcher]] = {"json_body": json_body, "auth_scheme": auth_scheme}
"""The custom matchers, by the name they are registered under."""

MATCH_ON: Final = ("method", "scheme", "host", "port", "path", "query", "json_body", "auth_scheme")
"""What the replay suite matches on."""


def mismatches(live: Request, recorded: Request, match_on: Sequence[str] = MATCH_ON) -> list[str]:
    """Names (and reasons) of the matchers that reject ``live`` against ``recorded``; empty if it matches."""
    failures: list[str] = []
    for name in match_on:
        matcher: Callable[[Request, Request], Any] = MATCHERS.get(name) or getattr(vcr.matchers, name)
        try:
            result = matcher(live, recorded)
        except AssertionError as exc:
            failures.append(f"{name}: {exc}")
            continue
        if result is False:
            failures.append(name)
    return failures
