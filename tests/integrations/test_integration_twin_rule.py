"""The trainer adapters keep the twin rule of docs/architecture.md and expose no private name.

``tests/test_twin_rule.py`` walks the SDK's other public modules; these import their framework
(an extra), so they are walked here, where the frameworks are installed. OpenEnv's
``Environment`` is a framework contract like Gym's: its async methods are ``reset_async`` /
``step_async`` beside the sync ``reset`` / ``step``.
"""

from __future__ import annotations

import importlib
import pkgutil
import types

from openenv.core.env_server.interfaces import Environment
from test_twin_rule import FRAMEWORK_CONTRACT_CLASSES, private_name_problems, twin_problems

import fleet_sdk.integrations


def integration_modules() -> list[types.ModuleType]:
    """``fleet_sdk.integrations`` and each public adapter module under it."""
    names = [
        info.name
        for info in pkgutil.iter_modules(fleet_sdk.integrations.__path__, "fleet_sdk.integrations.")
        if not info.name.rsplit(".", 1)[1].startswith("_")
    ]
    return [fleet_sdk.integrations, *(importlib.import_module(name) for name in names)]


def test_the_walk_covers_every_adapter() -> None:
    names = {module.__name__.rsplit(".", 1)[1] for module in integration_modules()}
    assert {"openenv", "ray", "skyrl", "text_actions"} <= names


def test_every_adapter_twin_keeps_the_rule() -> None:
    assert twin_problems(integration_modules(), (*FRAMEWORK_CONTRACT_CLASSES, Environment)) == []


def test_no_adapter_exposes_a_private_name() -> None:
    assert private_name_problems(integration_modules()) == []
