"""Environment and data references: ``"fira:1.2.3"`` -> ``EnvRef("fira", "v1.2.3")``.

Callers name an environment or a data snapshot as one ``"key:version"`` string (passing
the two parts as separate arguments broke callers); on the wire a data reference becomes
``data_key`` and ``data_version``. Versions follow ``fleet_sdk.protocol.normalize_version``.
"""

from __future__ import annotations

from typing import NamedTuple

from .protocol import normalize_version

__all__ = ["EnvRef", "normalize_version", "parse_ref"]


class EnvRef(NamedTuple):
    """A parsed ``key[:version]`` reference to an environment or a data snapshot."""

    key: str
    version: str | None


def parse_ref(ref: str, *, version: str | None = None, what: str = "env") -> EnvRef:
    """Split ``"key:version"``; an explicit ``version`` must agree with the reference's.

    Args:
        ref: ``"fira"`` or ``"fira:1.2.3"``.
        version: A version given separately (optional).
        what: ``"env"`` or ``"data"``, for error messages.
    """
    key, sep, ref_version = ref.strip().partition(":")
    if not key or (sep and not ref_version):
        raise ValueError(f"{what} spec {ref!r} must be 'key' or 'key:version'")
    resolved = normalize_version(ref_version or None)
    explicit = normalize_version(version)
    if resolved and explicit and resolved != explicit:
        raise ValueError(f"{what} spec {ref!r} says version {resolved} but {what}_version={version!r}")
    return EnvRef(key, resolved or explicit)
