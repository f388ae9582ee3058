"""The public surface keeps the one twin rule of docs/architecture.md and exposes no private name.

The rule: classes twin as ``X`` / ``AsyncX`` with the same public methods and signatures; a free
function's async source has the plain name and its sync twin ends in ``_sync``; nothing public
ends in ``_async`` except the methods of a class that serves a framework's sync contract
(``TaskEnv``: Gym's ``reset`` / ``step`` / ``close``), whose async forms are ``<method>_async``.
These tests walk every public module (``public_modules()``, the list of docs/architecture.md) and
check each name a user can import; a module planted with each kind of breach shows the checks
catch it. ``tests/integrations/test_integration_twin_rule.py`` walks the framework adapters.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import sys
import types
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from test_exception_tree import public_modules
from test_sync_twins import _PROTOCOLS, _same

import fleet_local
import fleet_sdk
from fleet_sdk import TaskEnv

# Classes whose sync methods keep a framework's names (the rule's one exception).
FRAMEWORK_CONTRACT_CLASSES: tuple[type, ...] = (TaskEnv,)

_ASYNC_CLASS = re.compile(r"Async(?=[A-Z])")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _exported(module: types.ModuleType) -> dict[str, Any]:
    return {name: getattr(module, name) for name in getattr(module, "__all__", ())}


def _is_function(value: Any) -> bool:
    return inspect.isfunction(value) or inspect.isbuiltin(value)


def _check_same(sync: Callable[..., Any], source: Callable[..., Any], where: str) -> list[str]:
    try:
        _same(sync, source)
    except AssertionError as exc:
        return [f"{where}: the twin's signature drifted: {exc}"]
    return []


def twin_problems(
    modules: Iterable[types.ModuleType], contract_classes: tuple[type, ...] = FRAMEWORK_CONTRACT_CLASSES
) -> list[str]:
    """Every breach of the twin rule among the names the modules export (``__all__``)."""
    modules = list(modules)
    problems: list[str] = []
    classes: dict[int, tuple[str, type]] = {}
    exported_classes: dict[str, set[type]] = {}
    for module in modules:
        exported = _exported(module)
        for name, value in exported.items():
            where = f"{module.__name__}.{name}"
            if isinstance(value, type):
                classes.setdefault(id(value), (where, value))
                exported_classes.setdefault(name, set()).add(value)
                continue
            if not _is_function(value):
                continue
            if name.endswith("_async"):
                problems.append(f"{where}: an async function has the plain name, not _async")
            elif name.endswith("_sync"):
                source = exported.get(name.removesuffix("_sync"))
                if source is None or not inspect.iscoroutinefunction(source):
                    problems.append(f"{where}: a _sync twin without its async source in the module")
                elif inspect.iscoroutinefunction(value):
                    problems.append(f"{where}: a _sync twin that is itself async")
                else:
                    problems += _check_same(value, source, where)
    for where, cls in classes.values():
        problems += _class_problems(where, cls, exported_classes, contract_classes)
    return problems


def _class_problems(
    where: str, cls: type, exported: dict[str, set[type]], contract_classes: tuple[type, ...]
) -> list[str]:
    problems: list[str] = []
    methods = _public_methods(cls)
    contract = issubclass(cls, contract_classes)
    for name, method in methods.items():
        if name.endswith("_sync"):
            problems.append(f"{where}.{name}: a class twins as X / AsyncX, not as a _sync method")
        elif name.endswith("_async"):
            if not contract:
                problems.append(f"{where}.{name}: _async methods only on a framework-contract class")
            elif (sync := methods.get(name.removesuffix("_async"))) is None:
                problems.append(f"{where}.{name}: no sync method under the framework's name")
            else:
                problems += _check_same(sync, method, f"{where}.{name}")
    if _ASYNC_CLASS.match(cls.__name__):
        # The twin is the class of that name exported beside it (two public ``Database``s exist:
        # the instance's and the verifier runtime's).
        twin_name = _ASYNC_CLASS.sub("", cls.__name__, count=1)
        home = sys.modules.get(cls.__module__)
        twin = getattr(home, twin_name, None) if twin_name in getattr(home, "__all__", ()) else None
        twins = {twin} if isinstance(twin, type) else exported.get(twin_name, set())
        if len(twins) != 1:
            problems.append(f"{where}: an AsyncX class needs exactly one exported sync twin X")
        else:
            sync_methods = _public_methods(next(iter(twins)))
            if sorted(sync_methods) != sorted(methods):
                problems.append(
                    f"{where}: its twin's methods differ: {sorted(set(sync_methods) ^ set(methods))}"
                )
            for name in sync_methods.keys() & methods.keys():
                problems += _check_same(sync_methods[name], methods[name], f"{where}.{name}")
    return problems


def _public_methods(cls: type) -> dict[str, Callable[..., Any]]:
    """A class's public methods as a user calls them (properties and fields are not methods)."""
    methods = {}
    for name in dir(cls):
        if name.startswith("_") or name in _PROTOCOLS:
            continue
        if isinstance(inspect.getattr_static(cls, name, None), property):
            continue
        member = getattr(cls, name, None)
        if callable(member) and not isinstance(member, type):
            methods[name] = member
    return methods


