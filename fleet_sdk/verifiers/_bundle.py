"""Deterministic verifier bundles for ``POST /v1/verifiers/execute``."""

from __future__ import annotations

import hashlib
import io
import zipfile

__all__ = ["BUNDLE_ENTRY_NAME", "bundle_sha256", "bundle_verifier"]

BUNDLE_ENTRY_NAME = "verifier.py"
"""The one file inside a bundle: the verifier's source, UTF-8."""

# 1980-01-01 00:00:00, the earliest time a zip entry can hold.
_FIXED_DATE_TIME = (1980, 1, 1, 0, 0, 0)
_FILE_MODE = 0o100644  # a regular file, rw-r--r--


def bundle_verifier(code: str) -> bytes:
    """Zip a verifier's source into bytes that depend on the code only.

    The public SDK stamped the current time into the zip, so the same code got a new sha256 on
    every upload. Here the entry's timestamp, permissions, creator system and compression are
    fixed, and the entry is stored uncompressed so no zlib version can change the bytes.

    Args:
        code: The verifier's source.
    """
    info = zipfile.ZipInfo(BUNDLE_ENTRY_NAME, date_time=_FIXED_DATE_TIME)
    info.compress_type = zipfile.ZIP_STORED
    info.create_system = 3  # Unix, so external_attr holds a POSIX mode
    info.external_attr = _FILE_MODE << 16
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        archive.writestr(info, code.encode("utf-8"))
    return buffer.getvalue()


def bundle_sha256(code: str) -> str:
    """The hex sha256 of :func:`bundle_verifier` of ``code``: the same for the same code.

    Args:
        code: The verifier's source.
    """
    return hashlib.sha256(bundle_verifier(code)).hexdigest()
