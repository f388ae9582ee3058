"""Environment and data specs: ``"fira:1.2.3"`` -> ``("fira", "v1.2.3")``.

docs/wire.md#instances: a ``v`` is added to a version that starts with a digit, for
environment and data versions alike. Callers pass a data spec as one
``"key:version"`` string (passing the two parts as separate arguments
broke callers); on the wire it becomes ``data_key`` and ``data_version``.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Spec", "normalize_version", "parse_spec"]


class Spec(NamedTuple):
    """A parsed ``key[:version]`` spec."""

    key: str
    version: str | None


def normalize_version(version: str | None) -> str | None:
    """Add the ``v`` prefix to a version that starts with a digit.

    Args:
        version: ``"1.2.3"``, ``"v1.2.3"``, ``"latest"`` or None.
    """
    if version is None:
        return None
    version = version.strip()
    if not version:
        return None
    return f"v{version}" if version[0].isdigit() else version


def parse_spec(spec: str, *, version: str | None = None, what: str = "env") -> Spec:
    """Split ``"key:version"``; an explicit ``version`` must agree with the spec's.

    Args:
        spec: ``"fira"`` or ``"fira:1.2.3"``.
        version: A version given separately (optional).
        what: ``"env"`` or ``"data"``, for error messages.
    """
    key, sep, spec_version = spec.strip().partition(":")
    if not key or (sep and not spec_version):
        raise ValueError(f"{what} spec {spec!r} must be 'key' or 'key:version'")
    resolved = normalize_version(spec_version or None)
    explicit = normalize_version(version)
    if resolved and explicit and resolved != explicit:
        raise ValueError(f"{what} spec {spec!r} says version {resolved} but {what}_version={version!r}")
    return Spec(key, resolved or explicit)