def _dotted_private(value: Any) -> str | None:
    """The private part of what ``value`` is named where it was defined, if any."""
    if isinstance(value, types.ModuleType):
        parts = value.__name__.split(".")
    else:
        qualname = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
        if not isinstance(qualname, str) or not (inspect.isclass(value) or callable(value)):
            return None
        parts = qualname.split(".")
    return next((part for part in parts if _private(part)), None)


def private_name_problems(modules: Iterable[types.ModuleType]) -> list[str]:
    """Every public name of the modules (``__all__`` or a public attribute) bound to a private one."""
    problems: list[str] = []
    for module in modules:
        problems += [
            f"{module.__name__}.__all__ lists the private name {name}"
            for name in getattr(module, "__all__", ())
            if _private(name)
        ]
        for name in dir(module):
            if name.startswith("_"):
                continue
            private = _dotted_private(getattr(module, name))
            if private is not None:
                problems.append(f"{module.__name__}.{name} exposes the private name {private}")
    return problems


def test_every_public_twin_keeps_the_rule() -> None:
    assert twin_problems(public_modules()) == []


def test_no_public_module_exposes_a_private_name() -> None:
    assert private_name_problems(public_modules()) == []


def server_public_modules() -> list[types.ModuleType]:
    """``fleet_local`` and its modules with no private part in their names (``sandbox``...)."""
    names = [
        info.name
        for info in pkgutil.walk_packages(fleet_local.__path__, "fleet_local.")
        if not any(part.startswith("_") for part in info.name.split("."))
    ]
    return [fleet_local, *(importlib.import_module(name) for name in names)]


def test_the_server_s_public_modules_keep_the_rule_too() -> None:
    """The server is another package, but its sandbox's ``run_sandboxed`` is a twin all the same."""
    modules = server_public_modules()
    assert "fleet_local.sandbox" in {module.__name__ for module in modules}
    assert twin_problems(modules) == []
    assert private_name_problems(modules) == []


def test_the_walk_sees_every_kind_of_twin() -> None:
    """Guards the walk itself: the twins the rule names are among what it checks."""
    exported = {(m.__name__, n) for m in public_modules() for n in getattr(m, "__all__", ())}
    for pair in [
        ("fleet_sdk", "AsyncFleet"),
        ("fleet_sdk", "Fleet"),
        ("fleet_sdk.episodes", "play_episode_sync"),
        ("fleet_sdk.evaluation", "run_evaluation_sync"),
        ("fleet_sdk.remote_verifier", "run_remote_sync"),
        ("fleet_sdk.verifiers", "run_local_sync"),
        ("fleet_sdk.task_env", "TaskEnv"),
    ]:
        assert pair in exported


# -- the checks catch each breach in a planted module ---------------------------------------------


