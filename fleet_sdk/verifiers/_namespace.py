"""The globals a verifier runs in: helpers, score constants, the ``Environment`` type.

Standard library only: the sandbox child loads this file without importing ``fleet_sdk``.

Every helper is a *global* of the namespace returned by :func:`build_namespace`, so it is
reachable from inside ``verify`` (the public SDK's async path put the helpers in the ``locals``
of ``exec``, where a function body cannot see them, and verifiers failed with ``NameError``).
What a verifier can call is listed in docs/verifier-runtime.md.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import json
import math
import re
import string
import sys
import types
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from ._query import QueryBuilder
from ._snapshot import IgnoreConfig, SnapshotDiff
from ._sqlite import DatabaseSnapshot

__all__ = [
    "TASK_FAILED_SCORE",
    "TASK_SUCCESSFUL_SCORE",
    "Database",
    "Environment",
    "QueryResultLike",
    "build_namespace",
    "contains_number",
    "extract_numbers",
    "normalized_contains",
    "normalized_string_comparison",
    "registered_as_module",
    "verifier",
]

TASK_SUCCESSFUL_SCORE = 1
"""The score a verifier returns when the task was solved."""

TASK_FAILED_SCORE = 0
"""The score a verifier returns when the task was not solved."""


@runtime_checkable
class QueryResultLike(Protocol):
    """What ``Database.query`` returns: column names and rows, in the order of the query."""

    @property
    def columns(self) -> list[str]: ...

    @property
    def rows(self) -> list[list[Any]]: ...


@runtime_checkable
class Database(Protocol):
    """One database of an environment (``"current"``, ``"seed"``, ...)."""

    def query(self, sql: str, args: Sequence[Any] | None = None) -> QueryResultLike:
        """Run one SQL statement.

        Args:
            sql: The statement, with ``?`` placeholders.
            args: Values for the placeholders.
        """
        ...


@runtime_checkable
class Environment(Protocol):
    """What a verifier receives as its first argument.

    ``env.db("current")`` is the state after the episode, ``env.db("seed")`` the state before.
    The local :class:`~fleet_sdk.verifiers.SQLiteDatabase` also offers ``rows()`` (a list of
    dicts) and ``scalar()`` (the first column of the first row).
    """

    def db(self, name: str = "current") -> Database:
        """Return the database called ``name``.

        Args:
            name: The database name, ``"current"`` by default.
        """
        ...


_PUNCTUATION_TO_SPACE = str.maketrans(dict.fromkeys(string.punctuation, " "))

# A number not glued to a word on its left: "3-5" gives 3 and 5, "-5" gives -5, "1,234.5" gives
# 1234.5 (commas only as thousands separators), "v2" gives 2. No exponents ("12E3" is 12 and 3).
# Compiled on first use, not at import: the sandbox child imports this module on every run.
_NUMBER = (
    r"(?:(?<![\w.])[-+])?(?<![\d.])(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?"
    r"|(?:(?<![\w.])[-+])?(?<![\d.])\.\d+"
)


@functools.cache
def _number_pattern() -> re.Pattern[str]:
    return re.compile(_NUMBER)


def _to_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True, default=str)
    return str(value)


def _squash(value: Any) -> str:
    """Lowercase, punctuation to spaces, then every whitespace removed."""
    return "".join(_to_text(value).lower().translate(_PUNCTUATION_TO_SPACE).split())


def normalized_contains(needle: Any, haystack: Any) -> bool:
    """Whether ``needle`` occurs in ``haystack``, ignoring case, punctuation and whitespace.

    Both sides are lowercased, ASCII punctuation becomes spaces and then all whitespace is
    removed, so ``"Dr. O'Neil"`` is found in ``"dr oneil"``. Dicts and lists are compared as
    their JSON text with sorted keys; ``None`` is the empty string. An empty needle is found
    everywhere.

    Args:
        needle: The text (or dict/list/value) to look for.
        haystack: The text (or dict/list/value) to look in.
    """
    return _squash(needle) in _squash(haystack)


def extract_numbers(text: Any) -> list[float]:
    """All the numbers written in ``text``, in order, as floats.

    Handles signs (``"-5"``), decimals (``"3.14"``, ``".5"``) and thousands separators
    (``"$1,234.50"`` gives ``1234.5``). A ``-`` between two numbers (``"3-5"``) is a dash, not a
    sign. Exponents are not recognised.

    Args:
        text: The text to scan; other values are converted with ``str()`` (dicts and lists as
            JSON).
    """
    return [float(match.replace(",", "")) for match in _number_pattern().findall(_to_text(text))]


def contains_number(text: Any, number: float | str, tolerance: float = 1e-6) -> bool:
    """Whether ``text`` mentions ``number``, within an absolute ``tolerance``.

    Args:
        text: The text to scan (see :func:`extract_numbers`).
        number: The number to find; a string such as ``"1,234.5"`` is parsed first.
        tolerance: The largest accepted absolute difference.

    Raises:
        ValueError: ``number`` is a string with no number in it.
    """
    if isinstance(number, str):
        parsed = extract_numbers(number)
        if not parsed:
            raise ValueError(f"no number in {number!r}")
        target = parsed[0]
    else:
        target = float(number)
    return any(math.isclose(found, target, rel_tol=0.0, abs_tol=tolerance) for found in extract_numbers(text))


def normalized_string_comparison(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are the same text, ignoring case, punctuation and spacing.

    Both sides are lowercased, ASCII punctuation becomes spaces and runs of whitespace collapse
    to one space, so ``"Hello,   World!"`` equals ``"hello world"`` (but ``"ab"`` does not equal
    ``"a b"``).

    Args:
        a: The first text (dicts and lists as JSON, ``None`` as ``""``).
        b: The second text.
    """

    def words(value: Any) -> list[str]:
        return _to_text(value).lower().translate(_PUNCTUATION_TO_SPACE).split()

    return words(a) == words(b)


