"""The S3 endpoint's SigV4 module by itself (``fleet_local._s3._sigv4``): no server, no sockets.

The expected signatures are known answers computed once with botocore's own signers (the ones
boto3 uses), ``S3SigV4Auth`` for the header-signed PUT and ``S3SigV4QueryAuth`` for the presigned
GET, with their clock fixed at :data:`WHEN`, e.g.::

    request = AWSRequest(method="PUT", url=PUT_URL, data=BODY, headers={"Content-Type": ...})
    with mock.patch("botocore.auth.get_current_datetime", return_value=WHEN_NAIVE):
        S3SigV4Auth(Credentials(ACCESS_KEY, SECRET), "s3", "us-east-1").add_auth(request)

Writing them down (rather than signing with botocore in the test) keeps the test about this
module: a change to how it canonicalizes a request fails here whatever botocore does.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from urllib.parse import urlsplit

from fleet_local._s3._sigv4 import (
    REGION,
    body_refusal,
    presigned_url,
    signature,
    signed_content_type,
    sigv4_refusal,
)

ACCESS_KEY = "AKIDEXAMPLE"
SECRET = "local-example-secret"
WHEN = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
HOST = "127.0.0.1:9000"

PUT_PATH = "/fleet-task-data/seeds/orderdesk/a%20b/seed.tar.zst"
BODY = b"known answer\n"
BODY_SHA256 = "49c14a7018c14cf97dadeb167ade1dd89b7b3c9d7a8bed4ae130e6fd2889f18d"
BOTOCORE_PUT_SIGNATURE = "32cd3f24caa2d9e07f70782d0311b1153aac88a67857bd12d5bf7e941d35ca5d"
PUT_HEADERS = {
    "host": HOST,
    "content-type": "application/zstd",
    "x-amz-date": "20260102T030405Z",
    "x-amz-content-sha256": BODY_SHA256,
    "authorization": (
        f"AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/20260102/us-east-1/s3/aws4_request, "
        "SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date, "
        f"Signature={BOTOCORE_PUT_SIGNATURE}"
    ),
}

GET_URL = f"http://{HOST}/fleet-task-data/file-sets/k/a%20b.txt"
BOTOCORE_PRESIGNED_GET = (
    f"{GET_URL}?X-Amz-Algorithm=AWS4-HMAC-SHA256"
    f"&X-Amz-Credential={ACCESS_KEY}%2F20260102%2Fus-east-1%2Fs3%2Faws4_request"
    "&X-Amz-Date=20260102T030405Z&X-Amz-Expires=600&X-Amz-SignedHeaders=host"
    "&X-Amz-Signature=552dfa1c65bc03a2a3f892e253a21a87317f1d556381a431de08fc83dacd6ee3"
)


def test_the_known_body_digest_is_the_bodys() -> None:
    assert hashlib.sha256(BODY).hexdigest() == BODY_SHA256


def test_a_header_signed_put_gets_botocores_signature() -> None:
    computed = signature(
        "PUT",
        PUT_PATH,
        "",
        PUT_HEADERS,
        signed=["content-type", "host", "x-amz-content-sha256", "x-amz-date"],
        payload_hash=BODY_SHA256,
        amz_date="20260102T030405Z",
        scope=f"20260102/{REGION}/s3/aws4_request",
        secret=SECRET,
    )
    assert computed == BOTOCORE_PUT_SIGNATURE


def test_botocores_header_signed_put_is_accepted_with_its_body_and_type() -> None:
    assert sigv4_refusal("PUT", PUT_PATH, "", PUT_HEADERS, secret=SECRET, now=WHEN) is None
    assert body_refusal(BODY, PUT_HEADERS) is None
    assert signed_content_type("", PUT_HEADERS) == "application/zstd"


def test_botocores_header_signed_put_is_refused_once_anything_signed_differs() -> None:
    def refusal_code(headers: dict[str, str], *, path: str = PUT_PATH, secret: str = SECRET) -> str | None:
        refusal = sigv4_refusal("PUT", path, "", headers, secret=secret, now=WHEN)
        return None if refusal is None else refusal.code

    assert refusal_code(PUT_HEADERS, secret="another-secret") == "SignatureDoesNotMatch"
    assert refusal_code(PUT_HEADERS, path=PUT_PATH.replace("seed", "other")) == "SignatureDoesNotMatch"
    assert refusal_code({**PUT_HEADERS, "content-type": "text/html"}) == "SignatureDoesNotMatch"
    assert refusal_code({**PUT_HEADERS, "host": "127.0.0.1:9001"}) == "SignatureDoesNotMatch"
    late = sigv4_refusal("PUT", PUT_PATH, "", PUT_HEADERS, secret=SECRET, now=WHEN + dt.timedelta(minutes=16))
    assert late is not None and (late.status, late.code) == (403, "RequestTimeTooSkewed")
    other_body = body_refusal(b"another answer\n", PUT_HEADERS)
    assert other_body is not None and other_body.code == "XAmzContentSHA256Mismatch"


def test_a_presigned_get_is_botocores_url() -> None:
    url = presigned_url("GET", GET_URL, access_key=ACCESS_KEY, secret=SECRET, expires=600, now=WHEN)
    assert url == BOTOCORE_PRESIGNED_GET


def test_botocores_presigned_get_holds_for_its_method_and_its_time_only() -> None:
    parts = urlsplit(BOTOCORE_PRESIGNED_GET)
    headers = {"host": parts.netloc}

    def refusal_code(method: str, at: dt.datetime, secret: str = SECRET) -> str | None:
        refusal = sigv4_refusal(method, parts.path, parts.query, headers, secret=secret, now=at)
        return None if refusal is None else refusal.code

    assert refusal_code("GET", WHEN) is None
    assert refusal_code("GET", WHEN + dt.timedelta(seconds=600)) is None
    assert refusal_code("GET", WHEN + dt.timedelta(seconds=601)) == "AccessDenied"
    assert refusal_code("PUT", WHEN) == "SignatureDoesNotMatch"
    assert refusal_code("GET", WHEN, secret="another-secret") == "SignatureDoesNotMatch"
    # A presigned URL that signs only ``host`` leaves the Content-Type the client's to send.
    assert signed_content_type(parts.query, {**headers, "content-type": "text/html"}) is None
