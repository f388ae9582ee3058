"""The local S3-compatible endpoint: signed writes; public screenshots, private task data.

When ``settings.s3`` is on, the server's lifespan starts a small S3 server (the stdlib's
threading HTTP server) on a loopback port and sets ``state.s3_url``. It speaks the part of
the S3 REST protocol the screenshot uploader, the viewer and the task-data routes use,
path-style, for two buckets:

* ``fleet-sessions-images`` (:data:`BUCKET`), the screenshots: its objects are public, as the
  production bucket's are (``GET`` / ``HEAD /<bucket>/<key>`` need no signature).
* ``fleet-task-data`` (:data:`TASK_DATA_BUCKET`), seed archives (``seeds/...``) and file sets
  (``file-sets/...``), which may hold a task's answers or personal data: every request to it
  is signed, reads included. The data-file routes answer presigned ``GET`` URLs
  (:func:`presigned_get_url`); the screenshot bucket refuses keys under those two prefixes,
  so task data never lands where anyone may read it.

Writes and listings of either bucket (``PUT /<bucket>/<key>``, ``GET /<bucket>?list-type=2``,
``HEAD /<bucket>``) and reads of the task-data bucket need a SigV4 signature made with the
server's API key as the secret access key (any access key id) for region ``us-east-1``, in the
``Authorization`` header or in the query of a presigned URL (:func:`presigned_put_url` and
:func:`presigned_get_url`, what the server hands out for seeds and file sets: each signed for
one method, one key and a time). Unsigned, wrongly signed or expired requests get ``403``,
another region ``400``. A PUT signed in its header must sign its payload
(``x-amz-content-sha256`` is the body's SHA-256, never ``UNSIGNED-PAYLOAD``) and, when it sends
a ``Content-Type``, sign that too (boto3 does both over plain HTTP): a captured request cannot
be sent again with other bytes or served as another type. A presigned PUT signs no payload
(that is what it is for: whoever holds the URL may upload to its one key until it expires, as
with S3), and an object it uploads keeps its ``Content-Type`` only when the URL signed it;
otherwise it is served as ``binary/octet-stream``. A server started with ``--allow-any-key``
accepts any well-formed signature. Nothing else is served (no bucket creation or deletion, no
reset route).

Objects live under ``<data_dir>/s3/<bucket>/`` and the endpoint rebinds the port it used last
time, so the URLs stored in sessions fetch the same bytes after a restart on the same data dir
(``tests/local/test_s3.py``). Task data an older server kept in the screenshot bucket moves to
the task-data bucket when the endpoint first starts (``tests/local/test_task_data_private.py``).
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import email.utils
import hashlib
import hmac
import json
import logging
import os
import re
import socket
import tempfile
import threading
import uuid
import zlib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit
from xml.sax.saxutils import escape

import anyio
from fastapi import APIRouter

from ._state import LocalState

BUCKET = "fleet-sessions-images"
"""The screenshot bucket: its objects are readable without a signature."""
TASK_DATA_BUCKET = "fleet-task-data"
"""The task-data bucket (seed archives, file sets): every request signed, reads included."""
PUBLIC_BUCKETS = frozenset({BUCKET})
TASK_DATA_PREFIXES = ("seeds/", "file-sets/")
"""Keys that are task data: refused in the screenshot bucket, moved out of it on start."""
REGION = "us-east-1"
MAX_OBJECT_BYTES = 64 * 1024 * 1024
"""Largest object a PUT may carry (a screenshot is far smaller)."""
MAX_LIST_KEYS = 1000
CLOCK_SKEW = dt.timedelta(minutes=15)
"""How far a signed request's ``X-Amz-Date`` may be from now (S3's own limit)."""

log = logging.getLogger("fleet_local.s3")

_SIGNING_HINT = (
    "sign the request with AWS SigV4 using the server's API key as the secret access key "
    "(LocalFleet.screenshot_store() and the clients LocalFleet hands out do)"
)
# Names match from a word's start only: unanchored, ``\w+`` was retried inside every word, which
# made a 64 KiB keyless Authorization header 13 s of matching, holding the interpreter's lock.
_AUTH_FIELDS = re.compile(r"(?<!\w)(\w+)=([^,\s]+)")
_XMLNS = "http://s3.amazonaws.com/doc/2006-03-01/"


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


def put_public_object(state: LocalState, key: str, data: bytes, content_type: str) -> str:
    """Store an object in the screenshot bucket from inside the server and return its public URL
    (blocking: run it in a worker thread).

    Writes are atomic file replaces, so this is safe next to the endpoint's own writes.

    Args:
        state: The server state (its S3 endpoint must be running).
        key: Object key.
        data: The bytes.
        content_type: Served back as ``Content-Type``.

    Raises:
        RuntimeError: The S3 endpoint is not running (server started without S3).
    """
    url = public_object_url(state, key)
    ObjectStore(_bucket_dir(state.settings.data_dir, BUCKET)).put(key, data, content_type)
    return url


def _bucket_dir(data_dir: Path, bucket: str) -> Path:
    return data_dir / "s3" / bucket


def task_data_object(state: LocalState, key: str) -> StoredObject | None:
    """An object of the task-data bucket, or None when there is none (blocking: reads the disk).

    Args:
        state: The server state.
        key: Object key, e.g. ``seeds/<env>/<data_key>/v1/seed.tar.zst``.
    """
    return ObjectStore(_bucket_dir(state.settings.data_dir, TASK_DATA_BUCKET)).head(key)


def task_data_objects(state: LocalState, prefix: str) -> list[StoredObject]:
    """The task-data objects whose key starts with ``prefix``, by key, at most 1000 (blocking).

    Args:
        state: The server state.
        prefix: Key prefix, e.g. ``file-sets/<key>/``.
    """
    store = ObjectStore(_bucket_dir(state.settings.data_dir, TASK_DATA_BUCKET))
    return store.list(prefix, "", MAX_LIST_KEYS)[0]


PRESIGN_ACCESS_KEY = "fleet-local"
"""The access key id of the URLs the server presigns (the secret is what counts)."""


def presigned_put_url(state: LocalState, key: str, expires: int, *, now: dt.datetime | None = None) -> str:
    """A URL that lets anyone holding it ``PUT`` one task-data object for ``expires`` seconds.

    Signed like an S3 presigned URL (SigV4 in the query, unsigned payload) with the server's
    API key, which the endpoint checks.

    Args:
        state: The server state (its S3 endpoint must be running).
        key: Object key in the task-data bucket.
        expires: Seconds the URL stays valid (at most 7 days, as in S3).
        now: The signing time (tests).

    Raises:
        RuntimeError: The S3 endpoint is not running.
    """
    return _presigned_url(state, "PUT", key, expires, now=now)


def presigned_get_url(state: LocalState, key: str, expires: int, *, now: dt.datetime | None = None) -> str:
    """A URL that lets anyone holding it ``GET`` one task-data object for ``expires`` seconds.

    The task-data bucket answers no unsigned read: this is the URL the seed and file-set
    download routes hand out.

    Args:
        state: The server state (its S3 endpoint must be running).
        key: Object key in the task-data bucket.
        expires: Seconds the URL stays valid (at most 7 days, as in S3).
        now: The signing time (tests).

    Raises:
        RuntimeError: The S3 endpoint is not running.
    """
    return _presigned_url(state, "GET", key, expires, now=now)


def _presigned_url(state: LocalState, method: str, key: str, expires: int, *, now: dt.datetime | None) -> str:
    """An S3 presigned URL (SigV4 in the query, unsigned payload, ``host`` signed) of a task-data
    object, signed with the server's API key."""
    if state.s3_url is None:
        raise RuntimeError("the local S3 endpoint is not running (server started with --no-s3)")
    # The path as a client sends it (S3's canonical URI), so the signature holds for any key.
    url = f"{state.s3_url}/{TASK_DATA_BUCKET}/{quote(key.lstrip('/'), safe='/-_.~')}"
    parts = urlsplit(url)
    moment = (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%dT%H%M%SZ")
    scope = f"{moment[:8]}/{REGION}/s3/aws4_request"
    query = "&".join(
        f"{name}={quote(value, safe='-_.~')}"
        for name, value in (
            ("X-Amz-Algorithm", "AWS4-HMAC-SHA256"),
            ("X-Amz-Credential", f"{PRESIGN_ACCESS_KEY}/{scope}"),
            ("X-Amz-Date", moment),
            ("X-Amz-Expires", str(min(expires, PRESIGN_MAX_SECONDS))),
            ("X-Amz-SignedHeaders", "host"),
        )
    )
    signature = _signature(
        method,
        parts.path,
        query,
        {"host": parts.netloc},
        signed=["host"],
        payload_hash=UNSIGNED,
        amz_date=moment,
        scope=scope,
        secret=state.settings.api_key or "",
    )
    return f"{url}?{query}&X-Amz-Signature={signature}"


# ---------------------------------------------------------------- SigV4


@dataclass(frozen=True)
class S3Refusal:
    """Why a request is refused, as S3 says it: HTTP status, error code, message."""

    status: int
    code: str
    message: str


def _canonical_query(raw_query: str) -> str:
    pairs = parse_qsl(raw_query, keep_blank_values=True)
    encoded = sorted((quote(k, safe="-_.~"), quote(v, safe="-_.~")) for k, v in pairs)
    return "&".join(f"{k}={v}" for k, v in encoded)


def _hmac(key: bytes, message: str) -> bytes:
    return hmac.new(key, message.encode(), hashlib.sha256).digest()


UNSIGNED = "UNSIGNED-PAYLOAD"
PRESIGN_MAX_SECONDS = 7 * 24 * 3600
"""The longest a presigned URL may be valid (S3's own limit)."""


def _signature(
    method: str,
    raw_path: str,
    raw_query: str,
    headers: Mapping[str, str],
    *,
    signed: list[str],
    payload_hash: str,
    amz_date: str,
    scope: str,
    secret: str,
) -> str:
    """The SigV4 signature of a request (``raw_query`` without any ``X-Amz-Signature``)."""
    canonical_headers = "".join(f"{name}:{' '.join(headers.get(name, '').split())}\n" for name in signed)
    canonical = "\n".join(
        [
            method,
            raw_path or "/",
            _canonical_query(raw_query),
            canonical_headers,
            ";".join(signed),
            payload_hash,
        ]
    )
    to_sign = f"AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
    day, region, service, terminal = scope.split("/")
    key = _hmac(_hmac(_hmac(_hmac(f"AWS4{secret}".encode(), day), region), service), terminal)
    return hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()


def _presigned_refusal(
    method: str,
    raw_path: str,
    raw_query: str,
    headers: Mapping[str, str],
    *,
    secret: str | None,
    now: dt.datetime,
) -> S3Refusal | None:
    """Check a presigned URL's query signature (SigV4, unsigned payload)."""
    fields = dict(parse_qsl(raw_query, keep_blank_values=True))
    credential = fields.get("X-Amz-Credential", "").split("/")
    amz_date = fields.get("X-Amz-Date", "")
    expires = fields.get("X-Amz-Expires", "")
    signed = fields.get("X-Amz-SignedHeaders", "").split(";")
    if (
        fields.get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256"
        or len(credential) != 5
        or not (expires.isascii() and expires.isdigit() and len(expires) <= 9)  # int() of 5,000 digits raises
        or "host" not in signed
    ):
        return S3Refusal(400, "AuthorizationQueryParametersError", "malformed presigned URL")
    try:
        moment = dt.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.UTC)
    except ValueError:
        return S3Refusal(400, "AuthorizationQueryParametersError", "X-Amz-Date is not YYYYMMDDTHHMMSSZ")
    # As an age: ``moment - CLOCK_SKEW`` is before the year 1 for an X-Amz-Date in its first minutes.
    age = now - moment
    if int(expires) > PRESIGN_MAX_SECONDS or not -CLOCK_SKEW <= age <= dt.timedelta(seconds=int(expires)):
        return S3Refusal(403, "AccessDenied", "the presigned URL has expired (or is not valid yet)")
    if credential[2] != REGION:
        return _wrong_region("AuthorizationQueryParametersError", credential[2])
    if secret is None:
        return None
    unsigned = "&".join(part for part in raw_query.split("&") if not part.startswith("X-Amz-Signature="))
    scope = "/".join(credential[1:])
    expected = _signature(
        method,
        raw_path,
        unsigned,
        headers,
        signed=signed,
        payload_hash=UNSIGNED,
        amz_date=amz_date,
        scope=scope,
        secret=secret,
    )
    if not hmac.compare_digest(expected, fields.get("X-Amz-Signature", "")):
        return S3Refusal(403, "SignatureDoesNotMatch", "the presigned URL's signature does not match")
    return None


