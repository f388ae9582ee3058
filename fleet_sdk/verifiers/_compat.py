"""The base class of the errors raised by the stdlib-only verifier modules.

``_namespace``, ``_sqlite``, ``_entry``, ``_query``, ``_snapshot`` and this module import nothing
outside the standard library because the local server's sandbox child (``fleet_local/sandbox``)
loads them by file path, where ``fleet_sdk``'s ``__init__`` (pydantic, the SDK's modules) does
not run. Their errors still derive from :class:`fleet_sdk.FleetError` whenever ``fleet_sdk`` is
loaded, which it always is in the SDK's own process; inside the sandbox child they derive from
:class:`Exception` instead.
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