def _planted(name: str, **values: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    for key, value in values.items():
        setattr(module, key, value)
    module.__all__ = [key for key in values if not key.startswith("_") or key == "_leaked"]  # type: ignore[attr-defined]
    return module


async def fetch(key: str, *, fresh: bool = False) -> int:
    return 0


def fetch_sync(key: str, *, fresh: bool = False) -> int:
    return 0


def fetch_drifted_sync(key: str) -> int:
    return 0


async def fetch_drifted(key: str, *, fresh: bool = False) -> int:
    return 0


async def fetch_async(key: str) -> int:
    return 0


def orphan_sync() -> None:
    """A ``_sync`` twin of nothing."""


class AsyncThing:
    async def get(self, key: str) -> int:
        return 0


class Thing:
    def get(self, key: str, extra: int = 0) -> int:
        return 0


class AsyncLonely:
    async def get(self) -> None: ...


class Mixed:
    def get(self) -> None: ...

    async def get_async(self) -> None: ...

    def put_sync(self) -> None: ...


class _Hidden:
    pass


def _helper() -> None:
    pass


def test_a_followed_rule_passes() -> None:
    """Guards the checks against false alarms: a correct pair is not a problem."""
    assert twin_problems([_planted("planted.good", fetch=fetch, fetch_sync=fetch_sync)]) == []


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"fetch_async": fetch_async}, "planted.fetch_async: an async function has the plain name"),
        ({"orphan_sync": orphan_sync}, "planted.orphan_sync: a _sync twin without its async source"),
        (
            {"fetch_drifted": fetch_drifted, "fetch_drifted_sync": fetch_drifted_sync},
            "planted.fetch_drifted_sync: the twin's signature drifted",
        ),
        ({"AsyncThing": AsyncThing, "Thing": Thing}, "planted.AsyncThing.get: the twin's signature drifted"),
        ({"AsyncLonely": AsyncLonely}, "planted.AsyncLonely: an AsyncX class needs exactly one"),
        ({"Mixed": Mixed}, "planted.Mixed.get_async: _async methods only on a framework-contract class"),
        ({"Mixed": Mixed}, "planted.Mixed.put_sync: a class twins as X / AsyncX"),
    ],
    ids=[
        "async-suffix",
        "orphan-sync",
        "drifted-function",
        "drifted-class",
        "lonely-async",
        "async-method",
        "sync-method",
    ],
)
def test_each_breach_of_the_twin_rule_is_caught(values: dict[str, Any], expected: str) -> None:
    problems = twin_problems([_planted("planted", **values)])
    assert any(problem.startswith(expected) for problem in problems), problems


def test_a_framework_contract_class_may_have_async_methods_but_not_drifted_ones() -> None:
    class Contract:
        def step(self, action: int) -> None: ...

        async def step_async(self, action: int) -> None: ...

        def reset(self) -> None: ...

        async def reset_async(self, seed: int | None = None) -> None: ...

    problems = twin_problems([_planted("planted", Contract=Contract)], contract_classes=(Contract,))
    assert len(problems) == 1 and problems[0].startswith("planted.Contract.reset_async: the twin's signature")


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({"_leaked": 1}, "planted.__all__ lists the private name _leaked"),
        ({"helper": _helper}, "planted.helper exposes the private name _helper"),
        ({"Hidden": _Hidden}, "planted.Hidden exposes the private name _Hidden"),
        (
            {"runtime": importlib.import_module("fleet_sdk._twin")},
            "planted.runtime exposes the private name _twin",
        ),
    ],
    ids=["in-all", "function", "class", "module"],
)
def test_each_private_name_exposed_is_caught(values: dict[str, Any], expected: str) -> None:
    assert expected in private_name_problems([_planted("planted", **values)])


def test_public_names_of_private_modules_are_not_flagged() -> None:
    """``Fleet`` is defined in a private module and exported by its public name: that is the design."""
    assert fleet_sdk.Fleet.__module__ == "fleet_sdk"  # ``_public.publish`` rewrote it
    assert private_name_problems([_planted("planted", Fleet=fleet_sdk.Fleet, TaskEnv=TaskEnv)]) == []
