"""Deprecated alias of ``fleet_sdk._generated``, kept so existing imports keep working.

``from fleet_api.env_instance import models`` gives the very same module objects as
``from fleet_sdk._generated.env_instance import models`` (so ``isinstance`` checks and model
identity hold across both names). New code should import from ``fleet_sdk._generated``;
nothing inside ``fleet_sdk`` imports this package.
"""

from __future__ import annotations

import importlib
import sys

from fleet_sdk._generated import SURFACES, Operation, _operation

_TARGET = "fleet_sdk._generated"


def _alias(name: str) -> None:
    module = importlib.import_module(f"{_TARGET}.{name}")
    sys.modules[f"{__name__}.{name}"] = module


# Registering the submodules in sys.modules makes ``import fleet_api.<surface>.models`` resolve
# to the generated module itself rather than a copy.
sys.modules[f"{__name__}._operation"] = _operation
for _surface in SURFACES:
    for _name in (_surface, f"{_surface}.models", f"{_surface}.client"):
        _alias(_name)
    globals()[_surface] = sys.modules[f"{__name__}.{_surface}"]

__all__ = ["SURFACES", "Operation"]
