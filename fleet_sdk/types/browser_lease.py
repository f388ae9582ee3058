"""Models of the Fleet browser lease API, generated from ``schemas/browser-lease.yaml``.

The classes are those of ``fleet_generated.browser_lease.models`` themselves, so they are what the
clients take and return. ``__all__`` lists every model.
"""

from fleet_generated.browser_lease.models import *  # noqa: F403
from fleet_generated.browser_lease.models import __all__ as __all__  # noqa: PLC0414 (explicit re-export)
