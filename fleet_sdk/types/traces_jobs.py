"""Models of the Fleet traces API (platform host), generated from ``schemas/traces-jobs.yaml``.

The classes are the generated ones (``fleet_sdk._generated.traces_jobs.models``) themselves, so
they are what the clients take and return. ``__all__`` lists every model.
"""

from .._generated.traces_jobs.models import *  # noqa: F403
from .._generated.traces_jobs.models import __all__ as __all__  # noqa: PLC0414 (the explicit re-export form)
