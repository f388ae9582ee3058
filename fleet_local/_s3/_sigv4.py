"""AWS Signature Version 4 as S3 checks it: header-signed and presigned requests, and the body.

Pure functions of a request's parts (method, raw path and query, lowercased headers, body) and
the secret: no sockets, no files, no server state. :func:`sigv4_refusal` checks a request's
signature (in its ``Authorization`` header or a presigned URL's query), :func:`body_refusal`
checks the body against the digests it declared, :func:`signed_content_type` says whether the
signature covers the ``Content-Type``, and :func:`presigned_url` signs a URL as S3's presigner
does. Each check answers None or the :class:`S3Refusal` to send. The rules the endpoint holds
requests to are in the docstring of the package (``fleet_local._s3``).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, quote, urlsplit

REGION = "us-east-1"
CLOCK_SKEW = dt.timedelta(minutes=15)
"""How far a signed request's ``X-Amz-Date`` may be from now (S3's own limit)."""
UNSIGNED = "UNSIGNED-PAYLOAD"
PRESIGN_MAX_SECONDS = 7 * 24 * 3600
"""The longest a presigned URL may be valid (S3's own limit)."""

SIGNING_HINT = (
    "sign the request with AWS SigV4 using the server's API key as the secret access key "
    "(LocalFleet.screenshot_store() and the clients LocalFleet hands out do)"
)
# Names match from a word's start only: unanchored, ``\w+`` was retried inside every word, which
# made a 64 KiB keyless Authorization header 13 s of matching, holding the interpreter's lock.
_AUTH_FIELDS = re.compile(r"(?<!\w)(\w+)=([^,\s]+)")


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


def signature(
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
    """The SigV4 signature of a request, as hex.

    Args:
        method: HTTP method.
        raw_path: The path as sent (still percent-encoded).
        raw_query: The query string as sent, without any ``X-Amz-Signature``.
        headers: Request headers, names lowercased.
        signed: The names of the signed headers, in the order the signature lists them.
        payload_hash: The body's SHA-256 as hex, or :data:`UNSIGNED`.
        amz_date: The signing time, ``YYYYMMDDTHHMMSSZ``.
        scope: The credential scope, ``<day>/<region>/<service>/aws4_request``.
        secret: The secret access key.
    """
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


def presigned_url(
    method: str,
    url: str,
    *,
    access_key: str,
    secret: str,
    expires: int,
    now: dt.datetime | None = None,
) -> str:
    """``url`` presigned as S3 does: SigV4 in the query, unsigned payload, ``host`` signed.

    Args:
        method: The one HTTP method the URL is good for.
        url: The object's URL, its path percent-encoded as a client sends it (S3's canonical
            URI), with no query.
        access_key: The access key id named in the credential.
        secret: The secret access key it is signed with.
        expires: Seconds the URL stays valid (at most :data:`PRESIGN_MAX_SECONDS`, as in S3).
        now: The signing time (tests).
    """
    parts = urlsplit(url)
    moment = (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%dT%H%M%SZ")
    scope = f"{moment[:8]}/{REGION}/s3/aws4_request"
    query = "&".join(
        f"{name}={quote(value, safe='-_.~')}"
        for name, value in (
            ("X-Amz-Algorithm", "AWS4-HMAC-SHA256"),
            ("X-Amz-Credential", f"{access_key}/{scope}"),
            ("X-Amz-Date", moment),
            ("X-Amz-Expires", str(min(expires, PRESIGN_MAX_SECONDS))),
            ("X-Amz-SignedHeaders", "host"),
        )
    )
    digest = signature(
        method,
        parts.path,
        query,
        {"host": parts.netloc},
        signed=["host"],
        payload_hash=UNSIGNED,
        amz_date=moment,
        scope=scope,
        secret=secret,
    )
    return f"{url}?{query}&X-Amz-Signature={digest}"


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
    expected = signature(
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
        return S3Refusal(403, "AccessDenied", f"anonymous requests may only read objects: {SIGNING_HINT}")
    algorithm, _, rest = authorization.partition(" ")
    fields = dict(_AUTH_FIELDS.findall(rest))
    credential = fields.get("Credential", "").split("/")
    if (
        algorithm != "AWS4-HMAC-SHA256"
        or len(credential) != 5
        or not {"SignedHeaders", "Signature"} <= set(fields)
    ):
        return S3Refusal(
            400, "AuthorizationHeaderMalformed", f"expected an AWS4-HMAC-SHA256 header: {SIGNING_HINT}"
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
    expected = signature(
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
            403, "SignatureDoesNotMatch", f"the signature does not match (wrong secret?): {SIGNING_HINT}"
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
