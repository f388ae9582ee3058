"""Record the contract cassettes: ``nox -s record`` (``python -m contracts.recording [scenario...]``).

Each scenario of ``contracts.scenarios`` runs once against the local server app *in this
process*, while the SDK uses its **production** base URLs. Every cassette therefore holds the
real production URL of every request, and the replay suite (``contracts/test_cassettes.py``)
pins the hosts, auth schemes, paths and payloads the SDK sends.

Routing (nothing leaves the machine while recording):

* **Control plane, sessions, traces, browser.** The SDK gets an ``httpx.AsyncClient`` whose
  transport is ``httpx.ASGITransport`` over the local app, wrapped in ``ProductionHosts``. The
  transport never resolves the URL's host: the request keeps ``https://orchestrator.fleetai.com``
  or ``https://api.internal.fleet-platform.fleetai.com`` and vcrpy (which patches
  ``ASGITransport``) records it as such. ``ProductionHosts`` refuses any other host with a 421, so
  an SDK that drifted to a wrong host fails the recording instead of being recorded.
* **Instance manager API.** The local app serves an instance under ``/instances/<id>/``; in
  production every instance has its own host. The recording state (``ProductionLikeState``)
  overrides ``LocalState.instance_root`` so the ``urls`` the app *returns* are production-shaped,
  ``https://inst-<hex>.env.fleetai.com/`` (manager API ``.../api/v1/env``), and
  ``ProductionHosts`` maps such a host back to ``/instances/inst_<hex>/...`` inside the app.
  Rewriting the returned URLs at the source, rather than rewriting responses afterwards, keeps
  the recorded responses exactly what the app sent and the SDK really followed. The ``-``/``_``
  swap exists because host labels cannot carry ``_``. ``state.public_url`` (used only for the
  browser lease URLs) is the platform URL.
* **S3.** boto3 talks to the local S3 endpoint the app's lifespan starts (``endpoint_url``,
  path-style). ``moto.mock_aws`` would answer inside botocore, above the connection layer
  vcrpy patches, so nothing would be recorded. ``before_record_request`` rewrites each such
  request to the production virtual-hosted URL
  ``https://fleet-sessions-images.s3.us-east-1.amazonaws.com/<key>``, which is what the same code
  sends at replay time without an ``endpoint_url``. Both clients use
  ``request_checksum_calculation="when_required"`` so the PUT body is the plain image over http
  and https alike (botocore's default would wrap it in ``aws-chunked`` over https only).

Cassette hygiene (applied when recording *and* to live requests before matching at replay):

* ``Authorization`` keeps its scheme only: ``Bearer <redacted>``, ``AWS4-HMAC-SHA256 <redacted>``;
  ``X-API-Key``, ``X-Runner-Token`` and AWS session tokens are redacted or dropped.
* Volatile headers are dropped (dates, user agents, SDK invocation ids, moto request ids);
  ``X-Request-ID`` and ``Idempotency-Key`` are kept, normalised to ``<uuid4>`` /
  ``<idempotency-key>``, so the cassettes show they are sent and stay stable.
* Response bodies are kept as the server sent them (ids and timestamps included): they are
  replayed in order, so the SDK follows the same ids at replay time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import re
import secrets
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

import httpx
import vcr
from starlette.types import ASGIApp, Receive, Scope, Send
from vcr.request import Request

from contracts.matchers import MATCH_ON, MATCHERS, ORCHESTRATOR_HOST, PLATFORM_HOST, S3_HOST
from fleet_local._state import LocalSettings, LocalState
from fleet_sdk._runtime import RetryPolicy

__all__ = [
    "CASSETTES",
    "INSTANCE_DOMAIN",
    "REDACTED",
    "ProductionHosts",
    "ProductionLikeState",
    "before_record_request",
    "before_record_response",
    "contract_vcr",
    "instance_host",
    "instance_id_from_host",
    "main",
    "record",
    "s3_client",
]

CASSETTES: Final = Path(__file__).resolve().parent / "cassettes"
INSTANCE_DOMAIN: Final = "env.fleetai.com"
REDACTED: Final = "<redacted>"
S3_BUCKET: Final = "fleet-sessions-images"
S3_REGION: Final = "us-east-1"
UUID4_PLACEHOLDER: Final = "<uuid4>"
IDEMPOTENCY_PLACEHOLDER: Final = "<idempotency-key>"

_DROPPED_REQUEST_HEADERS: Final = (
    "user-agent",
    "x-amz-date",
    "x-amz-security-token",
    "x-amz-content-sha256",  # the body's hash over http, a streaming marker over https
    "amz-sdk-invocation-id",
    "amz-sdk-request",
)
_DROPPED_RESPONSE_HEADERS: Final = frozenset(
    {"date", "server", "last-modified", "x-amz-request-id", "x-amz-id-2", "x-amzn-requestid"}
)
# Headers that only describe botocore's ``aws-chunked`` framing (https only) or its trailing checksum.
_AWS_CHUNKED_HEADERS: Final = (
    "Content-Encoding",
    "Transfer-Encoding",
    "X-Amz-Trailer",
    "X-Amz-Decoded-Content-Length",
)
_UUID4_RE: Final = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


# ---------------------------------------------------------------- production-shaped instance hosts


def instance_host(instance_id: str) -> str:
    """The production-shaped host of an instance: ``inst_3f9a`` -> ``inst-3f9a.env.fleetai.com``."""
    return f"{instance_id.replace('_', '-')}.{INSTANCE_DOMAIN}"


def instance_id_from_host(host: str) -> str | None:
    """The instance id an instance host names, or None for any other host."""
    label, dot, domain = host.partition(".")
    if not dot or domain != INSTANCE_DOMAIN or not label:
        return None
    return label.replace("-", "_")


class ProductionLikeState(LocalState):
    """Local server state whose instances are addressed by production-shaped hosts."""

    def instance_root(self, instance_id: str) -> str:
        """``urls.root`` of an instance: ``https://inst-<hex>.env.fleetai.com/``."""
        return f"https://{instance_host(instance_id)}/"


