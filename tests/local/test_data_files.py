"""Task data files on the control plane: seed archives and file sets, stored on the local S3 endpoint
(``fleet_local._data_files``), and the presigned URLs the server hands out for uploads."""

from __future__ import annotations

import datetime as dt
import uuid
from types import SimpleNamespace
from typing import Any, cast
from urllib.parse import urlsplit

import boto3
import httpx
import pytest
from botocore.config import Config

from fleet_local import LocalFleet
from fleet_local._s3 import TASK_DATA_BUCKET, presigned_put_url
from fleet_local._s3._sigv4 import sigv4_refusal
from fleet_sdk import Fleet, NotFoundError
from fleet_sdk.types import env_instance as models

ENV = "orderdesk"


def test_a_seed_archive_goes_up_by_presigned_url_and_comes_back_by_version(fleet: Fleet) -> None:
    cp = fleet.api.control_plane
    data_key = f"data-{uuid.uuid4().hex[:8]}"
    with pytest.raises(NotFoundError):  # nothing uploaded yet
        cp.create_seed_download_url(data_key, ENV)
    first = cp.create_seed_upload_url(data_key, ENV, filename="seed.tar.zst", env_version="1.0.0")
    assert (first.version, first.env_version) == ("v1", "v1.0.0")
    assert first.s3_key == f"seeds/{ENV}/{data_key}/v1/seed.tar.zst"
    archive = uuid.uuid4().bytes * 100
    # As the public SDK's upload tool sends it: a bare PUT, no credentials but the URL's own.
    assert (
        httpx.put(
            first.url, content=archive, headers={"Content-Type": "application/octet-stream"}
        ).status_code
        == 200
    )
    unused = cp.create_seed_upload_url(data_key, ENV, filename="seed.tar.zst")
    assert unused.version == "v2"
    latest = cp.create_seed_download_url(data_key, ENV)
    assert (latest.version, latest.s3_key) == ("v1", first.s3_key)  # v2 was never uploaded
    assert httpx.get(latest.url).content == archive
    assert httpx.put(unused.url, content=b"second").status_code == 200
    assert httpx.get(cp.create_seed_download_url(data_key, ENV).url).content == b"second"
    # The URL allows that one object only.
    elsewhere = unused.url.replace("/v2/seed.tar.zst?", "/v2/other.tar?")
    assert httpx.put(elsewhere, content=b"x").status_code == 403
    with pytest.raises(NotFoundError) as unknown:
        cp.create_seed_upload_url(data_key, "no-such-env", filename="seed.tar.zst")
    assert unknown.value.code == "env_not_found"


def test_a_file_set_is_the_objects_under_its_prefix(local: LocalFleet, fleet: Fleet) -> None:
    assert local.s3_url is not None and local.api_key is not None
    s3 = boto3.client(
        "s3",
        endpoint_url=local.s3_url,
        region_name="us-east-1",
        aws_access_key_id="anything",
        aws_secret_access_key=local.api_key,
    )
    key = f"set-{uuid.uuid4().hex[:8]}"
    files = {"a.txt": b"alpha", "dir/b.json": b'{"b": 1}'}
    for name, body in files.items():
        s3.put_object(Bucket=TASK_DATA_BUCKET, Key=f"file-sets/{key}/{name}", Body=body)
    listed = fleet.api.control_plane.create_file_set_download_urls(key, expires_in=3600)
    assert listed.file_set_key == key
    assert {item.filename: httpx.get(item.url).content for item in listed.urls} == files
    with pytest.raises(NotFoundError):
        fleet.api.control_plane.create_file_set_download_urls(f"{key}-empty", models.FileSetDownloadRequest())


def test_presigned_urls_are_checked_like_the_signed_requests() -> None:
    """A presigned PUT holds for its object, its time and the server's key; boto3's are accepted."""
    secret = "sk-local-presign"
    state = cast(Any, SimpleNamespace(s3_url="http://127.0.0.1:9", settings=SimpleNamespace(api_key=secret)))
    signed_at = dt.datetime(2025, 5, 1, 12, 0, tzinfo=dt.UTC)
    url = urlsplit(presigned_put_url(state, "seeds/e/d/v1/seed.tar.zst", 600, now=signed_at))
    headers = {"host": url.netloc}

    def refusal(
        at: dt.datetime, *, path: str = url.path, query: str = url.query, key: str = secret
    ) -> str | None:
        refused = sigv4_refusal("PUT", path, query, headers, secret=key, now=at)
        return None if refused is None else refused.code

    assert refusal(signed_at + dt.timedelta(seconds=599)) is None
    assert refusal(signed_at + dt.timedelta(seconds=601)) == "AccessDenied"  # expired
    assert refusal(signed_at, key="another") == "SignatureDoesNotMatch"
    assert refusal(signed_at, path=url.path.replace("v1", "v2")) == "SignatureDoesNotMatch"
    assert refusal(signed_at, query=url.query.replace("X-Amz-Expires=600", "X-Amz-Expires=6000")) == (
        "SignatureDoesNotMatch"
    )
    boto = boto3.client(
        "s3",
        endpoint_url="http://127.0.0.1:9",
        region_name="us-east-1",
        aws_access_key_id="x",
        aws_secret_access_key=secret,
        config=Config(signature_version="s3v4"),
    )
    theirs = urlsplit(
        boto.generate_presigned_url(
            "put_object", Params={"Bucket": TASK_DATA_BUCKET, "Key": "k/o.bin"}, ExpiresIn=60
        )
    )
    assert sigv4_refusal("PUT", theirs.path, theirs.query, {"host": theirs.netloc}, secret=secret) is None
