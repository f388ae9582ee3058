"""One exception tree: every public error is a ``FleetError``, drawn in ``fleet_sdk/_exceptions.py``'s
docstring as it is defined, listed in the README, one class per name; every export shows its
public module; every error survives pickling into a fresh process (Ray ships them)."""

from __future__ import annotations

import dataclasses
import importlib
import pickle
import pkgutil
import re
import subprocess
import sys
import typing
from pathlib import Path
from types import FunctionType, ModuleType
from typing import Any

import httpx
import pydantic
import pytest

import fleet_local
import fleet_sdk
from fleet_local.sandbox import JailUnavailableError, PlainDataError, SandboxError
from fleet_sdk import _exceptions
from fleet_sdk.mcp import MCPSessionExpiredError, MCPTransportError
from fleet_sdk.reports import UnknownPartError
from fleet_sdk.verifiers import (
    InvalidResultError,
    UnknownDatabaseError,
    VerifierCodeError,
)

README = Path(__file__).resolve().parents[1] / "README.md"

# Left out of the walk: each integration imports its framework (an extra).
NOT_WALKED = ("fleet_sdk.integrations",)


def _private(name: str) -> bool:
    return any(part.startswith("_") for part in name.split("."))


def public_modules() -> list[ModuleType]:
    """``fleet_sdk`` and its public modules, subpackages first (so ``fleet_sdk``'s names load last)."""
    names = [
        info.name
        for info in pkgutil.walk_packages(fleet_sdk.__path__, "fleet_sdk.")
        if not _private(info.name) and not info.name.startswith(NOT_WALKED)
    ]
    return [importlib.import_module(name) for name in [*names, "fleet_sdk"]]


def exports() -> list[tuple[str, str, Any]]:
    """``(module, name, value)`` for every name in a public module's ``__all__``."""
    return [
        (module.__name__, name, getattr(module, name))
        for module in public_modules()
        for name in getattr(module, "__all__", ())
    ]


def exported_errors() -> dict[str, set[type[BaseException]]]:
    """Every exported exception class by name (more than one class under a name is a failure)."""
    found: dict[str, set[type[BaseException]]] = {}
    for _, name, value in exports():
        if isinstance(value, type) and issubclass(value, BaseException):
            found.setdefault(name, set()).add(value)
    return found


def drawn_tree() -> dict[str, tuple[str | None, str | None]]:
    """``name -> (drawn parent, [module] marker)`` from the drawing in ``_exceptions``' docstring."""
    doc = _exceptions.__doc__ or ""
    drawn: dict[str, tuple[str | None, str | None]] = {}
    stack: list[str] = []
    for line in doc.splitlines():
        root = re.fullmatch(r"    (FleetError)", line)
        node = re.match(r"    ([│ ]*)[├└]── (\w+)\s+(?:\[(\w+)\])?", line)
        if root:
            stack = ["FleetError"]
            drawn["FleetError"] = (None, None)
        elif node and stack:
            depth = len(node.group(1)) // 4 + 1
            del stack[depth:]
            drawn[node.group(2)] = (stack[-1], node.group(3))
            stack.append(node.group(2))
    return drawn


def test_every_exported_error_is_a_fleet_error_with_one_class_per_name() -> None:
    errors = exported_errors()
    assert len(errors) > 30
    for name, classes in errors.items():
        assert len(classes) == 1, f"{name} names {len(classes)} classes: {classes}"
        assert issubclass(next(iter(classes)), fleet_sdk.FleetError), name


