"""The typed models of the Fleet APIs: one module per API surface.

```python
from fleet_sdk.types import env_instance

request = env_instance.QueryRequest(query="SELECT count(*) FROM orders")
```

or ``from fleet_sdk.types.env_instance import QueryRequest``. The modules:

- ``browser_lease``: browser leases and their MCP tools (``schemas/browser-lease.yaml``)
- ``env_instance``: environments, instances, their databases, tasks and verifiers
  (``schemas/env-instance.yaml``)
- ``evaluation_reports``: evaluation reports and trace windows (``schemas/evaluation-reports.yaml``)
- ``sessions_ingest``: sessions, transcripts and verifier executions (``schemas/sessions-ingest.yaml``)
- ``traces_jobs``: trace jobs and the logs uploaded to them (``schemas/traces-jobs.yaml``)

The classes are the generated ones themselves, so they are exactly what the clients take and
return. Names that several surfaces share (``ErrorResponse``, ``ValidationIssue``) are different
classes, one per surface, which is why there is no flat namespace. Importing this package loads
no models: each module loads its surface's models when it is imported (or first read here as
an attribute).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from . import browser_lease, env_instance, evaluation_reports, sessions_ingest, traces_jobs


def __getattr__(name: str) -> ModuleType:
    if name not in __all__:
        raise AttributeError(f"module 'fleet_sdk.types' has no attribute {name!r}")
    return importlib.import_module(f"{__name__}.{name}")  # also sets it as an attribute here


__all__ = ["browser_lease", "env_instance", "evaluation_reports", "sessions_ingest", "traces_jobs"]
