"""``nox -s contracts`` runs the whole ``contracts/`` directory (the public SDK's diff checks
among it) and fails when pytest collects no test: it accepts no exit status but 0."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]


class RecordingSession:
    """Enough of ``nox.Session`` for a session function to run: it records instead."""

    def __init__(self) -> None:
        self.env: dict[str, str] = {}
        self.posargs: list[str] = []
        self.runs: list[tuple[tuple[str, ...], dict[str, Any]]] = []

    def install(self, *args: str, **kwargs: Any) -> None:
        pass

    def run(self, *args: str, **kwargs: Any) -> None:
        self.runs.append((args, kwargs))


def _stand_in_nox() -> types.ModuleType:
    """``nox`` as the noxfile uses it, its decorators returning the plain functions: the test
    extra does not install nox (only the dev extra does)."""
    fake = types.ModuleType("nox")

    def decorator(*args: Any, **kwargs: Any) -> Any:
        return lambda function: function

    fake.session = decorator  # type: ignore[attr-defined]
    fake.parametrize = decorator  # type: ignore[attr-defined]
    fake.options = types.SimpleNamespace()  # type: ignore[attr-defined]
    fake.Session = object  # type: ignore[attr-defined]
    return fake


def test_the_contracts_session_runs_every_contract_and_fails_on_none_collected(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "nox", _stand_in_nox())
    spec = importlib.util.spec_from_file_location("noxfile_under_test", ROOT / "noxfile.py")
    assert spec is not None and spec.loader is not None
    noxfile = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(noxfile)
    session = RecordingSession()
    noxfile.contracts(session)
    [(args, kwargs)] = session.runs
    assert args[:2] == ("pytest", "contracts")
    # pytest exits 5 when it collects nothing; nox fails on any status not in success_codes ([0]).
    assert kwargs.get("success_codes") in (None, [0])
    assert (ROOT / "contracts" / "test_public_sdk_structured_diff.py").is_file()
