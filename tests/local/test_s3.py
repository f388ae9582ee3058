"""The local S3 endpoint: signed writes, public reads, nothing else, and durable objects.

boto3 is the client (real SigV4 over loopback); anonymous requests use httpx, as the trace
viewer's ``<img src>`` does.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import socket
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

from fleet_local import LocalFleet
from fleet_local._s3._sigv4 import body_refusal, sigv4_refusal
from fleet_local._s3._store import ObjectStore
from fleet_sdk import ConfigurationError

BUCKET = "fleet-sessions-images"


def s3_client(local: LocalFleet, secret: str, **config: Any) -> Any:
    """A boto3 client of ``local``'s S3 endpoint (``config``: botocore ``Config`` fields)."""
    assert local.s3_url is not None
    return boto3.client(
        "s3",
        endpoint_url=local.s3_url,
        region_name="us-east-1",
        aws_access_key_id="anything",
        aws_secret_access_key=secret,
        config=Config(signature_version="s3v4", **config),
    )


def new_key() -> str:
    return f"harness/screenshot/{uuid.uuid4().hex[:24]}.png"


def error_code(exc: pytest.ExceptionInfo[ClientError]) -> str:
    return str(exc.value.response["Error"]["Code"])


def test_put_head_get_and_public_url(local: LocalFleet) -> None:
    s3 = s3_client(local, local.api_key)
    key = new_key()
    payload = b"\x89PNG\r\n\x1a\n" + uuid.uuid4().bytes * 64
    with pytest.raises(ClientError) as missing:
        s3.head_object(Bucket=BUCKET, Key=key)
    assert missing.value.response["ResponseMetadata"]["HTTPStatusCode"] == 404
    s3.put_object(Bucket=BUCKET, Key=key, Body=payload, ContentType="image/png")
    head = s3.head_object(Bucket=BUCKET, Key=key)
    assert head["ContentLength"] == len(payload) and head["ContentType"] == "image/png"
    assert s3.get_object(Bucket=BUCKET, Key=key)["Body"].read() == payload
    # Anonymous fetch at the public URL, like the dashboard does.
    public = httpx.get(f"{local.s3_url}/{BUCKET}/{key}")
    assert public.status_code == 200
    assert public.content == payload
    assert public.headers["content-type"] == "image/png"


def test_bucket_is_in_us_east_1(local: LocalFleet) -> None:
    location = s3_client(local, local.api_key).get_bucket_location(Bucket=BUCKET)
    assert location.get("LocationConstraint") in (None, "us-east-1")


def test_a_write_signed_with_another_secret_is_refused(local: LocalFleet) -> None:
    key = new_key()
    with pytest.raises(ClientError) as refused:
        s3_client(local, "not-the-key").put_object(Bucket=BUCKET, Key=key, Body=b"x")
    assert error_code(refused) == "SignatureDoesNotMatch"
    assert httpx.get(f"{local.s3_url}/{BUCKET}/{key}").status_code == 404


def test_anonymous_writes_listing_and_the_moto_reset_route_are_refused(local: LocalFleet) -> None:
    key = new_key()
    s3_client(local, local.api_key).put_object(Bucket=BUCKET, Key=key, Body=b"kept", ContentType="image/png")
    anonymous = httpx.put(f"{local.s3_url}/{BUCKET}/{new_key()}", content=b"mine")
    assert anonymous.status_code == 403
    assert b"<Code>AccessDenied</Code>" in anonymous.content and b"SigV4" in anonymous.content
    overwrite = httpx.put(f"{local.s3_url}/{BUCKET}/{key}", content=b"replaced")
    assert overwrite.status_code == 403
    assert httpx.get(f"{local.s3_url}/{BUCKET}", params={"list-type": "2"}).status_code == 403
    for method in ("POST", "GET", "PUT"):
        reset = httpx.request(method, f"{local.s3_url}/moto-api/reset")
        assert 400 <= reset.status_code < 500, (method, reset.status_code)
    assert httpx.post(f"{local.s3_url}/{BUCKET}/{key}").status_code == 405
    assert httpx.delete(f"{local.s3_url}/{BUCKET}/{key}").status_code == 405
    public = httpx.get(f"{local.s3_url}/{BUCKET}/{key}")
    assert public.status_code == 200 and public.content == b"kept"
    assert public.headers["content-type"] == "image/png"
    assert public.headers["etag"] == f'"{hashlib.md5(b"kept").hexdigest()}"'


