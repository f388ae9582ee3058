"""``fleet.traces``: trace jobs (platform host) and session uploads with screenshots (orchestrator).

``create_job`` is ``POST {platform}/v1/traces/jobs``; ``upload_session`` uploads the episode's
screenshots to the public bucket, rewrites the chat history for the viewer (``_rewrite``) and
posts it to ``POST {orchestrator}/v1/sessions/ingest``. The two hosts differ on purpose: once
they were collapsed and a whole training run uploaded nothing (docs/wire.md#traces).

An upload never fails a rollout: every error (S3, HTTP, validation) is logged and
``upload_session`` returns None. Async is the source; ``Traces`` runs it on the loop bridge.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

import anyio

from .._runtime import FleetConfig
from .._runtime._config import ORCHESTRATOR_URL
from .._twin import sync_method
from ._rewrite import DataImage, collect_data_images, rewrite_chat_history
from ._screenshots import DiscoveredScreenshotStore, ScreenshotSink, ScreenshotStore

if TYPE_CHECKING:
    from .._api import AsyncAPIOwner, SyncAPIOwner

__all__ = ["AsyncTraces", "SessionStatus", "Traces", "upload_screenshots"]

log = logging.getLogger("fleet_sdk.traces")

SessionStatus = Literal["pending", "running", "completed", "timed_out", "errored", "failed"]

_DEFAULT_CONCURRENCY = 8


def _describe(exc: BaseException) -> str:
    """A short, secret-free description of an error for the log."""
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__


async def upload_screenshots(
    images: Mapping[str, DataImage], store: ScreenshotSink, *, max_concurrency: int | None = None
) -> dict[str, str]:
    """Upload decoded screenshots concurrently (in worker threads, bounded) and map their URLs.

    Each distinct key is uploaded once. A failed upload is logged and left out of the map, so
    its blocks keep their data URL; the others go on.

    Args:
        images: ``{data_url: DataImage}``, e.g. from ``collect_data_images``.
        store: Where to put them.
        max_concurrency: Uploads at once (default: the store's ``max_concurrency``, else 8).

    Returns:
        ``{data_url: public_url}`` for every screenshot that was stored.
    """
    by_key: dict[str, tuple[DataImage, list[str]]] = {}
    for url, image in images.items():
        by_key.setdefault(image.key, (image, []))[1].append(url)
    limit = max_concurrency or getattr(store, "max_concurrency", None) or _DEFAULT_CONCURRENCY
    limiter = anyio.CapacityLimiter(limit)
    mapping: dict[str, str] = {}
    failures: list[str] = []

    async def one(image: DataImage, urls: list[str]) -> None:
        try:
            public = await anyio.to_thread.run_sync(
                store.upload, image.key, image.data, image.mime, limiter=limiter
            )
        except Exception as exc:
            failures.append(f"{image.key}: {_describe(exc)}")
            return
        for url in urls:
            mapping[url] = public

    async with anyio.create_task_group() as group:
        for image, urls in by_key.values():
            group.start_soon(one, image, urls)
    if failures:
        log.warning(
            "%d of %d screenshots could not be uploaded and keep their data URL (first: %s)",
            len(failures),
            len(by_key),
            failures[0],
        )
    return mapping


class _StoreSlot:
    """The screenshot store setting ``AsyncTraces`` and ``Traces`` share."""

    _store: ScreenshotSink | None

    def _client_config(self) -> FleetConfig | None:
        raise NotImplementedError

    @property
    def screenshot_store(self) -> ScreenshotSink:
        """The default screenshot store, unless set: the production bucket for a client of the
        production orchestrator, else the bucket its server names (``DiscoveredScreenshotStore``)."""
        if self._store is None:
            config = self._client_config()
            if config is not None and config.base_url != ORCHESTRATOR_URL:
                self._store = DiscoveredScreenshotStore(config.base_url, config.api_key)
            else:
                self._store = ScreenshotStore()
        return self._store

    @screenshot_store.setter
    def screenshot_store(self, store: ScreenshotSink | None) -> None:
        self._store = store

    @property
    def configured_store(self) -> ScreenshotSink | None:
        """The store given, assigned or built, without building the default (None if none yet)."""
        return self._store


class AsyncTraces(_StoreSlot):
    """Trace jobs and session uploads (async); ``fleet.traces`` on an ``AsyncFleet``.

    Args:
        fleet: The client whose ``api.traces`` / ``api.sessions`` are used.
        screenshot_store: Where screenshots go (default, built on first use: the production
            bucket with the AWS credential chain for a client of the production orchestrator, else
            the bucket its server names, ``DiscoveredScreenshotStore``).

    Attributes:
        screenshot_store: The store used when ``upload_session`` is not given one; assign
            a ``ScreenshotStore`` (or any ``ScreenshotSink``) to change it.
    """

    def __init__(self, fleet: AsyncAPIOwner, screenshot_store: ScreenshotSink | None = None) -> None:
        self._fleet = fleet
        self._store = screenshot_store

    def __repr__(self) -> str:
        return f"AsyncTraces(screenshot_store={self._store!r})"

    def _client_config(self) -> FleetConfig | None:
        config = getattr(self._fleet, "config", None)
        return config if isinstance(config, FleetConfig) else None

    async def create_job(self, name: str) -> str:
        """Create a trace job on the platform host (``POST /v1/traces/jobs``) and return its id.

        Pass the id as ``job_id`` to ``upload_session`` for every session of the run. Unlike
        uploads, this raises: a run whose job could not be created would otherwise upload
        nothing without anyone noticing.

        Args:
            name: Display name of the job (e.g. the training run name).

        Raises:
            FleetError: The job could not be created (HTTP or validation error).
        """
        from fleet_generated.traces_jobs import models

        job = await self._fleet.api.traces.create_trace_job(models.TraceJobRequest(name=name))
        return job.job_id

    async def prepare_messages(
        self, chat_history: Sequence[Mapping[str, Any]], *, screenshot_store: ScreenshotSink | None = None
    ) -> list[dict[str, Any]]:
        """Upload the history's screenshots and return it rewritten for the viewer (no HTTP ingest).

        A failed screenshot upload leaves that block as it was.

        Args:
            chat_history: The model's chat history (not changed).
            screenshot_store: Where screenshots go (default: ``self.screenshot_store``).
        """
        images = collect_data_images(chat_history)
        url_map: dict[str, str] = {}
        if images:
            url_map = await upload_screenshots(images, screenshot_store or self.screenshot_store)
        return rewrite_chat_history(chat_history, url_map)

    async def upload_session(
        self,
        *,
        job_id: str,
        task_key: str,
        model: str,
        chat_history: Sequence[Mapping[str, Any]],
        reward: float | None,
        instance_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        verifier_execution_id: str | None = None,
        session_id: str | None = None,
        status: SessionStatus | None = None,
        started_at: datetime | None = None,
        ended_at: datetime | None = None,
        screenshot_store: ScreenshotSink | None = None,
    ) -> str | None:
        """Upload one rollout as a session of a trace job; never raises.

        Screenshots (``data:image/...;base64,`` URLs) go to the public bucket and are replaced by
        their public URLs, user messages with images become ``tool`` messages, turn footers are
        dropped (see ``fleet_sdk.traces._rewrite``); the caller's history is not changed. The
        session is posted to the orchestrator's ``POST /v1/sessions/ingest``.

        Args:
            job_id: The trace job (``create_job``).
            task_key: The task the rollout ran.
            model: The model id that produced it.
            chat_history: The OpenAI-shape chat history.
            reward: The reward, sent as ``metadata.score``; None stays null (unknown, not 0.0).
            instance_id: The env instance it ran on.
            metadata: More metadata to store (its ``score`` is replaced by ``reward``).
            verifier_execution_id: The verifier run that graded it; the dashboard's pass rate
                only counts sessions that carry it.
            session_id: An existing session to append to.
            status: Session status (the server's default when None).
            started_at: When the rollout started (timezone-aware).
            ended_at: When the rollout ended (timezone-aware).
            screenshot_store: Where screenshots go (default: ``self.screenshot_store``).

        Returns:
            The session id, or None when anything failed (the reason is logged).
        """
        try:
            from fleet_generated.sessions_ingest import models

            messages = await self.prepare_messages(chat_history, screenshot_store=screenshot_store)
            body: dict[str, Any] = {
                "messages": messages,
                "job_id": job_id,
                "task_key": task_key,
                "model": model,
                "metadata": {**dict(metadata or {}), "score": reward},
            }
            optional = {
                "instance_id": instance_id,
                "verifier_execution_id": verifier_execution_id,
                "session_id": session_id,
                "status": status,
                "started_at": started_at,
                "ended_at": ended_at,
            }
            body.update({name: value for name, value in optional.items() if value is not None})
            request = models.SessionIngestRequest.model_validate(body)
            response = await self._fleet.api.sessions.ingest_session(request)
        except Exception as exc:
            log.warning("trace upload of task %s (job %s) failed: %s", task_key, job_id, _describe(exc))
            return None
        if not response.success:
            log.warning("trace upload of task %s (job %s) was not stored", task_key, job_id)
            return None
        return response.session_id


class Traces(_StoreSlot):
    """Trace jobs and session uploads (sync twin of ``AsyncTraces``); ``fleet.traces`` on a ``Fleet``.

    Args:
        fleet: The sync client; the work runs on its ``async_fleet`` via the loop bridge.
        screenshot_store: Where screenshots go (default: as ``AsyncTraces``).
    """

    def __init__(self, fleet: SyncAPIOwner, screenshot_store: ScreenshotSink | None = None) -> None:
        self._fleet = fleet
        self._store = screenshot_store

    def __repr__(self) -> str:
        return f"Traces(screenshot_store={self._store!r})"

    def _client_config(self) -> FleetConfig | None:
        config = getattr(self._fleet, "config", None)
        return config if isinstance(config, FleetConfig) else None

    @property
    def _inner(self) -> AsyncTraces:
        return AsyncTraces(self._fleet.async_fleet, self.screenshot_store)

    create_job = sync_method(AsyncTraces.create_job)
    prepare_messages = sync_method(AsyncTraces.prepare_messages)
    upload_session = sync_method(AsyncTraces.upload_session)
