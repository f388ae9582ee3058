"""Models of the Fleet evaluation reports API, generated from ``schemas/evaluation-reports.yaml``.

The classes are those of ``fleet_generated.evaluation_reports.models`` themselves, so they are what the
clients take and return. ``__all__`` lists every model.
"""

from fleet_generated.evaluation_reports.models import *  # noqa: F403
from fleet_generated.evaluation_reports.models import __all__ as __all__  # noqa: PLC0414 (explicit re-export)