def test_signed_listing_pages_by_key(local: LocalFleet) -> None:
    s3 = s3_client(local, local.api_key)
    prefix = f"listing/{uuid.uuid4().hex}/"
    keys = [f"{prefix}{name}" for name in ("c", "a", "b/deep")]
    for key in keys:
        s3.put_object(Bucket=BUCKET, Key=key, Body=key.encode())
    first = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix, MaxKeys=2)
    assert [o["Key"] for o in first["Contents"]] == sorted(keys)[:2] and first["IsTruncated"]
    rest = s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix, ContinuationToken=first["NextContinuationToken"])
    assert [o["Key"] for o in rest["Contents"]] == sorted(keys)[2:] and not rest["IsTruncated"]
    assert rest["Contents"][0]["Size"] == len(sorted(keys)[2])


def test_objects_and_session_urls_survive_a_restart(tmp_path: Path) -> None:
    """The URL a session stores keeps serving the same bytes from a new server on the data dir."""
    data_dir = tmp_path / "data"
    image = b"\x89PNG\r\n\x1a\n" + uuid.uuid4().bytes * 8
    data_url = "data:image/png;base64," + base64.b64encode(image).decode()
    history = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": data_url}}]}]
    with LocalFleet(data_dir) as first, first.fleet() as fleet:
        job_id = fleet.traces.create_job("durable")
        session_id = fleet.traces.upload_session(
            job_id=job_id, task_key="t", model="m", chat_history=history, reward=1.0
        )
        assert session_id is not None
        s3_url = first.s3_url
    with LocalFleet(data_dir) as second, second.fleet() as fleet:
        assert second.s3_url == s3_url, "the endpoint did not come back on its port"
        (message,) = fleet.api.sessions.get_session_transcript(session_id).transcript
        assert isinstance(message.content, list)
        url = message.content[0].image_url.url
        assert url.startswith(f"{s3_url}/{BUCKET}/harness/screenshot/")
        fetched = httpx.get(url)
        assert fetched.status_code == 200 and fetched.content == image
        # A new server also knows the object exists: the uploader heads before putting.
        store = second.screenshot_store()
        assert store.upload(url.split(f"/{BUCKET}/", 1)[1], image, "image/png") == url
        assert (store.uploads, store.existing) == (0, 1)  # type: ignore[attr-defined]


def test_allow_any_key_accepts_any_signature_but_not_none(tmp_path: Path) -> None:
    now = dt.datetime(2026, 11, 30, 8, 0, tzinfo=dt.UTC)
    headers = {
        "authorization": "AWS4-HMAC-SHA256 Credential=k/20261130/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=00",
        "x-amz-date": "20261130T080000Z",
        "x-amz-content-sha256": hashlib.sha256(b"").hexdigest(),
        "host": "127.0.0.1:1",
    }
    assert sigv4_refusal("PUT", "/b/k", "", headers, secret=None, now=now) is None
    refusal = sigv4_refusal("PUT", "/b/k", "", headers, secret="secret", now=now)
    assert refusal is not None and refusal.code == "SignatureDoesNotMatch"
    anonymous = sigv4_refusal("PUT", "/b/k", "", {"host": "127.0.0.1:1"}, secret=None, now=now)
    assert anonymous is not None and anonymous.code == "AccessDenied"
    stale = sigv4_refusal("PUT", "/b/k", "", headers, secret=None, now=now + dt.timedelta(minutes=16))
    assert stale is not None and stale.code == "RequestTimeTooSkewed"


def test_a_body_that_does_not_match_its_digests_is_refused() -> None:
    body = b"screenshot"
    good = {"x-amz-content-sha256": hashlib.sha256(body).hexdigest()}
    assert body_refusal(body, good) is None
    wrong_sha = body_refusal(b"other", good)
    assert wrong_sha is not None and wrong_sha.code == "XAmzContentSHA256Mismatch"
    wrong_crc = body_refusal(
        body, {"x-amz-content-sha256": "UNSIGNED-PAYLOAD", "x-amz-checksum-crc32": "AAAAAA=="}
    )
    assert wrong_crc is not None and wrong_crc.code == "BadDigest"
    chunked = body_refusal(body, {"x-amz-content-sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER"})
    assert chunked is not None and chunked.status == 501


