"""Traces with screenshots: trace jobs, session uploads, and the rewrite the viewer needs.

``fleet.traces.create_job(name)`` creates a trace job on the platform host;
``fleet.traces.upload_session(...)`` uploads the episode's screenshots to the public
bucket, rewrites the chat history (``rewrite_chat_history``) and posts it to the
orchestrator's sessions ingest, never raising (docs/wire.md#traces).
"""

from .._public import publish
from ._rewrite import (
    KEY_PREFIX,
    DataImage,
    collect_data_images,
    extension_for,
    image_urls,
    is_turn_footer,
    parse_data_url,
    rewrite_chat_history,
    screenshot_key,
)
from ._screenshots import (
    DEFAULT_BUCKET,
    DEFAULT_PUBLIC_URL_BASE,
    DEFAULT_REGION,
    DiscoveredScreenshotStore,
    ScreenshotSink,
    ScreenshotStore,
)
from ._traces import AsyncTraces, SessionStatus, Traces, upload_screenshots

__all__ = [
    "DEFAULT_BUCKET",
    "DEFAULT_PUBLIC_URL_BASE",
    "DEFAULT_REGION",
    "KEY_PREFIX",
    "AsyncTraces",
    "DataImage",
    "DiscoveredScreenshotStore",
    "ScreenshotSink",
    "ScreenshotStore",
    "SessionStatus",
    "Traces",
    "collect_data_images",
    "extension_for",
    "image_urls",
    "is_turn_footer",
    "parse_data_url",
    "rewrite_chat_history",
    "screenshot_key",
    "upload_screenshots",
]

publish(__name__, globals(), __all__)
