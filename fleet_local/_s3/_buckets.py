"""The endpoint's two buckets, where they live on disk, and what the server does with them itself.

The rest of the server never speaks S3 to its own endpoint: it writes screenshots into the
public bucket, lists and reads task data, and hands out presigned URLs with the functions
here, which work on the bucket directories under ``<data_dir>/s3/`` directly (blocking: run
them in a worker thread).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from urllib.parse import quote

from .._state import LocalState
from ._sigv4 import presigned_url
from ._store import ObjectStore, StoredObject

BUCKET = "fleet-sessions-images"
"""The screenshot bucket: its objects are readable without a signature."""
TASK_DATA_BUCKET = "fleet-task-data"
"""The task-data bucket (seed archives, file sets): every request signed, reads included."""
PUBLIC_BUCKETS = frozenset({BUCKET})
TASK_DATA_PREFIXES = ("seeds/", "file-sets/")
"""Keys that are task data: refused in the screenshot bucket, moved out of it on start."""
MAX_LIST_KEYS = 1000
"""The most keys one listing answers (S3's own limit)."""
PRESIGN_ACCESS_KEY = "fleet-local"
"""The access key id of the URLs the server presigns (the secret is what counts)."""


def bucket_dir(data_dir: Path, bucket: str) -> Path:
    """The directory of ``bucket``'s objects.

    Args:
        data_dir: The server's data directory.
        bucket: The bucket's name.
    """
    return data_dir / "s3" / bucket


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
    ObjectStore(bucket_dir(state.settings.data_dir, BUCKET)).put(key, data, content_type)
    return url


def task_data_object(state: LocalState, key: str) -> StoredObject | None:
    """An object of the task-data bucket, or None when there is none (blocking: reads the disk).

    Args:
        state: The server state.
        key: Object key, e.g. ``seeds/<env>/<data_key>/v1/seed.tar.zst``.
    """
    return ObjectStore(bucket_dir(state.settings.data_dir, TASK_DATA_BUCKET)).head(key)


def task_data_objects(state: LocalState, prefix: str) -> list[StoredObject]:
    """The task-data objects whose key starts with ``prefix``, by key, at most 1000 (blocking).

    Args:
        state: The server state.
        prefix: Key prefix, e.g. ``file-sets/<key>/``.
    """
    store = ObjectStore(bucket_dir(state.settings.data_dir, TASK_DATA_BUCKET))
    return store.list(prefix, "", MAX_LIST_KEYS)[0]


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
    """An S3 presigned URL of a task-data object, signed with the server's API key."""
    if state.s3_url is None:
        raise RuntimeError("the local S3 endpoint is not running (server started with --no-s3)")
    # The path as a client sends it (S3's canonical URI), so the signature holds for any key.
    url = f"{state.s3_url}/{TASK_DATA_BUCKET}/{quote(key.lstrip('/'), safe='/-_.~')}"
    return presigned_url(
        method,
        url,
        access_key=PRESIGN_ACCESS_KEY,
        secret=state.settings.api_key or "",
        expires=expires,
        now=now,
    )