def test_the_server_raises_the_sdks_errors_not_classes_of_the_same_name() -> None:
    """Regression: ``BrowserStartError`` was two classes, the SDK's and the local server's."""
    public = {name: next(iter(classes)) for name, classes in exported_errors().items()}
    for info in pkgutil.walk_packages(fleet_local.__path__, "fleet_local."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if name in public and isinstance(value, type):
                assert value is public[name], f"{info.name}.{name} is another class than the SDK's"


def test_the_drawn_tree_is_the_class_tree() -> None:
    drawn = drawn_tree()
    errors = {name: next(iter(classes)) for name, classes in exported_errors().items()}
    assert set(drawn) == set(errors), "drawn but not exported, or exported but not drawn"
    for name, (parent, marker) in drawn.items():
        cls = errors[name]
        if parent is not None:
            assert parent in [base.__name__ for base in cls.__bases__], f"{name} is drawn under {parent}"
        where = f"fleet_sdk.{marker}" if marker else "fleet_sdk"
        assert getattr(importlib.import_module(where), name) is cls, f"{name} is not exported from {where}"


def test_the_readme_lists_every_error() -> None:
    readme = README.read_text()
    missing = [name for name in exported_errors() if not re.search(rf"\b{name}\b", readme)]
    assert not missing


def _typed_fields(value: type) -> bool:
    return (
        dataclasses.is_dataclass(value)
        or issubclass(value, pydantic.BaseModel)
        or (issubclass(value, tuple) and hasattr(value, "_fields"))  # a NamedTuple, as _public.py has it
        or typing.is_typeddict(value)
    )


def test_exports_show_their_public_module() -> None:
    assert fleet_sdk.NotFoundError.__module__ == "fleet_sdk"
    assert fleet_sdk.Fleet.__module__ == "fleet_sdk"  # loaded on first use, published then
    assert VerifierCodeError.__module__ == "fleet_sdk.verifiers"
    assert MCPTransportError.__module__ == "fleet_sdk.mcp"
    for module, name, value in exports():
        if not isinstance(value, type | FunctionType) or not value.__module__.startswith("fleet_sdk"):
            continue  # constants, typing forms, the generated package's own classes
        if value.__qualname__ != name:
            continue  # an alias under another name: found through the original
        home = importlib.import_module(value.__module__)
        assert getattr(home, value.__qualname__) is value, f"{module}.{name} is not where it says"
        if not (isinstance(value, type) and _typed_fields(value)):
            assert not _private(value.__module__), f"{module}.{name} shows {value.__module__}"


def test_classes_whose_annotations_are_fields_still_resolve_them() -> None:
    """``get_type_hints`` (which pydantic uses on dataclasses) reads a class's own module: those
    classes keep it, so a published module's missing names never break validation."""
    for _, _, value in exports():
        if isinstance(value, type) and _typed_fields(value):
            typing.get_type_hints(value)
    # A pydantic model holding a published dataclass validates (its fields resolve).
    holder = pydantic.create_model("Holder", policy=(fleet_sdk.CallPolicy, ...))
    assert holder(policy=fleet_sdk.CallPolicy(deadline=5.0)).policy.deadline == 5.0


def _samples() -> list[fleet_sdk.FleetError]:
    """One instance of every exported error, with the attributes its constructor sets."""
    request = httpx.Request("GET", "https://orchestrator.fleetai.com/v1/env/instances/i-1")
    call = {"method": "GET", "url": str(request.url), "request_id": "req-1"}

    def status(cls: type[fleet_sdk.APIStatusError], code: int, body: Any) -> fleet_sdk.APIStatusError:
        response = httpx.Response(code, json=body, request=request)
        return cls(f"GET -> {code}", **call, response=response, body=body)

    return [
        fleet_sdk.FleetError("base"),
        fleet_sdk.ConfigurationError("no API key"),
        fleet_sdk.APIError("failed", **call),
        fleet_sdk.APIConnectionError("refused", **call),
        fleet_sdk.APITimeoutError("timed out", **call),
        fleet_sdk.APIResponseValidationError("not JSON", **call, status_code=200, body="<html>"),
        status(fleet_sdk.APIStatusError, 418, {"detail": "teapot"}),
        status(fleet_sdk.BadRequestError, 400, {"detail": "bad"}),
        status(fleet_sdk.AuthenticationError, 401, {"detail": "key"}),
        status(fleet_sdk.PermissionDeniedError, 403, {"detail": "no"}),
        status(fleet_sdk.NotFoundError, 404, {"detail": "gone"}),
        status(fleet_sdk.EnvNotFoundError, 404, {"detail": "env", "code": "env_not_found"}),
        status(fleet_sdk.VersionNotFoundError, 404, {"detail": "v", "code": "version_not_found"}),
        status(fleet_sdk.ConflictError, 409, {"detail": "conflict"}),
        status(fleet_sdk.UnprocessableEntityError, 422, {"detail": [{"loc": ["body"]}]}),
        status(fleet_sdk.RateLimitError, 429, {"detail": "slow down", "retryable": True}),
        status(fleet_sdk.InternalServerError, 500, {"detail": "boom"}),
        fleet_sdk.ClientClosedError("this AsyncFleet is closed"),
        fleet_sdk.MCPError("mcp failed"),
        fleet_sdk.ToolsUnavailableError("no tools"),
        fleet_sdk.ToolNotFoundError("no such tool"),
        MCPTransportError("HTTP 503", sent=True, status_code=503),
        MCPSessionExpiredError("session ended", session_id="s-1"),
        fleet_sdk.EpisodeError("step after done"),
        fleet_sdk.ActionError("unreadable", field="tool_calls[1].function.arguments"),
        fleet_sdk.ContextToolError("bad pattern"),
        fleet_sdk.DatabaseError("no such table: x", sql="SELECT * FROM x", database="current"),
        fleet_sdk.TaskConfigError("task 3: no prompt"),
        fleet_sdk.PolicyError("no endpoint for model"),
        fleet_sdk.EvaluationError("bad run directory"),
        fleet_sdk.EvaluationTimeoutError("job still running"),
        fleet_sdk.BrowserStartError("lease did not start"),
        UnknownPartError("part must be one of ..."),
        VerifierCodeError("syntax_error", "line 1: invalid syntax", lineno=1, detail="x ^"),
        InvalidResultError("not a score"),
        UnknownDatabaseError("archive", ["seed", "current"]),
    ]


SERVER_SAMPLES = [
    SandboxError("timeout must be positive"),
    JailUnavailableError("bubblewrap is not installed"),
    PlainDataError("not plain data: datetime.datetime", offending="datetime.datetime"),
]
"""The local server's sandbox errors: ``FleetError``s too, but not the SDK's to export."""


def _same(copy: BaseException, original: BaseException) -> None:
    assert type(copy) is type(original)
    assert str(copy) == str(original) and copy.args == original.args
    state, expected = dict(vars(copy)), dict(vars(original))
    response, sent = state.pop("response", None), expected.pop("response", None)
    assert state == expected
    if sent is not None:
        assert response.status_code == sent.status_code and response.json() == sent.json()


def test_every_error_pickles_and_copies() -> None:
    samples = _samples()
    assert {type(error) for error in samples} == {next(iter(c)) for c in exported_errors().values()}
    for error in [*samples, *SERVER_SAMPLES]:
        assert isinstance(error, fleet_sdk.FleetError)
        _same(pickle.loads(pickle.dumps(error)), error)


def test_errors_unpickle_in_a_fresh_process_through_their_public_modules() -> None:
    """What Ray does with a worker's error: the receiving process imports the class by its path."""
    payload = pickle.dumps(_samples())
    script = (
        "import pickle, sys\n"
        "errors = pickle.loads(sys.stdin.buffer.read())\n"
        "print('\\n'.join(f'{type(e).__module__}.{type(e).__qualname__}|{e}' for e in errors))\n"
    )
    shown = subprocess.run(
        [sys.executable, "-c", script], input=payload, capture_output=True, check=True, timeout=60
    ).stdout.decode()
    expected = [f"{type(e).__module__}.{type(e).__qualname__}|{e}" for e in _samples()]
    assert shown.splitlines() == expected
    assert "fleet_sdk.NotFoundError|GET -> 404 (request_id=req-1)" in shown.splitlines()


@pytest.mark.parametrize("cls", [fleet_sdk.APIStatusError, JailUnavailableError, VerifierCodeError])
def test_errors_with_keyword_arguments_are_rebuilt_without_calling_init(cls: type) -> None:
    """Regression: the default ``cls(*args)`` dropped keyword-only arguments, so unpickling failed."""
    sample = next(error for error in [*_samples(), *SERVER_SAMPLES] if type(error) is cls)
    _same(pickle.loads(pickle.dumps(sample)), sample)
