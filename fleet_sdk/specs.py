"""Deprecated alias of ``fleet_sdk._refs`` (environment and data references).

``Spec`` is ``EnvRef`` and ``parse_spec`` is ``parse_ref``; new code should not use this module.
"""

from __future__ import annotations

from ._refs import EnvRef as Spec
from ._refs import normalize_version
from ._refs import parse_ref as parse_spec

__all__ = ["Spec", "normalize_version", "parse_spec"]
