"""Deprecated alias of ``fleet_generated``, kept so existing imports keep working.

``from fleet_api.env_instance import models`` gives the very same module objects as
``from fleet_generated.env_instance import models`` (so ``isinstance`` checks and model
identity hold across both names). New code should import models from ``fleet_sdk.types``
(``from fleet_sdk.types import env_instance``); nothing inside ``fleet_sdk`` imports this package.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import fleet_generated
from fleet_generated import SURFACES, Operation

_TARGET = fleet_generated.__name__


def _alias(package: str, name: str) -> None:
    module = importlib.import_module(f"{package}.{name}")
    alias = f"{__name__}{module.__name__[len(_TARGET) :]}"
    sys.modules[alias] = module
    if module.__spec__ is not None and module.__spec__.submodule_search_locations:
        for info in pkgutil.iter_modules(module.__spec__.submodule_search_locations):
            _alias(module.__name__, info.name)


# Registering every generated module under this name makes ``import fleet_api.<surface>.models``
# (or ``fleet_api._resource``) resolve to the generated module itself rather than a copy.
for _info in pkgutil.iter_modules(fleet_generated.__path__):
    _alias(_TARGET, _info.name)
    globals()[_info.name] = sys.modules[f"{__name__}.{_info.name}"]  # fleet_api.<name> as attribute

__all__ = ["SURFACES", "Operation"]
