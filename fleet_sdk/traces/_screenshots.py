"""Where screenshots go: a public-read S3 bucket the trace viewer can ``<img src>`` without auth.

Production (docs/wire.md#traces): bucket ``fleet-sessions-images`` in ``us-east-1``, objects at
``https://fleet-sessions-images.s3.us-east-1.amazonaws.com/<key>``. Credentials come from the
usual AWS chain (environment, shared config, instance role) unless given explicitly.

boto3 is imported only when the first screenshot is uploaded, so ``import fleet_sdk`` and a
trace without images never load it (install the ``s3`` extra to upload screenshots).
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Protocol, runtime_checkable

from .._exceptions import FleetError

__all__ = [
    "DEFAULT_BUCKET",
    "DEFAULT_PUBLIC_URL_BASE",
    "DEFAULT_REGION",
    "DISCOVERY_PATH",
    "DiscoveredScreenshotStore",
    "ScreenshotSink",
    "ScreenshotStore",
]

log = logging.getLogger("fleet_sdk.traces")

DEFAULT_BUCKET = "fleet-sessions-images"
DEFAULT_REGION = "us-east-1"
DEFAULT_PUBLIC_URL_BASE = f"https://{DEFAULT_BUCKET}.s3.{DEFAULT_REGION}.amazonaws.com"

_ACL_UNSUPPORTED = frozenset({"AccessControlListNotSupported", "AccessControlListNotSupportedException"})


@runtime_checkable
class ScreenshotSink(Protocol):
    """Anything that stores screenshot bytes under a key and returns their public URL.

    ``ScreenshotStore`` is the S3 implementation; tests pass fakes. ``upload`` is blocking
    (it is run in worker threads) and raises on failure.
    """

    def upload(self, key: str, data: bytes, mime: str) -> str:
        """Store ``data`` at ``key`` (unless already there) and return its public URL.

        Args:
            key: Content-addressed object key (``harness/screenshot/<sha>.<ext>``).
            data: The image bytes.
            mime: The image MIME type.
        """
        ...


class ScreenshotStore:
    """The S3 screenshot bucket: content-addressed, uploaded once, publicly readable.

    Before uploading, an in-process cache of keys known to exist is checked, then
    ``head_object``: a screenshot repeated within or across sessions is put once. Safe to
    share between threads and sessions.

    Args:
        bucket: Bucket name.
        region: Bucket region.
        endpoint_url: S3 endpoint (None: AWS; e.g. the local server's ``s3_url``).
        public_url_base: URL objects are read at, without the key (default: the bucket's
            virtual-host URL ``https://<bucket>.s3.<region>.amazonaws.com``).
        addressing_style: ``"path"``, ``"virtual"`` or None (botocore's choice).
        acl: Canned ACL sent with each put (``"public-read"``); None sends none. A bucket
            with ACLs disabled rejects it, and the store then retries without it.
        max_concurrency: Uploads run at once for one session.
        connect_timeout: Seconds to connect to S3.
        read_timeout: Seconds to wait for an S3 response.
        aws_access_key_id: Explicit credentials (None: the AWS credential chain).
        aws_secret_access_key: Explicit credentials (None: the AWS credential chain).
        aws_session_token: Explicit session token.
        client: A ready boto3 S3 client to use instead of building one.
    """

    def __init__(
        self,
        *,
        bucket: str = DEFAULT_BUCKET,
        region: str = DEFAULT_REGION,
        endpoint_url: str | None = None,
        public_url_base: str | None = None,
        addressing_style: str | None = None,
        acl: str | None = "public-read",
        max_concurrency: int = 8,
        connect_timeout: float = 10.0,
        read_timeout: float = 60.0,
        aws_access_key_id: str | None = None,
        aws_secret_access_key: str | None = None,
        aws_session_token: str | None = None,
        client: Any = None,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError(f"max_concurrency must be at least 1, got {max_concurrency}")
        self.bucket = bucket
        self.region = region
        self.endpoint_url = endpoint_url
        self.public_url_base = (public_url_base or f"https://{bucket}.s3.{region}.amazonaws.com").rstrip("/")
        self.addressing_style = addressing_style
        self.acl = acl
        self.max_concurrency = max_concurrency
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self._credentials = {
            "aws_access_key_id": aws_access_key_id,
            "aws_secret_access_key": aws_secret_access_key,
            "aws_session_token": aws_session_token,
        }
        self._client = client
        self._lock = threading.Lock()
        self._key_locks: dict[str, threading.Lock] = {}
        self._known: set[str] = set()
        self.uploads = 0
        """Objects put by this store (``put_object`` calls that succeeded)."""
        self.existing = 0
        """Keys found already in the bucket by ``head_object`` (not uploaded again)."""

    @classmethod
    def for_endpoint(
        cls,
        endpoint_url: str,
        *,
        bucket: str = DEFAULT_BUCKET,
        region: str = DEFAULT_REGION,
        **kwargs: Any,
    ) -> ScreenshotStore:
        """A store for an S3-compatible endpoint such as the local server's ``s3_url``.

        Path-style addressing, dummy credentials (unless given; the local server's endpoint
        wants its API key as the secret, see ``LocalFleet.screenshot_store``), objects read at
        ``<endpoint_url>/<bucket>/<key>``.

        Args:
            endpoint_url: The endpoint, e.g. ``LocalFleet.s3_url``.
            bucket: Bucket name.
            region: Region name.
            **kwargs: Other ``ScreenshotStore`` arguments.
        """
        base = endpoint_url.rstrip("/")
        kwargs.setdefault("public_url_base", f"{base}/{bucket}")
        kwargs.setdefault("addressing_style", "path")
        kwargs.setdefault("aws_access_key_id", "testing")
        kwargs.setdefault("aws_secret_access_key", "testing")
        return cls(bucket=bucket, region=region, endpoint_url=base, **kwargs)

    def __repr__(self) -> str:
        return (
            f"ScreenshotStore(bucket={self.bucket!r}, region={self.region!r}, "
            f"endpoint_url={self.endpoint_url!r}, public_url_base={self.public_url_base!r})"
        )

    def public_url(self, key: str) -> str:
        """The public URL of an object.

        Args:
            key: The object key.
        """
        return f"{self.public_url_base}/{key.lstrip('/')}"

    def _s3(self) -> Any:
        with self._lock:
            if self._client is None:
                import boto3
                from botocore.config import Config

                # The regional host of docs/wire.md#traces (``<bucket>.s3.us-east-1.amazonaws.com``),
                # not botocore's legacy global endpoint for us-east-1.
                s3_options: dict[str, Any] = {"us_east_1_regional_endpoint": "regional"}
                if self.addressing_style:
                    s3_options["addressing_style"] = self.addressing_style
                config = Config(
                    region_name=self.region,
                    connect_timeout=self.connect_timeout,
                    read_timeout=self.read_timeout,
                    max_pool_connections=max(10, self.max_concurrency),
                    retries={"max_attempts": 3, "mode": "standard"},
                    s3=s3_options,
                )
                credentials = {k: v for k, v in self._credentials.items() if v is not None}
                session = boto3.session.Session()
                self._client = session.client(
                    "s3", endpoint_url=self.endpoint_url, config=config, **credentials
                )
            return self._client

    def _key_lock(self, key: str) -> threading.Lock:
        with self._lock:
            lock = self._key_locks.get(key)
            if lock is None:
                lock = self._key_locks[key] = threading.Lock()
            return lock

    def _exists(self, client: Any, key: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            client.head_object(Bucket=self.bucket, Key=key)
        except ClientError:
            # 404 (not there) or 403 (no read permission): either way, try to put it.
            return False
        return True

    def _put(self, client: Any, key: str, data: bytes, mime: str) -> None:
        from botocore.exceptions import ClientError

        params: dict[str, Any] = {"Bucket": self.bucket, "Key": key, "Body": data, "ContentType": mime}
        if self.acl:
            params["ACL"] = self.acl
        try:
            client.put_object(**params)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if not self.acl or code not in _ACL_UNSUPPORTED:
                raise
            # The bucket has ACLs disabled (public via bucket policy): stop sending one.
            log.info("bucket %s does not accept ACLs; uploading without one", self.bucket)
            self.acl = None
            params.pop("ACL")
            client.put_object(**params)

    def upload(self, key: str, data: bytes, mime: str) -> str:
        """Store a screenshot unless it is already there; return its public URL (blocking).

        Args:
            key: Content-addressed object key.
            data: The image bytes.
            mime: The image MIME type (sent as ``Content-Type``).

        Raises:
            Exception: Whatever boto3 raises when the object cannot be stored.
        """
        url = self.public_url(key)
        if key in self._known:
            return url
        with self._key_lock(key):  # two sessions with the same new screenshot put it once
            if key in self._known:
                return url
            client = self._s3()
            exists = self._exists(client, key)
            if not exists:
                self._put(client, key, data, "image/jpeg" if mime == "image/jpg" else mime)
            with self._lock:
                if exists:
                    self.existing += 1
                else:
                    self.uploads += 1
                self._known.add(key)
        return url


DISCOVERY_PATH = "/v1/discovery"
"""Where a non-production server says where its other surfaces are (``get_discovery``)."""


class ScreenshotsUnavailableError(FleetError):
    """The server stores no screenshots (or could not say where): they keep their data URLs.

    Raised by ``DiscoveredScreenshotStore.upload`` only; ``upload_session`` logs it, never raises.
    """


class DiscoveredScreenshotStore:
    """The screenshot store of a non-production server, learned from its ``GET /v1/discovery``.

    The default store of a client whose ``base_url`` is not the production orchestrator: its key
    must never sign a request to the production bucket. The route is asked once, on the first
    upload (in the upload's worker thread), and the answer kept; until it answers, or when it
    names no bucket (a server without S3, or one that does not serve the route), uploads fail and
    screenshots keep their data URLs. A 5xx or a refused connection is asked again next time.

    Args:
        base_url: The server (the client's ``base_url``).
        api_key: The client's key: the bearer for the route, and the S3 secret.
        timeout: Seconds for the discovery request.
    """

    def __init__(self, base_url: str, api_key: str | None, *, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._timeout = timeout
        self._lock = threading.Lock()
        self._answered = False
        self._store: ScreenshotStore | None = None
        self._why = "not asked yet"

    def __repr__(self) -> str:
        return f"DiscoveredScreenshotStore(base_url={self.base_url!r}, store={self._store!r})"

    def resolve(self) -> ScreenshotStore | None:
        """The store the server names (asking it the first time), or None when it names none.

        Raises:
            ScreenshotsUnavailableError: The server could not be asked (it will be next time).
        """
        with self._lock:
            if not self._answered:
                self._ask()
            return self._store

    def _ask(self) -> None:
        import httpx

        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        try:
            response = httpx.get(self.base_url + DISCOVERY_PATH, headers=headers, timeout=self._timeout)
        except httpx.HTTPError as exc:
            raise ScreenshotsUnavailableError(
                f"could not ask {self.base_url}{DISCOVERY_PATH} where screenshots go: {type(exc).__name__}"
            ) from None
        if response.status_code >= 500 or response.status_code == 429:
            raise ScreenshotsUnavailableError(
                f"{self.base_url}{DISCOVERY_PATH} answered {response.status_code}; asked again next upload"
            )
        self._answered = True
        if response.status_code != 200:
            self._why = f"{self.base_url}{DISCOVERY_PATH} answered {response.status_code}"
            log.warning("screenshots stay data URLs: %s (no bucket known for this server)", self._why)
            return
        bucket = (response.json() or {}).get("screenshots")
        if not bucket:
            self._why = f"{self.base_url} stores no screenshots"
            return
        self._store = ScreenshotStore.for_endpoint(
            bucket["endpoint_url"],
            bucket=bucket["bucket"],
            region=bucket["region"],
            public_url_base=bucket["public_url_base"],
            aws_access_key_id=bucket["access_key_id"],
            aws_secret_access_key=self._api_key,
        )

    def upload(self, key: str, data: bytes, mime: str) -> str:
        """Upload to the server's bucket (see the class docstring).

        Args:
            key: The object key.
            data: The image bytes.
            mime: The image MIME type.

        Raises:
            ScreenshotsUnavailableError: The server names no bucket (the screenshot keeps its data URL).
        """
        store = self.resolve()
        if store is None:
            raise ScreenshotsUnavailableError(self._why)
        return store.upload(key, data, mime)