def sigv4_refusal(
    method: str,
    raw_path: str,
    raw_query: str,
    headers: Mapping[str, str],
    *,
    secret: str | None,
    now: dt.datetime | None = None,
) -> S3Refusal | None:
    """Check a request's AWS SigV4 ``Authorization`` header (S3 flavour, header auth only).

    The payload hash is taken from ``x-amz-content-sha256`` as signed; the caller checks
    that the body really has it.

    Args:
        method: HTTP method.
        raw_path: The path as sent (still percent-encoded).
        raw_query: The query string as sent.
        headers: Request headers, names lowercased.
        secret: The secret access key requests must be signed with; None accepts any
            well-formed signature (``--allow-any-key``).
        now: The current time (tests).

    Returns:
        None when the signature holds, else the refusal to answer.
    """
    if "X-Amz-Signature=" in raw_query:
        return _presigned_refusal(
            method, raw_path, raw_query, headers, secret=secret, now=now or dt.datetime.now(dt.UTC)
        )
    authorization = headers.get("authorization", "")
    if not authorization:
        return S3Refusal(403, "AccessDenied", f"anonymous requests may only read objects: {_SIGNING_HINT}")
    algorithm, _, rest = authorization.partition(" ")
    fields = dict(_AUTH_FIELDS.findall(rest))
    credential = fields.get("Credential", "").split("/")
    if (
        algorithm != "AWS4-HMAC-SHA256"
        or len(credential) != 5
        or not {"SignedHeaders", "Signature"} <= set(fields)
    ):
        return S3Refusal(
            400, "AuthorizationHeaderMalformed", f"expected an AWS4-HMAC-SHA256 header: {_SIGNING_HINT}"
        )
    _access_key, day, region, service, terminal = credential
    amz_date = headers.get("x-amz-date", "")
    try:
        moment = dt.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.UTC)
    except ValueError:
        return S3Refusal(403, "AccessDenied", "x-amz-date is missing or not YYYYMMDDTHHMMSSZ")
    if abs((now or dt.datetime.now(dt.UTC)) - moment) > CLOCK_SKEW:
        return S3Refusal(
            403, "RequestTimeTooSkewed", "x-amz-date is more than 15 minutes from the server's time"
        )
    signed = fields["SignedHeaders"].split(";")
    if day != amz_date[:8] or service != "s3" or terminal != "aws4_request" or "host" not in signed:
        return S3Refusal(
            400, "AuthorizationHeaderMalformed", "the credential scope does not match the request"
        )
    if region != REGION:
        return _wrong_region("AuthorizationHeaderMalformed", region)
    payload_hash = headers.get("x-amz-content-sha256", "")
    if not payload_hash:
        return S3Refusal(400, "InvalidRequest", "x-amz-content-sha256 is required")
    # A PUT signed over "UNSIGNED-PAYLOAD", or leaving its content type out, would let anyone who
    # saw it send it again with other bytes, or have them served as HTML.
    if method == "PUT" and payload_hash == UNSIGNED:
        return S3Refusal(403, "AccessDenied", f"a signed PUT must sign its payload's SHA-256, not {UNSIGNED}")
    if method == "PUT" and "content-type" in headers and "content-type" not in signed:
        return S3Refusal(403, "AccessDenied", "Content-Type is sent but not among the signed headers")
    if secret is None:
        return None
    scope = f"{day}/{region}/{service}/{terminal}"
    expected = _signature(
        method,
        raw_path,
        raw_query,
        headers,
        signed=signed,
        payload_hash=payload_hash,
        amz_date=amz_date,
        scope=scope,
        secret=secret,
    )
    if not hmac.compare_digest(expected, fields["Signature"]):
        return S3Refusal(
            403, "SignatureDoesNotMatch", f"the signature does not match (wrong secret?): {_SIGNING_HINT}"
        )
    return None


