"""Models of the Fleet traces API (platform host), generated from ``schemas/traces-jobs.yaml``.

The classes are those of ``fleet_generated.traces_jobs.models`` themselves, so they are what the
clients take and return. ``__all__`` lists every model.
"""

from fleet_generated.traces_jobs.models import *  # noqa: F403
from fleet_generated.traces_jobs.models import __all__ as __all__  # noqa: PLC0414 (explicit re-export)
