"""``calendar``: a company's shared calendars, meeting rooms, events and invitations.

Twelve people, their primary calendars plus three team calendars, six rooms and the meetings of
the week of Monday 2026-11-02. Today is 2026-11-02 and the logged-in user is Maya Chen
(``maya.chen@northwind.example``), both kept in ``app_settings``.
"""

from __future__ import annotations

from .._definition import EnvironmentDefinition
from ._browser_tasks import BROWSER_TASKS
from ._seed import SEED_SQL, TABLES
from ._tasks import ENV_KEY, ENV_VARIABLES, ENV_VERSION, TASKS
from ._tools import TOOLS

ENVIRONMENT = EnvironmentDefinition(
    env_key=ENV_KEY,
    name="Team Calendar",
    description="Shared calendars of a small company: people, calendars, meeting rooms, events and "
    "invitations.",
    versions=[ENV_VERSION],
    default_version=ENV_VERSION,
    seed_sql=SEED_SQL,
    tools=TOOLS,
    tasks=[*TASKS, *BROWSER_TASKS],
    env_variables=dict(ENV_VARIABLES),
)

__all__ = ["ENVIRONMENT", "TABLES"]
