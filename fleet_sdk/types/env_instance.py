"""Models of the Fleet env-instance API, generated from ``schemas/env-instance.yaml``.

The classes are those of ``fleet_generated.env_instance.models`` themselves, so they are what the
clients take and return. ``__all__`` lists every model.
"""

from fleet_generated.env_instance.models import *  # noqa: F403
from fleet_generated.env_instance.models import __all__ as __all__  # noqa: PLC0414 (explicit re-export)
