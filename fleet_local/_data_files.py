"""Task data files on the control plane: seed archives and file sets, kept on the local S3 endpoint.

The public SDK's task tooling moves a task's data files with these routes (``schemas/env-instance.yaml``,
"task data files"): ``upload-url`` registers a new version of a data key for an environment and
hands out a presigned ``PUT`` URL (``_s3.presigned_put_url``); ``download-url`` answers a presigned
``GET`` URL of the latest version whose archive was really uploaded; a file set is the objects under
``file-sets/<key>/``, put there with any S3 client signed with the server's key, each answered as a
presigned ``GET`` URL valid for the request's ``expires_in``. Both live in the S3 endpoint's
task-data bucket, which answers no unsigned read: seed data and file sets may hold a task's
answers. The server only stores the bytes: instances are seeded from their environment's own
data, whatever ``data_key`` they name.

Versions of a data key are a ``"seed_archive"`` document per ``(env_key, data_key)``. Every route
answers 503 ``s3_unavailable`` on a server started without S3.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path

from fleet_sdk.types import env_instance as models

from . import _instances, _s3
from ._errors import LocalAPIError, not_found
from ._state import LocalState, iso

__all__ = ["SEED_KIND", "router"]

SEED_KIND = "seed_archive"
UPLOAD_URL_SECONDS = 3600
"""How long an upload URL stays valid."""
DOWNLOAD_URL_SECONDS = 3600
"""How long a seed archive's download URL stays valid."""

Name = Annotated[str, Path(pattern=r"^[A-Za-z0-9._-]+$", max_length=255)]
"""A path segment that becomes part of an object key (``DataKeyPath`` in the schema)."""


def _require_s3(state: LocalState) -> None:
    if state.s3_url is None:
        raise LocalAPIError(
            503, "this server runs without its S3 endpoint (--no-s3): no data files", code="s3_unavailable"
        )


def _answer(data_key: str, env_key: str, entry: dict[str, str | None], url: str) -> models.SeedURLResponse:
    return models.SeedURLResponse(
        url=url,
        data_key=data_key,
        env_key=env_key,
        version=str(entry["version"]),
        s3_key=str(entry["s3_key"]),
        env_version=entry.get("env_version"),
    )


def router(state: LocalState) -> APIRouter:
    """The data-file routes (bearer auth and body validation are added by the app)."""
    api = APIRouter(tags=["control-plane"])

    @api.post("/v1/seeds/{data_key}/{env_key}/upload-url", response_model=models.SeedURLResponse)
    def create_seed_upload_url(
        data_key: Name, env_key: str, body: models.SeedUploadRequest
    ) -> models.SeedURLResponse:
        """Register the next version of ``data_key`` and answer where to ``PUT`` its archive."""
        _require_s3(state)
        _instances.environment(state, env_key, status=404)
        record_id = f"{env_key}/{data_key}"
        with state.store.locks.hold(SEED_KIND, record_id):  # one new version of a data key at a time
            record = state.store.get(SEED_KIND, record_id) or {
                "env_key": env_key,
                "data_key": data_key,
                "versions": [],
            }
            version = f"v{len(record['versions']) + 1}"
            entry: dict[str, str | None] = {
                "version": version,
                "s3_key": f"seeds/{env_key}/{data_key}/{version}/{body.filename}",
                "env_version": _instances.normalize_version(body.env_version),
                "created_at": iso(),
            }
            record["versions"].append(entry)
            state.store.put(SEED_KIND, record_id, record)
        url = _s3.presigned_put_url(state, str(entry["s3_key"]), UPLOAD_URL_SECONDS)
        return _answer(data_key, env_key, entry, url)

    @api.post("/v1/seeds/{data_key}/{env_key}/download-url", response_model=models.SeedURLResponse)
    def create_seed_download_url(data_key: Name, env_key: str) -> models.SeedURLResponse:
        """The latest uploaded archive of ``data_key`` (404 when none was uploaded)."""
        _require_s3(state)
        _instances.environment(state, env_key, status=404)
        record = state.store.get(SEED_KIND, f"{env_key}/{data_key}") or {"versions": []}
        for entry in reversed(record["versions"]):  # a version whose PUT never came has no object
            if _s3.task_data_object(state, str(entry["s3_key"])) is not None:
                url = _s3.presigned_get_url(state, str(entry["s3_key"]), DOWNLOAD_URL_SECONDS)
                return _answer(data_key, env_key, entry, url)
        raise not_found("seed archive", f"{data_key}/{env_key}")

    @api.post("/v1/file-sets/{file_set_key}/download-urls", response_model=models.FileSetDownloadResponse)
    def create_file_set_download_urls(
        file_set_key: Name, body: models.FileSetDownloadRequest
    ) -> models.FileSetDownloadResponse:
        """The files under ``file-sets/<file_set_key>/`` with URLs valid for ``expires_in`` seconds
        (404 when there is none)."""
        _require_s3(state)
        prefix = f"file-sets/{file_set_key}/"
        files = _s3.task_data_objects(state, prefix)
        if not files:
            raise not_found("file set", file_set_key)
        urls = [
            models.FileDownloadURL(
                filename=item.key[len(prefix) :],
                url=_s3.presigned_get_url(state, item.key, body.expires_in),
            )
            for item in files
        ]
        return models.FileSetDownloadResponse(file_set_key=file_set_key, urls=urls)

    return api
