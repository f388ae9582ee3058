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

from ._pickle_shape import MAX_PICKLE_BYTES, read_shape
from ._plain_bounds import MAX_DEPTH, MAX_ITEMS, PlainDataError

__all__ = ["MAX_DEPTH", "MAX_ITEMS", "PlainDataError", "check_plain", "dump_plain", "load_plain"]

_SCALARS = (type(None), bool, int, float, complex, str, bytes, bytearray)
_CONTAINERS = (list, tuple, dict, set, frozenset)
# Builtins an older pickle protocol builds plain values with (protocol 5, the public SDK's, needs
# none of them). bytearray is not one: ``bytearray(10**12)`` would allocate what the pickle
# never held.
_BUILDERS = frozenset({"set", "frozenset", "complex"})


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


_Path = tuple[Any, Any] | None
"""Where a value is: ``(the parent's path, the step)``, a step being an index, ``("key", key)``
or ``("value", key)``; ``None`` for the value itself. Linked, so a step costs the same at any depth."""


def _describe(path: _Path) -> str:
    """Where a value is, for a message: ``the value[0] key 'a'`` (keys shown briefly, never whole)."""
    steps = []
    while path is not None:
        path, step = path
        steps.append(step)
    text = "the value"
    for step in reversed(steps):
        if isinstance(step, int):
            text += f"[{step}]"
        else:  # ("key" or "value", the dict key)
            where, key = step
            shown = _brief(key)
            text += f" key {shown}" if where == "key" else f"[{shown}]"
    return text


def _brief(key: Any) -> str:
    """A dict key as a message shows it: a short str or number as it is, anything else by its type
    (a repr could take exponential time, or fail, on what a pickle built)."""
    kind = type(key)
    if kind is str:
        return repr(key[:40]) + ("..." if len(key) > 40 else "")
    if kind in (bool, type(None)) or (kind is int and -(10**20) < key < 10**20):
        return repr(key)
    return f"<{_type_name(key)}>"


def check_plain(value: Any) -> None:
    """Raise unless ``value`` is plain data.

    Plain data is ``None``, ``bool``, ``int``, ``float``, ``complex``, ``str``, ``bytes``,
    ``bytearray`` and ``list``, ``tuple``, ``dict``, ``set``, ``frozenset`` of plain data (exactly
    these types, not subclasses), with no container inside itself, at most :data:`MAX_DEPTH`
    containers deep and :data:`MAX_ITEMS` values in all (a value reached twice counts twice).
    The walk is linear in the values it counts; a message is made only when it raises.

    Args:
        value: The value to check.

    Raises:
        PlainDataError: Naming the first offending type (``offending``) or the bound exceeded.
    """
    budget = [MAX_ITEMS]
    open_containers: set[int] = set()

    def visit(item: Any, depth: int, path: _Path) -> None:
        budget[0] -= 1
        if budget[0] < 0:
            raise PlainDataError(f"more than {MAX_ITEMS} values")
        kind = type(item)
        if kind in _SCALARS:
            return
        if kind not in _CONTAINERS:
            name = _type_name(item)
            raise PlainDataError(
                f"{_describe(path)} is a {name}; only builtin containers and scalars are accepted",
                offending=name,
            )
        if depth >= MAX_DEPTH:
            raise PlainDataError(f"{_describe(path)} is nested more than {MAX_DEPTH} containers deep")
        if id(item) in open_containers:
            raise PlainDataError(f"{_describe(path)} contains itself")
        open_containers.add(id(item))
        if kind is dict:
            for key, member in item.items():
                visit(key, depth + 1, (path, ("key", key)))
                visit(member, depth + 1, (path, ("value", key)))
        else:
            for index, member in enumerate(item):
                visit(member, depth + 1, (path, index))
        open_containers.discard(id(item))

    visit(value, 0, None)


def load_plain(data: bytes) -> Any:
    """Read a pickle of plain data without running anything it names.

    The pickle's shape is read first, without building anything (``_pickle_shape.py``): a
    pickle describing more values than the bounds allow, through containers it reuses, is
    refused before the unpickler could spend exponential time on it. Building the value still
    hashes its dict keys and set members, which keys chosen to collide make quadratic: decode
    untrusted pickles where a CPU limit applies (the sandbox's child does).

    Args:
        data: The pickle.

    Raises:
        PlainDataError: The pickle names anything but ``set``, ``frozenset`` or ``complex``, is not
            a readable pickle, exceeds a bound (bytes, opcodes, values, depth), or built something
            :func:`check_plain` refuses.
    """
    read_shape(data)
    try:
        value = _PlainUnpickler(io.BytesIO(data)).load()
    except PlainDataError:
        raise
    except Exception as exc:  # every way a malformed pickle fails: UnpicklingError, EOFError, ...
        # Named by type only: the text of some (a UnicodeDecodeError's) quotes the data.
        raise PlainDataError(f"not a readable pickle: {type(exc).__name__}") from None
    check_plain(value)
    return value


def dump_plain(value: Any) -> bytes:
    """Pickle plain data (protocol 5) so that :func:`load_plain` reads it back.

    Args:
        value: Plain data (see :func:`check_plain`).

    Raises:
        PlainDataError: ``value`` is not plain data, or its pickle is larger than
            :func:`load_plain` reads.
    """
    check_plain(value)
    data = pickle.dumps(value, protocol=5)
    if len(data) > MAX_PICKLE_BYTES:
        raise PlainDataError(f"the pickle is {len(data)} bytes; at most {MAX_PICKLE_BYTES} are accepted")
    return data
