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

One module per concept: ``_sigv4.py`` checks signatures and bodies and presigns URLs (pure
functions of a request), ``_store.py`` keeps one bucket's objects as files (no HTTP),
``_server.py`` is the HTTP endpoint over both, and ``_buckets.py`` names the buckets, places them
under the data dir and is what the rest of the server calls (screenshots, task data, presigned
URLs); this package exports that and the endpoint's ``lifespan``.
"""

from ._buckets import (
    BUCKET,
    PRESIGN_ACCESS_KEY,
    TASK_DATA_BUCKET,
    presigned_get_url,
    presigned_put_url,
    public_object_url,
    put_public_object,
    task_data_object,
    task_data_objects,
)
from ._server import lifespan
from ._sigv4 import REGION
from ._store import StoredObject

__all__ = [
    "BUCKET",
    "PRESIGN_ACCESS_KEY",
    "REGION",
    "TASK_DATA_BUCKET",
    "StoredObject",
    "lifespan",
    "presigned_get_url",
    "presigned_put_url",
    "public_object_url",
    "put_public_object",
    "task_data_object",
    "task_data_objects",
]
