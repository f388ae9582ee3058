"""``orderdesk``: the back office of an online electronics shop.

Customers, a product catalog, orders with items, refunds and internal order notes. Today is
2026-11-01 and the logged-in support agent is ``agent.lopez`` (both kept in ``app_settings``).
"""

from __future__ import annotations

from .._definition import EnvironmentDefinition
from ._browser_tasks import BROWSER_TASKS
from ._seed import SEED_SQL, TABLES
from ._tasks import ENV_KEY, ENV_VARIABLES, ENV_VERSION, TASKS
from ._tools import TOOLS

ENVIRONMENT = EnvironmentDefinition(
    env_key=ENV_KEY,
    name="OrderDesk",
    description="Back office of an online electronics shop: customers, catalog, orders, refunds and "
    "order notes.",
    versions=[ENV_VERSION],
    default_version=ENV_VERSION,
    seed_sql=SEED_SQL,
    tools=TOOLS,
    tasks=[*TASKS, *BROWSER_TASKS],
    env_variables=dict(ENV_VARIABLES),
)

__all__ = ["ENVIRONMENT", "TABLES"]
