"""Deprecated: the local server is the ``fleet_local`` package now.

``from fleet_sdk.local import LocalFleet`` keeps working (with a ``DeprecationWarning``) and
gives the very same objects as ``from fleet_local import LocalFleet``; the policies this module
used to export are in ``fleet_sdk.policies``. Importing this module loads nothing: a name is
looked up where it lives on first use.
"""

from __future__ import annotations

import warnings
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fleet_local import API_KEY_ENV, LocalFleet, LocalSettings, browser_unavailable, serve

    from .policies import ChatCompletionsPolicy, PolicyContext, RandomPolicy, ScriptedPolicy, random_value

__all__ = [
    "API_KEY_ENV",
    "ChatCompletionsPolicy",
    "LocalFleet",
    "LocalSettings",
    "PolicyContext",
    "RandomPolicy",
    "ScriptedPolicy",
    "browser_unavailable",
    "random_value",
    "serve",
]

_POLICIES = frozenset(
    {"ChatCompletionsPolicy", "PolicyContext", "RandomPolicy", "ScriptedPolicy", "random_value"}
)


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    home: ModuleType
    if name in _POLICIES:
        from . import policies

        home = policies
    else:
        # The one place, besides the command line, where the SDK reaches into the server
        # (tests/test_import_graph.py names both): a deprecated path, kept for old imports.
        import fleet_local

        home = fleet_local
    warnings.warn(
        f"fleet_sdk.local is deprecated; import {name} from {home.__name__}",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(home, name)
