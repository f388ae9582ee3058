"""The S3 endpoint itself: a stdlib threading HTTP server on a loopback port.

:class:`S3Endpoint` binds it (the port it used last time, when free) and serves both buckets
in a thread of its own; :func:`lifespan` runs it for the server's lifetime. Each request is
checked by :mod:`._sigv4` and read from or written to an :class:`~._store.ObjectStore`; this
module holds the HTTP around them: routing by method, bucket and key, who may read which
bucket, bounds on a body and a listing, and S3's XML answers.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import email.utils
import json
import logging
import socket
import threading
import uuid
from collections.abc import AsyncIterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit
from xml.sax.saxutils import escape

import anyio

from .._state import LocalState
from ._buckets import (
    BUCKET,
    MAX_LIST_KEYS,
    PUBLIC_BUCKETS,
    TASK_DATA_BUCKET,
    TASK_DATA_PREFIXES,
    bucket_dir,
)
from ._sigv4 import (
    REGION,
    SIGNING_HINT,
    UNSIGNED,
    S3Refusal,
    body_refusal,
    signed_content_type,
    sigv4_refusal,
)
from ._store import ObjectStore

MAX_OBJECT_BYTES = 64 * 1024 * 1024
"""Largest object a PUT may carry (a screenshot is far smaller)."""

log = logging.getLogger("fleet_local.s3")

_XMLNS = "http://s3.amazonaws.com/doc/2006-03-01/"


def _error_xml(refusal: S3Refusal, resource: str) -> bytes:
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{refusal.code}</Code><Message>{escape(refusal.message)}</Message>"
        f"<Resource>{escape(resource)}</Resource><RequestId>{uuid.uuid4().hex}</RequestId></Error>"
    ).encode()


def _http_date(moment: dt.datetime) -> str:
    return email.utils.format_datetime(moment.astimezone(dt.UTC), usegmt=True)


def _iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


class _S3Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self, address: tuple[str, int], buckets: Mapping[str, ObjectStore], secret: str | None
    ) -> None:
        self.buckets = buckets
        self.secret = secret
        super().__init__(address, _S3Handler)


class _S3Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _S3Server
    server_version = "fleet-sdk-local-s3"
    # Seconds a connection may sit idle mid-request or between keep-alive requests: a client that
    # stops sending must not hold its thread forever.
    timeout = 60

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the local server logs nothing per request."""

    # -- plumbing

    def _headers(self) -> dict[str, str]:
        return {name.lower(): value for name, value in self.headers.items()}

    def _target(self) -> tuple[str, str, str, str]:
        """Raw path, raw query, bucket, key (decoded)."""
        parts = urlsplit(self.path)
        bucket, _, key = parts.path.lstrip("/").partition("/")
        return parts.path, parts.query, unquote(bucket), unquote(key)

    def _send(self, status: int, body: bytes = b"", headers: Mapping[str, str] | None = None) -> None:
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("x-amz-request-id", uuid.uuid4().hex[:16].upper())
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _refuse(self, refusal: S3Refusal, *, body_unread: bool = False) -> None:
        if body_unread:
            # The body was never read: it would be taken for the next request on this connection.
            self.close_connection = True
        self._send(
            refusal.status, _error_xml(refusal, self._target()[0]), {"Content-Type": "application/xml"}
        )

    def handle_expect_100(self) -> bool:
        """Let only a PUT that passes the signature check send its body (boto3 waits for 100)."""
        if self.command == "PUT" and not self._authorize():
            return False
        return super().handle_expect_100()

    def _authorize(self) -> bool:
        raw_path, raw_query, _, _ = self._target()
        refusal = sigv4_refusal(self.command, raw_path, raw_query, self._headers(), secret=self.server.secret)
        if refusal is not None:
            self._refuse(refusal, body_unread=self.command == "PUT")
            return False
        return True

    def _objects(self, bucket: str) -> ObjectStore | None:
        """The bucket's objects, or None after answering 404 for an unknown bucket."""
        objects = self.server.buckets.get(bucket)
        if objects is None:
            served = " and ".join(repr(name) for name in self.server.buckets)
            self._refuse(
                S3Refusal(404, "NoSuchBucket", f"this endpoint serves only the buckets {served}"),
                body_unread=self.command in ("PUT", "POST"),
            )
        return objects

    def _may_read(self, bucket: str) -> bool:
        """Whether an object of ``bucket`` may be read: always in a public bucket, else only
        by a signed request (the refusal is sent otherwise)."""
        if bucket in PUBLIC_BUCKETS:
            return True
        raw_query = self._target()[1]
        if "authorization" not in self._headers() and "X-Amz-Signature=" not in raw_query:
            message = (
                f"the bucket {bucket!r} is not publicly readable: use the presigned URL the "
                f"data-file routes answer, or {SIGNING_HINT}"
            )
            self._refuse(S3Refusal(403, "AccessDenied", message))
            return False
        return self._authorize()

    # -- methods

    def do_GET(self) -> None:
        """GetObject (public in the screenshot bucket, else signed), ListObjectsV2 or
        GetBucketLocation (signed)."""
        _, raw_query, bucket, key = self._target()
        objects = self._objects(bucket)
        if objects is None:
            return
        if key:
            if self._may_read(bucket):
                self._get_object(objects, key)
        elif self._authorize():
            self._list(bucket, objects, dict(parse_qsl(raw_query, keep_blank_values=True)))

    def do_HEAD(self) -> None:
        """HeadObject (public in the screenshot bucket, else signed) or HeadBucket (signed)."""
        _, _, bucket, key = self._target()
        objects = self._objects(bucket)
        if objects is None:
            return
        if key:
            if self._may_read(bucket):
                self._get_object(objects, key)
        elif self._authorize():
            self._send(200, headers={"x-amz-bucket-region": REGION})

    def do_PUT(self) -> None:
        """PutObject (signed)."""
        _, _, bucket, key = self._target()
        objects = self._objects(bucket)
        if objects is None or not self._authorize():
            return
        if not key:
            self._refuse(S3Refusal(409, "BucketAlreadyOwnedByYou", f"{bucket} exists"), body_unread=True)
            return
        if bucket in PUBLIC_BUCKETS and key.startswith(TASK_DATA_PREFIXES):
            message = (
                f"keys under {' and '.join(TASK_DATA_PREFIXES)} are task data: put them in the bucket "
                f"{TASK_DATA_BUCKET!r}, which is not publicly readable"
            )
            self._refuse(S3Refusal(403, "AccessDenied", message), body_unread=True)
            return
        headers = self._headers()
        if "X-Amz-Signature=" in self._target()[1]:  # a presigned URL signs no payload
            headers.setdefault("x-amz-content-sha256", UNSIGNED)
        length = headers.get("content-length", "")
        if not (length.isascii() and length.isdigit()) or "chunked" in headers.get("transfer-encoding", ""):
            self._refuse(S3Refusal(411, "MissingContentLength", "send Content-Length"), body_unread=True)
            return
        if len(length) > 18 or int(length) > MAX_OBJECT_BYTES:  # int() of 5,000 digits raises
            message = f"objects are limited to {MAX_OBJECT_BYTES} bytes"
            self._refuse(S3Refusal(400, "EntityTooLarge", message), body_unread=True)
            return
        body = self.rfile.read(int(length))
        refusal = body_refusal(body, headers)
        if refusal is not None:
            self._refuse(refusal)
            return
        content_type = signed_content_type(self._target()[1], headers) or "binary/octet-stream"
        stored = objects.put(key, body, content_type)
        self._send(200, headers={"ETag": f'"{stored.etag}"'})

    def _refuse_method(self) -> None:
        message = "this endpoint serves GET, HEAD and PUT only"
        self._refuse(S3Refusal(405, "MethodNotAllowed", message), body_unread=True)

    do_POST = do_DELETE = do_PATCH = _refuse_method

    def _get_object(self, objects: ObjectStore, key: str) -> None:
        stored = objects.head(key)
        if stored is None:
            self._refuse(S3Refusal(404, "NoSuchKey", "The specified key does not exist."))
            return
        body = objects.read(key) if self.command == "GET" else b""
        headers = {
            "Content-Type": stored.content_type,
            "ETag": f'"{stored.etag}"',
            "Last-Modified": _http_date(stored.last_modified),
        }
        if self._target()[2] in PUBLIC_BUCKETS:  # pages of any origin show screenshots
            headers["Access-Control-Allow-Origin"] = "*"
        if self.command == "HEAD":
            # HEAD announces the object's length without sending it.
            self.send_response(200)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(stored.size))
            self.end_headers()
            return
        self._send(200, body, headers)

    def _list(self, bucket: str, objects: ObjectStore, query: Mapping[str, str]) -> None:
        if "location" in query:  # GetBucketLocation: us-east-1 is the empty constraint
            xml = f'<?xml version="1.0" encoding="UTF-8"?>\n<LocationConstraint xmlns="{_XMLNS}"/>'
            self._send(200, xml.encode(), {"Content-Type": "application/xml"})
            return
        if query.get("list-type") != "2":
            message = "only ListObjectsV2 (list-type=2) and GetBucketLocation are served"
            self._refuse(S3Refusal(501, "NotImplemented", message))
            return
        prefix = query.get("prefix", "")
        token = query.get("continuation-token", "")
        start_after = unquote(token) if token else query.get("start-after", "")
        max_keys = query.get("max-keys", str(MAX_LIST_KEYS))
        small = max_keys.isascii() and max_keys.isdigit() and len(max_keys) <= 9
        limit = min(int(max_keys), MAX_LIST_KEYS) if small else MAX_LIST_KEYS
        listed, truncated = objects.list(prefix, start_after, limit)
        contents = "".join(
            f"<Contents><Key>{escape(o.key)}</Key><LastModified>{_iso(o.last_modified)}</LastModified>"
            f'<ETag>"{o.etag}"</ETag><Size>{o.size}</Size><StorageClass>STANDARD</StorageClass></Contents>'
            for o in listed
        )
        more = f"<NextContinuationToken>{quote(listed[-1].key)}</NextContinuationToken>" if truncated else ""
        echoed = f"<ContinuationToken>{escape(token)}</ContinuationToken>" if token else ""
        xml = (
            f'<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="{_XMLNS}">'
            f"<Name>{bucket}</Name><Prefix>{escape(prefix)}</Prefix><KeyCount>{len(listed)}</KeyCount>"
            f"<MaxKeys>{limit}</MaxKeys><IsTruncated>{'true' if truncated else 'false'}</IsTruncated>"
            f"{echoed}{contents}{more}</ListBucketResult>"
        )
        self._send(200, xml.encode(), {"Content-Type": "application/xml"})