class ProductionHosts:
    """ASGI wrapper serving the local app under the production host names.

    ``orchestrator.fleetai.com`` and ``api.internal.fleet-platform.fleetai.com`` go to the app
    unchanged; ``<instance>.env.fleetai.com/<path>`` goes to ``/instances/<instance>/<path>``;
    any other host is answered 421 (misdirected), so a wrong host cannot be recorded quietly.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = _scope_host(scope)
        if host in (ORCHESTRATOR_HOST, PLATFORM_HOST):
            await self.app(scope, receive, send)
            return
        instance_id = instance_id_from_host(host)
        if instance_id is None:
            await _misdirected(host, send)
            return
        prefix = f"/instances/{instance_id}"
        routed = dict(scope)
        routed["path"] = prefix + scope["path"]
        routed["raw_path"] = prefix.encode() + scope.get("raw_path", scope["path"].encode())
        await self.app(routed, receive, send)


def _scope_host(scope: Scope) -> str:
    for name, value in scope.get("headers", []):
        if name == b"host":
            return str(value.decode("latin-1").split(":", 1)[0])
    server = scope.get("server")
    return str(server[0]) if server else ""


async def _misdirected(host: str, send: Send) -> None:
    body = f'{{"detail": "{host} is not a Fleet production host"}}'.encode()
    await send(
        {
            "type": "http.response.start",
            "status": 421,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


# ---------------------------------------------------------------- cassette filters


def _text(value: str | bytes) -> str:
    """A header value as text (botocore hands vcrpy bytes)."""
    return value.decode("latin-1") if isinstance(value, bytes) else str(value)


def _redact_authorization(key: str, value: str | bytes, request: Request) -> str:
    scheme = _text(value).strip().split(" ", 1)[0]
    return f"{scheme} {REDACTED}" if scheme else REDACTED


def _redact_value(key: str, value: str | bytes, request: Request) -> str:
    return REDACTED


def _normalise_request_id(key: str, value: str | bytes, request: Request) -> str:
    # Left as sent when it is not a uuid4: the cassette then shows it (test_cassettes checks).
    text = _text(value)
    return UUID4_PLACEHOLDER if _UUID4_RE.match(text) else text


def _normalise_idempotency_key(key: str, value: str | bytes, request: Request) -> str:
    return IDEMPOTENCY_PLACEHOLDER


FILTER_HEADERS: Final[list[tuple[str, Any]]] = [
    ("authorization", _redact_authorization),
    ("x-api-key", _redact_value),
    ("x-runner-token", _redact_value),
    ("x-request-id", _normalise_request_id),
    ("idempotency-key", _normalise_idempotency_key),
    *((name, None) for name in _DROPPED_REQUEST_HEADERS),
]
"""vcrpy ``filter_headers``: the secret never reaches a cassette, the scheme stays."""


def _rewrite_s3(request: Request, local_endpoint: str) -> Request:
    """A path-style request to the local S3 endpoint, as the production virtual-hosted URL."""
    local = urlsplit(local_endpoint)
    if (request.host, request.port) != (local.hostname, local.port):
        return request
    path = request.path
    bucket_prefix = f"/{S3_BUCKET}"
    if path == bucket_prefix or path.startswith(bucket_prefix + "/"):
        path = path[len(bucket_prefix) :] or "/"
    request.uri = urlunsplit(("https", S3_HOST, path, request.parsed_uri.query, ""))
    if "host" in request.headers:
        request.headers["host"] = S3_HOST
    return request


def _decode_aws_chunked(body: bytes) -> bytes:
    """The payload of an ``aws-chunked`` body (``<hex size>[;ext]\\r\\n<data>\\r\\n``... ``0``, trailers).

    botocore frames a PUT body this way over https (with a CRC trailer) but not over plain http,
    so the payload, not the framing, is what a cassette stores and a replay compares.
    """
    payload, position = bytearray(), 0
    while True:
        line_end = body.index(b"\r\n", position)
        size = int(body[position:line_end].split(b";", 1)[0], 16)
        if size == 0:
            return bytes(payload)
        start = line_end + 2
        payload += body[start : start + size]
        position = start + size + 2


def before_record_request(local_s3_endpoint: str | None = None) -> Callable[[Request], Request]:
    """The request hook (runs after ``FILTER_HEADERS``): text headers, plain bodies, and the S3
    host rewrite while recording."""

    def hook(request: Request) -> Request:
        request.headers = {name: _text(value) for name, value in request.headers.items()}
        if request._was_file or request._was_iter:
            # boto3 sends a file: store its bytes, not a pickled ``BytesIO``.
            body = request.body_bytes
            request._was_file = request._was_iter = False
            request.body = body
        if request.headers.get("Content-Encoding", "").lower() == "aws-chunked" and request.body:
            request.body = _decode_aws_chunked(request.body)
            for framing in _AWS_CHUNKED_HEADERS:
                request.headers.pop(framing, None)
        if local_s3_endpoint:
            request = _rewrite_s3(request, local_s3_endpoint)
        return request

    return hook


def before_record_response(response: dict[str, Any]) -> dict[str, Any]:
    """Drop volatile response headers (dates, server banners, moto request ids)."""
    headers = response.get("headers") or {}
    response["headers"] = {
        name: value for name, value in headers.items() if name.lower() not in _DROPPED_RESPONSE_HEADERS
    }
    return response


def contract_vcr(record_mode: str = "none", *, local_s3_endpoint: str | None = None) -> vcr.VCR:
    """The vcrpy configuration shared by recording and replay.

    Args:
        record_mode: ``none`` to replay (a request not in the cassette fails), ``all`` to record.
        local_s3_endpoint: While recording, the local S3 endpoint whose requests are rewritten to S3.
    """
    config = vcr.VCR(
        cassette_library_dir=str(CASSETTES),
        serializer="yaml",
        record_mode=record_mode,
        match_on=MATCH_ON,
        filter_headers=FILTER_HEADERS,
        before_record_request=before_record_request(local_s3_endpoint),
        before_record_response=before_record_response,
        decode_compressed_response=True,
    )
    for name, matcher in MATCHERS.items():
        config.register_matcher(name, matcher)
    return config


# ---------------------------------------------------------------- clients

# Dummy credentials: signed into S3 requests, then redacted (the scan test checks).
_AWS_KEY_ID: Final = "AKIAIOSFODNN7EXAMPLE"
_AWS_SECRET: Final = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def s3_client(endpoint_url: str | None = None, secret: str = _AWS_SECRET) -> Any:
    """A boto3 S3 client for the screenshot bucket (production URL when ``endpoint_url`` is None).

    Fixed dummy credentials: they are signed into the request, then redacted from the cassette.
    While recording, ``secret`` is the local server's key (its S3 endpoint checks signatures).
    """
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        region_name=S3_REGION,
        endpoint_url=endpoint_url,
        aws_access_key_id=_AWS_KEY_ID,
        aws_secret_access_key=secret,
        config=Config(
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
            retries={"max_attempts": 1, "mode": "standard"},
            s3={"us_east_1_regional_endpoint": "regional"},
        ),
    )


def screenshot_store(endpoint_url: str | None = None, secret: str = _AWS_SECRET) -> Any:
    """The SDK's ``ScreenshotStore`` as a user builds it: production defaults, own credentials.

    While recording, only the endpoint (path-style, the local S3 endpoint, which checks
    signatures made with ``secret``, the server's key) differs; the public URL stays the
    production one, so the ingested messages are what production would get.
    """
    from fleet_sdk.traces import ScreenshotStore

    if endpoint_url is None:
        return ScreenshotStore(aws_access_key_id=_AWS_KEY_ID, aws_secret_access_key=_AWS_SECRET)
    return ScreenshotStore(
        endpoint_url=endpoint_url,
        addressing_style="path",
        aws_access_key_id=_AWS_KEY_ID,
        aws_secret_access_key=secret,
    )


def no_retries() -> RetryPolicy:
    """Retry policy for contract runs: a failure shows at once, never as a second request."""
    return RetryPolicy(max_retries=0)


# ---------------------------------------------------------------- recording


@contextlib.asynccontextmanager
async def _local_app(data_dir: Path, api_key: str) -> AsyncIterator[tuple[ProductionLikeState, ASGIApp]]:
    from fleet_local._app import create_app
    from fleet_local._faults import FaultInjector
    from fleet_local._store import Store
    from fleet_local.environments import registry

    settings = LocalSettings(data_dir=data_dir, api_key=api_key, s3=True, reaper_interval=3600.0)
    state = ProductionLikeState(
        settings=settings,
        store=Store(data_dir / "fleet.db"),
        environments=registry(),
        faults=FaultInjector(enabled=False),
    )
    state.public_url = f"https://{PLATFORM_HOST}"
    app = create_app(state)
    try:
        async with app.router.lifespan_context(app):
            yield state, ProductionHosts(app)
    finally:
        state.store.close()


async def _record(names: Iterable[str], *, verbose: bool) -> list[Path]:
    from contracts.scenarios import SCENARIOS, ScenarioContext
    from fleet_sdk import AsyncFleet

    api_key = f"local-{secrets.token_urlsafe(24)}"
    written: list[Path] = []
    CASSETTES.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fleet-contracts-") as tmp:
        async with _local_app(Path(tmp), api_key) as (state, asgi):
            assert state.s3_url, "the local S3 endpoint did not start"
            recorder = contract_vcr("all", local_s3_endpoint=state.s3_url)
            for name in names:
                path = CASSETTES / f"{name}.yaml"
                path.unlink(missing_ok=True)
                transport = httpx.ASGITransport(app=asgi)
                async with httpx.AsyncClient(transport=transport, timeout=120) as pool:
                    # environ={}: no FLEET_* variable may move the SDK off its production URLs.
                    fleet = AsyncFleet(api_key, http_client=pool, environ={}, retry=no_retries())
                    context = ScenarioContext(
                        fleet=fleet,
                        s3=functools.partial(s3_client, state.s3_url, api_key),
                        screenshot_store=functools.partial(screenshot_store, state.s3_url, api_key),
                        poll_interval=0.2,
                    )
                    with recorder.use_cassette(path.name) as cassette:
                        await SCENARIOS[name](context)
                    await fleet.close()
                if verbose:
                    print(f"recorded {path.relative_to(CASSETTES.parent.parent)}: {len(cassette)} requests")
                written.append(path)
    return written


def record(names: Iterable[str] | None = None, *, verbose: bool = True) -> list[Path]:
    """Record the cassettes of ``names`` (all scenarios by default); returns the files written."""
    from contracts.scenarios import SCENARIOS

    chosen = list(names or SCENARIOS)
    unknown = sorted(set(chosen) - set(SCENARIOS))
    if unknown:
        raise SystemExit(f"unknown scenario(s) {unknown}; known: {sorted(SCENARIOS)}")
    return asyncio.run(_record(chosen, verbose=verbose))


def main(argv: list[str] | None = None) -> int:
    """CLI entry point of ``nox -s record``."""
    parser = argparse.ArgumentParser(prog="python -m contracts.recording", description=__doc__.split("\n")[0])
    parser.add_argument("scenarios", nargs="*", help="scenario names (default: all)")
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    args = parser.parse_args(argv)
    if args.list:
        from contracts.scenarios import SCENARIOS

        for name, scenario in SCENARIOS.items():
            summary = " ".join((scenario.__doc__ or "").strip().split("\n\n")[0].split())
            print(f"{name}: {summary}")
        return 0
    record(args.scenarios)
    return 0


if __name__ == "__main__":
    sys.exit(main())
