"""The base class of the errors raised by the stdlib-only verifier modules.

``_namespace``, ``_sqlite``, ``_entry``, ``_audit`` and ``_child`` import nothing outside the
standard library because the sandbox child loads them by file path, without importing
``fleet_sdk`` (whose ``__init__`` pulls in httpx). Their errors still derive from
:class:`fleet_sdk.FleetError` whenever ``fleet_sdk`` is loaded, which it always is in the SDK's
own process; inside the sandbox child they derive from :class:`Exception` instead.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

__all__ = ["ErrorBase"]

if TYPE_CHECKING:
    from .._exceptions import FleetError as ErrorBase
else:
    _exceptions = sys.modules.get("fleet_sdk._exceptions")
    ErrorBase = _exceptions.FleetError if _exceptions is not None else Exception
