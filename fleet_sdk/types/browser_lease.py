"""Models of the Fleet browser lease API, generated from ``schemas/browser-lease.yaml``.

The classes are the generated ones (``fleet_sdk._generated.browser_lease.models``) themselves, so
they are what the clients take and return. ``__all__`` lists every model.
"""

from .._generated.browser_lease.models import *  # noqa: F403
from .._generated.browser_lease.models import __all__ as __all__  # noqa: PLC0414 (the explicit re-export form)
