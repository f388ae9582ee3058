"""Exported names show the module users import them from, as httpx's do.

``fleet_sdk.NotFoundError`` is defined in ``fleet_sdk._exceptions``; once published, its
``__module__`` is ``"fleet_sdk"``, so reprs, tracebacks and docs name the public path, and pickle
(and Ray's cloudpickle) look the class up there. Standard library only: the verifier package,
which loads no HTTP stack, publishes its names too.

Classes whose annotations are their fields (dataclasses, pydantic models, named tuples, typed
dicts) keep their home module: ``typing.get_type_hints`` and pydantic resolve those (string)
annotations in ``sys.modules[cls.__module__]``, and the public module lacks the names they use
(``tests/test_exception_tree.py``).
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterable, Mapping
from types import FunctionType
from typing import Any

__all__ = ["publish"]

_PACKAGE = "fleet_sdk."


def _private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split("."))


def _typed_fields(cls: type) -> bool:
    return (
        dataclasses.is_dataclass(cls)
        or hasattr(cls, "__pydantic_fields__")
        or (issubclass(cls, tuple) and hasattr(cls, "_fields"))
        or typing.is_typeddict(cls)
    )


def publish(module: str, namespace: Mapping[str, Any], names: Iterable[str]) -> None:
    """Give each exported class and function of ``names`` the public ``module`` as its home.

    Only what is defined in a private module of this package moves (a name defined in a public
    module is already importable from its own); the first public module to export a name keeps
    it (the package's ``__init__`` runs before any of its subpackages). A name exported under
    another name than its own is left alone: pickle finds a class by ``module.qualname``.

    Args:
        module: The public module's name (``__name__``).
        namespace: Its globals; a name not there yet (loaded on first use) is skipped.
        names: Its ``__all__``, or the one name just loaded.
    """
    for name in names:
        value = namespace.get(name)
        if not isinstance(value, type | FunctionType) or value.__qualname__ != name:
            continue
        if isinstance(value, type) and _typed_fields(value):
            continue
        home = value.__module__
        if home.startswith(_PACKAGE) and _private(home):
            value.__module__ = module
