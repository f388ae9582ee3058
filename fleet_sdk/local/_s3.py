"""The local S3-compatible endpoint for screenshots (moto's threaded server).

When ``settings.s3`` is on, the server's lifespan starts moto's
``ThreadedMotoServer`` on a free loopback port, creates the bucket the trace
uploader writes to (``fleet-sessions-images``, us-east-1) with a bucket policy
that makes every object publicly readable, and sets ``state.s3_url``. Clients
use boto3 with ``endpoint_url=state.s3_url`` (any credentials) and fetch
uploaded objects anonymously at ``public_object_url(state, key)``, the local
twin of ``https://fleet-sessions-images.s3.us-east-1.amazonaws.com/<key>``.

moto is imported only here and only when the endpoint starts, so a server
started with ``--no-s3`` never pays for it.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
from fastapi import APIRouter

from ._state import LocalState

BUCKET = "fleet-sessions-images"
REGION = "us-east-1"

# Anonymous GETs of any object: what "public-read objects allowed" means for the viewer.
_PUBLIC_READ_POLICY = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Sid": "PublicReadScreenshots",
            "Effect": "Allow",
            "Principal": "*",
            "Action": "s3:GetObject",
            "Resource": f"arn:aws:s3:::{BUCKET}/*",
        }
    ],
}


def public_object_url(state: LocalState, key: str) -> str:
    """The anonymous URL of an object of the screenshot bucket.

    Args:
        state: The server state (its S3 endpoint must be running).
        key: Object key, e.g. ``harness/screenshot/<sha>.png``.

    Raises:
        RuntimeError: The S3 endpoint is not running (server started without S3).
    """
    if state.s3_url is None:
        raise RuntimeError("the local S3 endpoint is not running (server started with --no-s3)")
    return f"{state.s3_url}/{BUCKET}/{key.lstrip('/')}"


class _MotoEndpoint:
    """moto's threaded S3 server on a loopback port, with the screenshot bucket."""

    def __init__(self, host: str) -> None:
        self._host = host
        self._server: Any = None
        self.url = ""

    def start(self) -> str:
        """Start the server and create the bucket (blocking); returns the endpoint URL."""
        # werkzeug logs every request at INFO to stderr unless its logger already has a level.
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        from moto.server import ThreadedMotoServer

        server = ThreadedMotoServer(ip_address=self._host, port=0, verbose=False)
        server.start()
        self._server = server
        host, port = server.get_host_and_port()
        self.url = f"http://{host}:{port}"
        try:
            self._create_bucket()
        except Exception:
            self.stop()
            raise
        return self.url

    def _create_bucket(self) -> None:
        # Unsigned requests: moto serves them as the default account, and this avoids importing boto3.
        with httpx.Client(base_url=self.url, timeout=30, trust_env=False) as client:
            created = client.put(f"/{BUCKET}")
            if created.status_code not in (200, 409):
                raise RuntimeError(f"could not create bucket {BUCKET}: {created.status_code} {created.text}")
            policy = client.put(f"/{BUCKET}", params={"policy": ""}, content=json.dumps(_PUBLIC_READ_POLICY))
            if policy.status_code not in (200, 204):
                raise RuntimeError(f"could not make {BUCKET} public-read: {policy.status_code} {policy.text}")

    def stop(self) -> None:
        """Stop serving and close the listening socket (blocking)."""
        server, self._server = self._server, None
        if server is None:
            return
        server.stop()
        # ThreadedMotoServer.stop() shuts the loop down but leaves the socket bound.
        inner = getattr(server, "_server", None)
        if inner is not None:
            inner.server_close()


@contextlib.asynccontextmanager
async def lifespan(state: LocalState) -> AsyncIterator[None]:
    """Run the S3 endpoint for the server's lifetime when ``settings.s3`` is on.

    Sets ``state.s3_url`` once the bucket exists and clears it on shutdown.
    """
    if not state.settings.s3:
        yield
        return
    endpoint = _MotoEndpoint(state.settings.host if state.settings.host != "0.0.0.0" else "127.0.0.1")
    state.s3_url = await anyio.to_thread.run_sync(endpoint.start)
    state.extras["s3_endpoint"] = endpoint
    try:
        yield
    finally:
        state.s3_url = None
        state.extras.pop("s3_endpoint", None)
        await anyio.to_thread.run_sync(endpoint.stop)


def router(state: LocalState) -> APIRouter:
    """No HTTP routes: the S3 endpoint is its own server at ``state.s3_url``."""
    return APIRouter()
