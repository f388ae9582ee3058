"""Seed archives and file sets are read only through a signature; screenshots stay public.

Regression: seed archives (``/v1/seeds/{data_key}/{env_key}/upload-url``) and file sets were kept
in the screenshot bucket, which answers anonymous ``GET`` s, under keys anyone could guess
(``seeds/<env>/<data_key>/v<N>/<file>``, ``file-sets/<key>/<name>``): after a presigned upload, a
plain ``GET`` of that path returned the archive with 200, to any local user. Task data may hold a
task's answers or personal data. It now lives in a bucket of its own that refuses every unsigned
request, and the download routes answer presigned ``GET`` URLs the S3 endpoint checks (the
server's key, the method, the object, the expiry).
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast
from urllib.parse import parse_qsl, urlsplit

import boto3
import httpx
import pytest
from botocore.exceptions import ClientError

from fleet_local import LocalFleet
from fleet_local._s3 import BUCKET, TASK_DATA_BUCKET, presigned_get_url, task_data_objects
from fleet_local._s3._server import S3Endpoint
from fleet_local._s3._store import ObjectStore
from fleet_sdk import Fleet

ENV = "orderdesk"


def s3_code(answer: httpx.Response) -> str:
    """The S3 error code of a refusal."""
    start = answer.text.index("<Code>") + len("<Code>")
    return answer.text[start : answer.text.index("</Code>")]


def server_like(s3_url: str | None, api_key: str | None, data_dir: Path | None = None) -> Any:
    """What ``presigned_get_url`` and ``task_data_objects`` need of a server's state."""
    settings = SimpleNamespace(api_key=api_key, data_dir=data_dir)
    return cast(Any, SimpleNamespace(s3_url=s3_url, settings=settings))


def assert_unreadable_without_its_signature(local: LocalFleet, url: str, key: str) -> None:
    """``url`` is the presigned URL of task-data object ``key``: nothing else reads the object."""
    assert local.s3_url is not None
    plain = f"{local.s3_url}/{TASK_DATA_BUCKET}/{key}"
    anonymous = httpx.get(plain)
    assert anonymous.status_code == 403 and s3_code(anonymous) == "AccessDenied"
    assert "presigned URL" in anonymous.text  # says how to read it
    assert httpx.head(plain).status_code == 403
    # Not in the public bucket either (where it used to be).
    assert httpx.get(f"{local.s3_url}/{BUCKET}/{key}").status_code == 404
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    wrong = url.replace(query["X-Amz-Signature"], "0" * 64)
    refused = httpx.get(wrong)
    assert refused.status_code == 403 and s3_code(refused) == "SignatureDoesNotMatch"
    longer = url.replace(f"X-Amz-Expires={query['X-Amz-Expires']}", "X-Amz-Expires=604800")
    assert s3_code(httpx.get(longer)) == "SignatureDoesNotMatch"  # the expiry is signed
    # Signed with the server's key, but two hours ago for a minute.
    two_hours_ago = dt.datetime.now(dt.UTC) - dt.timedelta(hours=2)
    stale = presigned_get_url(server_like(local.s3_url, local.api_key), key, 60, now=two_hours_ago)
    expired = httpx.get(stale)
    assert expired.status_code == 403 and "expired" in expired.text
    forged = httpx.get(presigned_get_url(server_like(local.s3_url, "not-the-key"), key, 60))
    assert forged.status_code == 403 and s3_code(forged) == "SignatureDoesNotMatch"
    assert httpx.head(url).status_code == 403  # signed for GET, not another method
    assert httpx.put(url, content=b"overwrite").status_code == 403


def test_a_presigned_uploaded_seed_is_read_back_only_with_the_download_url(
    fleet: Fleet, local: LocalFleet
) -> None:
    cp = fleet.api.control_plane
    data_key = f"private-{uuid.uuid4().hex[:8]}"
    upload = cp.create_seed_upload_url(data_key, ENV, filename="seed.tar.zst")
    archive = b"answers: " + uuid.uuid4().bytes * 50
    assert httpx.put(upload.url, content=archive).status_code == 200
    assert httpx.get(upload.url).status_code == 403  # the upload URL is signed for PUT only
    download = cp.create_seed_download_url(data_key, ENV)
    assert download.s3_key == upload.s3_key
    assert_unreadable_without_its_signature(local, download.url, download.s3_key)
    fetched = httpx.get(download.url)
    assert fetched.status_code == 200 and fetched.content == archive
    assert "access-control-allow-origin" not in fetched.headers  # no page of another origin reads it


