"""Models of the Fleet sessions API, generated from ``schemas/sessions-ingest.yaml``.

The classes are those of ``fleet_generated.sessions_ingest.models`` themselves, so they are what the
clients take and return. ``__all__`` lists every model.
"""

from fleet_generated.sessions_ingest.models import *  # noqa: F403
from fleet_generated.sessions_ingest.models import __all__ as __all__  # noqa: PLC0414 (explicit re-export)