def _wrong_region(code: str, region: str) -> S3Refusal:
    return S3Refusal(400, code, f"the region {region!r} is wrong; expecting {REGION!r}")


def signed_content_type(raw_query: str, headers: Mapping[str, str]) -> str | None:
    """The request's ``Content-Type`` if its signature covers it, else None.

    A presigned URL signs what its maker chose (``host`` alone, unless it was made for one
    content type): whoever holds the URL may PUT any bytes to its one key until it expires,
    as with S3, but cannot choose how they are served.

    Args:
        raw_query: The query string as sent.
        headers: Request headers, names lowercased.
    """
    if "X-Amz-Signature=" in raw_query:
        signed = dict(parse_qsl(raw_query, keep_blank_values=True)).get("X-Amz-SignedHeaders", "")
    else:
        signed = dict(_AUTH_FIELDS.findall(headers.get("authorization", ""))).get("SignedHeaders", "")
    return headers.get("content-type") if "content-type" in signed.split(";") else None


def body_refusal(body: bytes, headers: Mapping[str, str]) -> S3Refusal | None:
    """Check the body against the digests the request declared (sha256, Content-MD5, CRC32).

    Args:
        body: The request body.
        headers: Request headers, names lowercased.
    """
    declared = headers.get("x-amz-content-sha256", "")
    if declared.startswith("STREAMING-"):
        return S3Refusal(501, "NotImplemented", "aws-chunked uploads are not supported; send a plain body")
    if declared != "UNSIGNED-PAYLOAD" and declared != hashlib.sha256(body).hexdigest():
        return S3Refusal(400, "XAmzContentSHA256Mismatch", "the body does not match x-amz-content-sha256")
    md5 = headers.get("content-md5")
    if md5 and md5 != base64.b64encode(hashlib.md5(body).digest()).decode():
        return S3Refusal(400, "BadDigest", "the body does not match Content-MD5")
    crc32 = headers.get("x-amz-checksum-crc32")
    if crc32 and crc32 != base64.b64encode(zlib.crc32(body).to_bytes(4, "big")).decode():
        return S3Refusal(400, "BadDigest", "the body does not match x-amz-checksum-crc32")
    return None