def test_a_file_set_is_read_only_through_the_urls_the_route_answers(fleet: Fleet, local: LocalFleet) -> None:
    assert local.s3_url is not None and local.api_key is not None
    s3 = boto3.client(
        "s3",
        endpoint_url=local.s3_url,
        region_name="us-east-1",
        aws_access_key_id="any",
        aws_secret_access_key=local.api_key,
    )
    set_key = f"set-{uuid.uuid4().hex[:8]}"
    key = f"file-sets/{set_key}/answers.json"
    s3.put_object(Bucket=TASK_DATA_BUCKET, Key=key, Body=b'{"answer": 42}')
    assert s3.get_object(Bucket=TASK_DATA_BUCKET, Key=key)["Body"].read() == b'{"answer": 42}'  # signed
    listed = fleet.api.control_plane.create_file_set_download_urls(set_key, expires_in=120)
    (item,) = listed.urls
    assert item.filename == "answers.json"
    assert dict(parse_qsl(urlsplit(item.url).query))["X-Amz-Expires"] == "120"  # as asked
    assert_unreadable_without_its_signature(local, item.url, key)
    assert httpx.get(item.url).content == b'{"answer": 42}'
    # Task data put in the public bucket by habit is refused, not published.
    with pytest.raises(ClientError) as refused:
        s3.put_object(Bucket=BUCKET, Key=f"file-sets/{set_key}/more.json", Body=b"{}")
    assert refused.value.response["Error"]["Code"] == "AccessDenied"
    assert TASK_DATA_BUCKET in refused.value.response["Error"]["Message"]


def test_screenshots_stay_public_beside_the_private_bucket(local: LocalFleet) -> None:
    key = f"harness/screenshot/{uuid.uuid4().hex}.png"
    url = local.screenshot_store().upload(key, b"\x89PNG\r\n\x1a\npixels", "image/png")
    assert url == f"{local.s3_url}/{BUCKET}/{key}"
    public = httpx.get(url)
    assert public.status_code == 200 and public.content == b"\x89PNG\r\n\x1a\npixels"
    assert public.headers["access-control-allow-origin"] == "*"
    assert httpx.get(f"{local.s3_url}/{TASK_DATA_BUCKET}/{key}").status_code == 403  # and not there


def test_task_data_an_older_server_kept_public_moves_to_the_private_bucket(tmp_path: Path) -> None:
    """A data dir written before the task-data bucket existed: at start its seeds and file sets
    leave the public bucket (screenshots stay), including one a crash left half-moved."""
    public = ObjectStore(tmp_path / "s3" / BUCKET)
    seed = "seeds/orderdesk/old/v1/seed.tar.zst"
    public.put(seed, b"seed bytes", "binary/octet-stream")
    public.put("file-sets/old/a.txt", b"file bytes", "text/plain")
    public.put("harness/screenshot/s.png", b"png", "image/png")
    public.put("file-sets/old/half.txt", b"half", "text/plain")
    name = ObjectStore._name("file-sets/old/half.txt")
    private_dir = tmp_path / "s3" / TASK_DATA_BUCKET
    (private_dir / "objects").mkdir(parents=True)
    (public.root / "objects" / name).rename(private_dir / "objects" / name)  # bytes moved, meta not
    endpoint = S3Endpoint("127.0.0.1", tmp_path, "sk-moved")
    url = endpoint.start()
    try:
        for key in (seed, "file-sets/old/a.txt", "file-sets/old/half.txt"):
            assert httpx.get(f"{url}/{BUCKET}/{key}").status_code == 404, key
            assert httpx.get(f"{url}/{TASK_DATA_BUCKET}/{key}").status_code == 403, key
        assert httpx.get(f"{url}/{BUCKET}/harness/screenshot/s.png").content == b"png"
        state = server_like(url, "sk-moved", tmp_path)
        assert httpx.get(presigned_get_url(state, seed, 60)).content == b"seed bytes"
        assert httpx.get(presigned_get_url(state, "file-sets/old/half.txt", 60)).content == b"half"
        assert [o.key for o in task_data_objects(state, "file-sets/old/")] == [
            "file-sets/old/a.txt",
            "file-sets/old/half.txt",
        ]
    finally:
        endpoint.stop()
    assert (private_dir.stat().st_mode & 0o777) == 0o700  # private on disk too
    assert json.loads((tmp_path / "s3" / "endpoint.json").read_text())["port"] == urlsplit(url).port
