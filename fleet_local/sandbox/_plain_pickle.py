"""Pickles of plain data: builtin containers and scalars, read by an unpickler that builds nothing else.

The public SDK sends a verifier's arguments as a base64 (cloud)pickle (docs/verifier-runtime.md),
and a pickle can name any importable callable to run on load. :func:`load_plain` refuses every
such name but the four builtin containers and scalars older pickle protocols build through one
(``set``, ``frozenset``, ``complex``), so reading a pickle runs no code; what it built is then
checked to be plain data of bounded size. The sandbox passes a verifier's arguments to its child
the same way (:func:`dump_plain`).

Standard library only: the sandbox child loads this file without importing ``fleet_sdk``.
"""

from __future__ import annotations

import builtins
import io
import pickle
from typing import Any

from fleet_sdk.verifiers._compat import ErrorBase

__all__ = ["MAX_DEPTH", "MAX_ITEMS", "PlainDataError", "check_plain", "dump_plain", "load_plain"]

MAX_ITEMS = 100_000
"""At most this many values (containers and scalars, counted each time they are reached)."""

MAX_DEPTH = 64
"""At most this many containers nested in each other."""

_SCALARS = (type(None), bool, int, float, complex, str, bytes, bytearray)
_CONTAINERS = (list, tuple, dict, set, frozenset)
# Builtins an older pickle protocol builds plain values with (protocol 5, the public SDK's, needs
# none of them). bytearray is not one: ``bytearray(10**12)`` would allocate what the pickle
# never held.
_BUILDERS = frozenset({"set", "frozenset", "complex"})


class PlainDataError(ValueError, ErrorBase):
    """A value (or pickle) is not plain data: builtin containers and scalars, of bounded size.

    Attributes:
        offending: What was refused: a type or global name such as ``"datetime.datetime"``.
    """

    def __init__(self, message: str, *, offending: str | None = None) -> None:
        super().__init__(message)
        self.offending = offending


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        # Protocols 0-2 write Python 2's module name; the stock find_class maps it the same way.
        if module in ("builtins", "__builtin__") and name in _BUILDERS:
            return getattr(builtins, name)
        raise PlainDataError(
            f"the pickle refers to {module}.{name}; only builtin containers and scalars are accepted",
            offending=f"{module}.{name}",
        )

    def persistent_load(self, pid: Any) -> Any:
        raise PlainDataError(
            "the pickle uses persistent ids; only builtin containers and scalars are accepted"
        )


def _type_name(value: Any) -> str:
    kind = type(value)
    return kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def check_plain(value: Any) -> None:
    """Raise unless ``value`` is plain data.

    Plain data is ``None``, ``bool``, ``int``, ``float``, ``complex``, ``str``, ``bytes``,
    ``bytearray`` and ``list``, ``tuple``, ``dict``, ``set``, ``frozenset`` of plain data (exactly
    these types, not subclasses), with no container inside itself, at most :data:`MAX_DEPTH`
    containers deep and :data:`MAX_ITEMS` values in all (a value reached twice counts twice).

    Args:
        value: The value to check.

    Raises:
        PlainDataError: Naming the first offending type (``offending``) or the bound exceeded.
    """
    budget = [MAX_ITEMS]
    open_containers: set[int] = set()

    def visit(item: Any, depth: int, path: str) -> None:
        budget[0] -= 1
        if budget[0] < 0:
            raise PlainDataError(f"more than {MAX_ITEMS} values")
        kind = type(item)
        if kind in _SCALARS:
            return
        if kind not in _CONTAINERS:
            name = _type_name(item)
            raise PlainDataError(
                f"{path} is a {name}; only builtin containers and scalars are accepted", offending=name
            )
        if depth >= MAX_DEPTH:
            raise PlainDataError(f"{path} is nested more than {MAX_DEPTH} containers deep")
        if id(item) in open_containers:
            raise PlainDataError(f"{path} contains itself")
        open_containers.add(id(item))
        if kind is dict:
            for key, member in item.items():
                visit(key, depth + 1, f"{path} key {key!r:.40}")
                visit(member, depth + 1, f"{path}[{key!r:.40}]")
        else:
            for index, member in enumerate(item):
                visit(member, depth + 1, f"{path}[{index}]")
        open_containers.discard(id(item))

    visit(value, 0, "the value")


def load_plain(data: bytes) -> Any:
    """Read a pickle of plain data without running anything it names.

    Args:
        data: The pickle.

    Raises:
        PlainDataError: The pickle names anything but ``set``, ``frozenset`` or ``complex``, is not
            a readable pickle, or built something :func:`check_plain` refuses.
    """
    try:
        value = _PlainUnpickler(io.BytesIO(data)).load()
    except PlainDataError:
        raise
    except Exception as exc:  # every way a malformed pickle fails: UnpicklingError, EOFError, ...
        raise PlainDataError(f"not a readable pickle: {type(exc).__name__}: {exc}") from None
    check_plain(value)
    return value


def dump_plain(value: Any) -> bytes:
    """Pickle plain data (protocol 5) so that :func:`load_plain` reads it back.

    Args:
        value: Plain data (see :func:`check_plain`).

    Raises:
        PlainDataError: ``value`` is not plain data.
    """
    check_plain(value)
    return pickle.dumps(value, protocol=5)