# ---------------------------------------------------------------- objects on disk


@dataclass(frozen=True)
class StoredObject:
    """One object's metadata (its bytes are read separately)."""

    key: str
    size: int
    etag: str
    content_type: str
    last_modified: dt.datetime


class ObjectStore:
    """Objects of one bucket as files: ``objects/<sha256(key)>`` plus ``meta/<sha256(key)>.json``.

    Hashed names keep any key (``/``, ``..``, 1 KiB long) inside the directory. The meta
    file is written last, so an object exists once its meta file does.

    Args:
        root: The bucket's directory.
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._objects = root / "objects"
        self._meta = root / "meta"
        self._objects.mkdir(parents=True, exist_ok=True)
        self._meta.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    @staticmethod
    def _name(key: str) -> str:
        return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()

    @staticmethod
    def _write(path: Path, data: bytes) -> None:
        fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as file:
                file.write(data)
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise

    def put(self, key: str, data: bytes, content_type: str) -> StoredObject:
        """Store ``data`` at ``key`` (replacing any object there).

        Args:
            key: Object key.
            data: The bytes.
            content_type: Served back as ``Content-Type``.
        """
        name = self._name(key)
        stored = StoredObject(
            key=key,
            size=len(data),
            etag=hashlib.md5(data).hexdigest(),
            content_type=content_type,
            last_modified=dt.datetime.now(dt.UTC).replace(microsecond=0),
        )
        meta = {**stored.__dict__, "last_modified": stored.last_modified.isoformat()}
        with self._lock:
            self._write(self._objects / name, data)
            self._write(self._meta / f"{name}.json", json.dumps(meta).encode())
        return stored

    def head(self, key: str) -> StoredObject | None:
        """The object's metadata, or None when there is no such object.

        Args:
            key: Object key.
        """
        return self._load(self._meta / f"{self._name(key)}.json")

    def read(self, key: str) -> bytes:
        """The object's bytes (call ``head`` first).

        Args:
            key: Object key.
        """
        return (self._objects / self._name(key)).read_bytes()

    @staticmethod
    def _load(path: Path) -> StoredObject | None:
        try:
            meta = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return StoredObject(**{**meta, "last_modified": dt.datetime.fromisoformat(meta["last_modified"])})

    def list(self, prefix: str, start_after: str, limit: int) -> tuple[list[StoredObject], bool]:
        """Objects whose key starts with ``prefix`` and sorts after ``start_after``, in key order.

        Args:
            prefix: Key prefix.
            start_after: Only keys greater than this.
            limit: At most this many.

        Returns:
            The objects and whether more remain.
        """
        found = [obj for path in self._meta.glob("*.json") if (obj := self._load(path)) is not None]
        chosen = sorted(
            (o for o in found if o.key.startswith(prefix) and o.key > start_after), key=lambda o: o.key
        )
        return chosen[:limit], len(chosen) > limit

    def move_to(self, other: ObjectStore, prefixes: tuple[str, ...]) -> int:
        """Move every object whose key starts with one of ``prefixes`` into ``other`` (another
        bucket's directory on the same file system); returns how many moved.

        The bytes go first and the meta file last, so an object is in one bucket or the other;
        one left half-moved by a crash (bytes moved, meta not) is finished by the next call.

        Args:
            other: The bucket they move to.
            prefixes: Key prefixes.
        """
        moved = 0
        for path in self._meta.glob("*.json"):
            stored = self._load(path)
            if stored is None or not stored.key.startswith(prefixes):
                continue
            name = self._name(stored.key)
            with self._lock, other._lock:
                if (self._objects / name).exists():
                    os.replace(self._objects / name, other._objects / name)
                os.replace(path, other._meta / path.name)
            moved += 1
        return moved


# ---------------------------------------------------------------- HTTP


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
                f"data-file routes answer, or {_SIGNING_HINT}"
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
        task_dir = _bucket_dir(self._data_dir, TASK_DATA_BUCKET)
        task_dir.mkdir(parents=True, exist_ok=True)
        task_dir.chmod(0o700)  # whatever the umask: other local users do not read task data
        buckets = {
            BUCKET: ObjectStore(_bucket_dir(self._data_dir, BUCKET)),
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


def router(state: LocalState) -> APIRouter:
    """No HTTP routes: the S3 endpoint is its own server at ``state.s3_url``."""
    return APIRouter()