def verifier(key: Any = None, *args: Any, **kwargs: Any) -> Any:
    """The public SDK's ``@verifier(key=...)`` decorator, accepted so its verifiers run as written.

    It registers nothing and returns the function unchanged (bare ``@verifier`` too): here the
    code is already on the runner, and the entry point is found as for any verifier.

    Args:
        key: The verifier key, or the function itself for a bare ``@verifier``.
        args: The public SDK's other arguments, ignored.
        kwargs: The public SDK's other keywords (``extra_requirements``...), ignored.
    """
    if callable(key) and not args and not kwargs:
        return key

    def keep(function: Callable[..., Any]) -> Callable[..., Any]:
        return function

    return keep


# The public SDK's modules a verifier may import from, and the names each offers here.
_SCORES = {"TASK_SUCCESSFUL_SCORE": TASK_SUCCESSFUL_SCORE, "TASK_FAILED_SCORE": TASK_FAILED_SCORE}
_SNAPSHOTS = {
    "DatabaseSnapshot": DatabaseSnapshot,
    "IgnoreConfig": IgnoreConfig,
    "SnapshotDiff": SnapshotDiff,
    "QueryBuilder": QueryBuilder,
}
_PUBLIC_SDK_MODULES: dict[str, dict[str, Any]] = {
    "fleet": {"verifier": verifier, "verifier_sync": verifier},
    "fleet.verifiers": {**_SNAPSHOTS, **_SCORES, "verifier": verifier},
    "fleet.verifiers.db": _SNAPSHOTS,
    "fleet.verifiers.code": _SCORES,
    "fleet.verifiers.verifier": {"verifier": verifier},
    "fleet.verifiers.decorator": {"verifier": verifier},
}


def _public_sdk_modules() -> dict[str, types.ModuleType]:
    """Fresh module objects standing for the public SDK's verifier modules (``fleet.verifiers``...)."""
    modules = {}
    for name, members in _PUBLIC_SDK_MODULES.items():
        module = types.ModuleType(
            name, "The public SDK's verifier names, as the verifier runtime offers them."
        )
        module.__dict__.update(members)
        modules[name] = module
    for name, module in modules.items():
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(modules[parent], child, module)
    return modules