def test_object_store_keeps_any_key_inside_its_directory(tmp_path: Path) -> None:
    store = ObjectStore(tmp_path / "bucket")
    for key in ("../../escape", "/abs/path", "a" * 1024):
        store.put(key, key.encode()[:10], "text/plain")
        assert store.read(key) == key.encode()[:10]
    assert not (tmp_path / "escape").exists()
    assert {p.parent.name for p in (tmp_path / "bucket").rglob("*") if p.is_file()} == {"objects", "meta"}
    objects, more = store.list("", "", 10)
    assert sorted(o.key for o in objects) == sorted(("../../escape", "/abs/path", "a" * 1024)) and not more


def test_without_s3_screenshots_keep_their_data_urls_and_go_nowhere() -> None:
    """``s3=False``: the clients' store refuses uploads; it never falls back to production."""
    image = b"\x89PNG\r\n\x1a\n" + uuid.uuid4().bytes
    data_url = "data:image/png;base64," + base64.b64encode(image).decode()
    history = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": data_url}}]}]
    with LocalFleet(s3=False) as local, local.fleet() as fleet:
        assert local.s3_url is None and fleet.screenshot_store is not None
        with pytest.raises(ConfigurationError, match="without its S3 endpoint"):
            fleet.screenshot_store.upload("k", image, "image/png")
        job_id = fleet.traces.create_job("no s3")
        session_id = fleet.traces.upload_session(
            job_id=job_id, task_key="t", model="m", chat_history=history, reward=None
        )
        assert session_id is not None
        (message,) = fleet.api.sessions.get_session_transcript(session_id).transcript
        assert isinstance(message.content, list) and message.content[0].image_url.url == data_url


def test_an_unsigned_put_is_refused_before_its_body_is_sent(local: LocalFleet) -> None:
    """``Expect: 100-continue`` gets the 403 at once, so an anonymous body never crosses."""
    assert local.s3_url is not None
    url = httpx.URL(local.s3_url)
    request = (
        f"PUT /{BUCKET}/{new_key()} HTTP/1.1\r\nHost: {url.host}:{url.port}\r\n"
        "Content-Length: 1000000000\r\nExpect: 100-continue\r\n\r\n"
    )
    with socket.create_connection((url.host, url.port), timeout=10) as conn:
        conn.sendall(request.encode())
        chunks = []
        while chunk := conn.recv(4096):  # the server closes the connection after answering
            chunks.append(chunk)
        answer = b"".join(chunks).decode()
    assert answer.startswith("HTTP/1.1 403 "), answer
    assert "Connection: close" in answer and "AccessDenied" in answer


def captured_put(local: LocalFleet, key: str, body: bytes, **client_config: Any) -> dict[str, str]:
    """The headers of a PutObject boto3 signs (with ``client_config``), stopped before it is sent
    (but ``Content-Length``, which the replay's own body sets)."""
    captured: dict[str, str] = {}

    def capture(request: Any, **_: Any) -> Any:
        for name, value in request.headers.items():
            captured[name.lower()] = value.decode() if isinstance(value, bytes) else value
        captured.pop("content-length", None)
        raise _Captured

    s3 = s3_client(local, local.api_key, **client_config)
    s3.meta.events.register("before-send.s3.PutObject", capture)
    with pytest.raises(_Captured):
        s3.put_object(Bucket=BUCKET, Key=key, Body=body, ContentType="image/png")
    return captured


class _Captured(Exception):
    """Stops boto3 once it has signed a request."""


