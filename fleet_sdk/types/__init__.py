"""The typed models of the Fleet APIs: one module per API surface.

```python
from fleet_sdk.types import env_instance

request = env_instance.QueryRequest(query="SELECT count(*) FROM orders")
```

or ``from fleet_sdk.types.env_instance import QueryRequest``. The modules:

- ``browser_lease``: ``schemas/browser-lease.yaml``, the Fleet browser lease API
- ``env_instance``: ``schemas/env-instance.yaml``, the Fleet env-instance API
- ``evaluation_reports``: ``schemas/evaluation-reports.yaml``, the Fleet evaluation reports API
- ``sessions_ingest``: ``schemas/sessions-ingest.yaml``, the Fleet sessions API
- ``traces_jobs``: ``schemas/traces-jobs.yaml``, the Fleet traces API (platform host)

The classes are the generated ones (``fleet_generated.<surface>.models``) themselves, so
they are exactly what the clients take and return. A name that several surfaces share (such as
``ErrorResponse``) is a different class in each, which is why there is no flat namespace.
Importing this package loads no models: a module loads its surface when it is imported, or
first read here as an attribute. One module per generated surface (``fleet_generated.SURFACES``),
written by hand: ``tests/test_types.py`` fails when a surface has none.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from . import browser_lease, env_instance, evaluation_reports, sessions_ingest, traces_jobs


def __getattr__(name: str) -> ModuleType:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return importlib.import_module(f"{__name__}.{name}")  # which also sets the attribute


__all__ = [
    "browser_lease",
    "env_instance",
    "evaluation_reports",
    "sessions_ingest",
    "traces_jobs",
]