def _verifier_builtins() -> dict[str, Any]:
    """The builtins of a verifier: Python's, with an ``__import__`` that answers ``import fleet...``.

    Verifier code written for the public SDK imports its helpers (``from fleet.verifiers import
    IgnoreConfig``); the package is not installed where verifiers run, so those imports get the
    runtime's own objects instead. Every other import is Python's own. Only code compiled in this
    namespace uses these builtins.
    """
    modules = _public_sdk_modules()
    real_import = builtins.__import__

    def import_(
        name: str,
        globals_: Mapping[str, Any] | None = None,
        locals_: Mapping[str, Any] | None = None,
        fromlist: Sequence[str] | None = (),
        level: int = 0,
    ) -> types.ModuleType:
        if level == 0 and name.partition(".")[0] == "fleet":
            module = modules.get(name)
            if module is None:
                offered = ", ".join(sorted(modules))
                raise ModuleNotFoundError(
                    f"no module named {name!r} here; verifiers can import {offered}", name=name
                )
            return module if fromlist else modules["fleet"]
        return real_import(name, globals_, locals_, fromlist or (), level)

    namespace = dict(vars(builtins))
    namespace["__import__"] = import_
    return namespace


def build_namespace() -> dict[str, Any]:
    """Return a fresh globals dict for ``exec`` of a verifier's code.

    It holds the helpers (:func:`normalized_contains`, :func:`extract_numbers`,
    :func:`contains_number`, :func:`normalized_string_comparison`), ``TASK_SUCCESSFUL_SCORE``,
    ``TASK_FAILED_SCORE``, the ``Environment`` type, the modules ``json``, ``re`` and
    ``string``, and the public SDK's verifier names: ``DatabaseSnapshot``, ``IgnoreConfig``,
    ``SnapshotDiff`` and the ``@verifier`` decorator (which changes nothing). They are globals,
    so functions defined by the verifier see them; ``from fleet.verifiers import ...`` gives the
    same objects (docs/verifier-runtime.md).
    """
    return {
        "__name__": "verifier",
        "__builtins__": _verifier_builtins(),
        "json": json,
        "re": re,
        "string": string,
        "Environment": Environment,
        "Database": Database,
        "TASK_SUCCESSFUL_SCORE": TASK_SUCCESSFUL_SCORE,
        "TASK_FAILED_SCORE": TASK_FAILED_SCORE,
        "normalized_contains": normalized_contains,
        "extract_numbers": extract_numbers,
        "contains_number": contains_number,
        "normalized_string_comparison": normalized_string_comparison,
        **_SNAPSHOTS,
        "verifier": verifier,
    }


class _ModuleView:
    """Stands for the verifier's module in ``sys.modules``: its attributes are the verifier's
    globals (the very dict, not a copy), as a module's attributes are its ``__dict__``."""

    def __init__(self, namespace: dict[str, Any]) -> None:
        self.__dict__ = namespace

    def __repr__(self) -> str:
        return f"<module {self.__dict__.get('__name__')!r} (verifier code)>"


@contextlib.contextmanager
def registered_as_module(namespace: dict[str, Any]) -> Iterator[None]:
    """Make the verifier's globals reachable as ``sys.modules[namespace["__name__"]]`` meanwhile.

    The standard library finds a class's module through ``sys.modules[cls.__module__]``:
    ``@dataclass`` (reading string annotations such as ``ClassVar``), ``typing.get_type_hints``
    and ``pickle`` all fail for a module that is not there. This gives the verifier nothing it
    does not have already: the entry is its own globals.

    A real module of the same name (one the host process imported) is never replaced; the name
    is then left as it is. Nested uses for the same namespace are no-ops. In the sandbox child
    one verifier runs per process; in-process runs (``run_local``) that overlap share the name,
    and the entry belongs to whichever registered first.

    Args:
        namespace: The globals the verifier's code runs in (see :func:`build_namespace`).
    """
    name = namespace.get("__name__")
    if not isinstance(name, str) or name in sys.modules:
        yield
        return
    view: Any = _ModuleView(namespace)  # not a ModuleType: a module's __dict__ cannot be replaced
    sys.modules[name] = view
    try:
        yield
    finally:
        if sys.modules.get(name) is view:
            del sys.modules[name]