class S3Endpoint:
    """The S3 server on a loopback port, serving ``<data_dir>/s3/<bucket>`` for both buckets.

    The port is remembered in ``<data_dir>/s3/endpoint.json`` and bound again on the next
    start, so stored object URLs keep working; when it is taken, another is chosen (and
    the URLs stored before stop resolving, which is logged). The task-data bucket's directory
    is private to the server's user (0700).

    Args:
        host: Interface to bind.
        data_dir: The server's data directory.
        secret: The secret access key writes must be signed with (None: any signature).
    """

    def __init__(self, host: str, data_dir: Path, secret: str | None) -> None:
        self._host = host
        self._data_dir = data_dir
        self._root = data_dir / "s3"
        self._secret = secret
        self._server: _S3Server | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    def _remembered_port(self) -> int:
        with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
            port = int(json.loads((self._root / "endpoint.json").read_text())["port"])
            return port if 0 < port < 65536 else 0
        return 0

    def _buckets(self) -> dict[str, ObjectStore]:
        """Both buckets, with task data an older server kept in the screenshot bucket moved out."""
        task_dir = bucket_dir(self._data_dir, TASK_DATA_BUCKET)
        task_dir.mkdir(parents=True, exist_ok=True)
        task_dir.chmod(0o700)  # whatever the umask: other local users do not read task data
        buckets = {
            BUCKET: ObjectStore(bucket_dir(self._data_dir, BUCKET)),
            TASK_DATA_BUCKET: ObjectStore(task_dir),
        }
        moved_marker = self._root / "task-data-moved"
        if not moved_marker.exists():  # once per data dir: it reads every object's meta file
            moved = buckets[BUCKET].move_to(buckets[TASK_DATA_BUCKET], TASK_DATA_PREFIXES)
            if moved:
                log.warning("moved %d task data objects out of the public bucket %s", moved, BUCKET)
            moved_marker.touch()
        return buckets

    def start(self) -> str:
        """Bind, start serving in a thread and return the endpoint URL (blocking)."""
        buckets = self._buckets()
        wanted = self._remembered_port()
        try:
            server = _S3Server((self._host, wanted), buckets, self._secret)
        except OSError:
            if not wanted:
                raise
            log.warning("S3 port %d is taken: object URLs stored before this start will not resolve", wanted)
            server = _S3Server((self._host, 0), buckets, self._secret)
        server.socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        port = int(server.server_address[1])
        (self._root / "endpoint.json").write_text(json.dumps({"port": port}))
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="local-s3", daemon=True)
        self._thread.start()
        self.url = f"http://{self._host}:{port}"
        return self.url

    def stop(self) -> None:
        """Stop serving and close the listening socket (blocking)."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)


@contextlib.asynccontextmanager
async def lifespan(state: LocalState) -> AsyncIterator[None]:
    """Run the S3 endpoint for the server's lifetime when ``settings.s3`` is on.

    Sets ``state.s3_url`` once it listens and clears it on shutdown.
    """
    if not state.settings.s3:
        yield
        return
    settings = state.settings
    host = settings.host if settings.host != "0.0.0.0" else "127.0.0.1"
    endpoint = S3Endpoint(host, settings.data_dir, settings.api_key)
    state.s3_url = await anyio.to_thread.run_sync(endpoint.start)
    try:
        yield
    finally:
        state.s3_url = None
        await anyio.to_thread.run_sync(endpoint.stop)
