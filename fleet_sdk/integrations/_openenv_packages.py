"""OpenEnv's client modules without its server: ``openenv.core`` and ``openenv.core.env_server``
are imported uninitialised, their ``__init__`` deferred to the first attribute read from either.

OpenEnv 0.3's ``openenv/core/__init__.py`` imports ``env_server``, whose ``__init__`` imports its
HTTP server and web interface (FastAPI, fastmcp, gradio: 5-90 s of imports), so any
``openenv.core.*`` import, the client's included, loaded all of it. Importing this module puts
each package in ``sys.modules`` uninitialised: their submodules (``env_client``,
``env_server.types``, ``env_server.http_server``...) import on their own, and the first
attribute read from either package (``openenv.core.EnvClient``, by anyone) runs both inits, in
the order a plain import would, leaving OpenEnv exactly as that import leaves it. Where
``openenv.core`` was imported before, nothing is done.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

__all__: list[str] = []

_PACKAGES = ("openenv.core", "openenv.core.env_server")
_deferred: list[tuple[ModuleType, ModuleSpec]] = []  # outermost first
_lock = threading.RLock()


def _run_deferred_inits() -> None:
    with _lock:
        while _deferred:
            module, spec = _deferred.pop()  # the innermost package first, as its parent imports it
            del module.__dict__["__getattr__"]
            assert spec.loader is not None
            spec.loader.exec_module(module)


def _defer(name: str) -> None:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        return  # not installed: the import that follows says so
    module = importlib.util.module_from_spec(spec)

    def read(attribute: str) -> Any:
        _run_deferred_inits()
        return getattr(module, attribute)

    module.__dict__["__getattr__"] = read
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    setattr(sys.modules[parent], child, module)
    _deferred.append((module, spec))


with _lock:
    if _PACKAGES[0] not in sys.modules:
        for _name in _PACKAGES:
            _defer(_name)