def test_a_captured_signed_put_cannot_be_sent_again_with_another_body_or_type(local: LocalFleet) -> None:
    """A PUT signed over ``UNSIGNED-PAYLOAD`` with ``Content-Type`` unsigned could be replayed,
    within the 15 minutes its date allows, with any body, served as ``text/html``."""
    url = f"{local.s3_url}/{BUCKET}/{(key := new_key())}"
    # boto3 told not to sign the payload: refused before the body is read.
    unsigned = captured_put(local, key, b"png", s3={"payload_signing_enabled": False})
    assert unsigned["x-amz-content-sha256"] == "UNSIGNED-PAYLOAD"
    html = {**unsigned, "content-type": "text/html"}
    refused = httpx.put(url, content=b"<script>alert(1)</script>", headers=html)
    assert refused.status_code == 403 and b"must sign its payload" in refused.content
    # What boto3 sends by default signs the payload and the type: neither can change.
    signed = captured_put(local, key, b"png")
    assert "content-type" in signed["authorization"] and signed["x-amz-content-sha256"] != "UNSIGNED-PAYLOAD"
    other_body = httpx.put(url, content=b"<script>", headers=signed)
    assert other_body.status_code == 400 and b"XAmzContentSHA256Mismatch" in other_body.content
    other_type = httpx.put(url, content=b"png", headers={**signed, "content-type": "text/html"})
    assert other_type.status_code == 403 and b"SignatureDoesNotMatch" in other_type.content
    assert httpx.get(url).status_code == 404  # nothing was written
    assert httpx.put(url, content=b"png", headers=signed).status_code == 200
    assert httpx.get(url).headers["content-type"] == "image/png"


def test_a_content_type_left_out_of_the_signature_is_refused() -> None:
    now = dt.datetime(2026, 11, 30, 8, 0, tzinfo=dt.UTC)
    headers = {
        "authorization": "AWS4-HMAC-SHA256 Credential=k/20261130/us-east-1/s3/aws4_request, "
        "SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=00",
        "x-amz-date": "20261130T080000Z",
        "x-amz-content-sha256": hashlib.sha256(b"").hexdigest(),
        "host": "127.0.0.1:1",
        "content-type": "text/html",
    }
    refusal = sigv4_refusal("PUT", "/b/k", "", headers, secret=None, now=now)
    assert refusal is not None and refusal.code == "AccessDenied" and "Content-Type" in refusal.message


def test_a_signature_for_another_region_is_refused(local: LocalFleet) -> None:
    assert local.s3_url is not None
    elsewhere = boto3.client(
        "s3",
        endpoint_url=local.s3_url,
        region_name="eu-west-2",
        aws_access_key_id="anything",
        aws_secret_access_key=local.api_key,
    )
    with pytest.raises(ClientError) as refused:
        elsewhere.put_object(Bucket=BUCKET, Key=new_key(), Body=b"x")
    assert error_code(refused) == "AuthorizationHeaderMalformed"
    assert "us-east-1" in str(refused.value)
    presigned = urlsplit(
        elsewhere.generate_presigned_url("put_object", Params={"Bucket": BUCKET, "Key": "k"}, ExpiresIn=60)
    )
    query_refusal = sigv4_refusal(
        "PUT", presigned.path, presigned.query, {"host": presigned.netloc}, secret=local.api_key
    )
    assert query_refusal is not None and query_refusal.code == "AuthorizationQueryParametersError"


def test_a_presigned_put_keeps_only_a_content_type_it_signed(local: LocalFleet) -> None:
    """Whoever holds a presigned URL may upload any bytes to its key (that is what it is for), but
    an unsigned ``Content-Type`` is not kept: the object is not served as HTML."""
    s3 = s3_client(local, local.api_key)
    plain_key, typed_key = new_key(), new_key()
    plain = s3.generate_presigned_url("put_object", Params={"Bucket": BUCKET, "Key": plain_key}, ExpiresIn=60)
    assert httpx.put(plain, content=b"<script>", headers={"content-type": "text/html"}).status_code == 200
    assert httpx.get(f"{local.s3_url}/{BUCKET}/{plain_key}").headers["content-type"] == "binary/octet-stream"
    typed = s3.generate_presigned_url(
        "put_object", Params={"Bucket": BUCKET, "Key": typed_key, "ContentType": "image/png"}, ExpiresIn=60
    )
    assert httpx.put(typed, content=b"png", headers={"content-type": "text/html"}).status_code == 403
    assert httpx.put(typed, content=b"png", headers={"content-type": "image/png"}).status_code == 200
    assert httpx.get(f"{local.s3_url}/{BUCKET}/{typed_key}").headers["content-type"] == "image/png"
