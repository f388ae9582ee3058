"""The layer checks catch what they are there for: a violation of each kind planted in a copy.

The contracts are in ``pyproject.toml`` (``[tool.importlinter]``, run by ``lint-imports``) and
ruff's ``PLC2701``; CI and ``nox -s lint`` run them on the real tree. Here each runs on a copy of
the packages, first as they are (kept), then with one module planted that breaks a rule.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the three packages and the project's configuration."""
    copy = tmp_path_factory.mktemp("tree")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for package in ("fleet_sdk", "fleet_local", "generated/fleet_generated"):
        shutil.copytree(ROOT / package, copy / package, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    return copy


def _lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{tree / 'generated'}"}
    return subprocess.run(
        [str(BIN / "lint-imports"), "--no-cache"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _ruff(tree: Path, path: str) -> set[str]:
    """The codes of what ruff, with the project's settings, finds in ``path``."""
    done = subprocess.run(
        [str(BIN / "ruff"), "check", "--no-cache", "--output-format", "json", path],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return {finding["code"] for finding in json.loads(done.stdout)}


def test_the_tree_as_it_is_keeps_every_contract(tree: Path) -> None:
    done = _lint_imports(tree)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_an_sdk_module_importing_the_server_is_caught(tree: Path) -> None:
    planted = tree / "fleet_sdk" / "_planted.py"
    planted.write_text(
        "def start() -> object:\n    from fleet_local import LocalFleet\n\n    return LocalFleet\n"
    )
    try:
        done = _lint_imports(tree)
    finally:
        planted.unlink()
    assert done.returncode == 1, done.stdout
    assert "The SDK never imports the server" in done.stdout
    assert "fleet_sdk._planted -> fleet_local" in done.stdout


def test_the_generated_package_importing_the_sdk_is_caught(tree: Path) -> None:
    planted = tree / "generated" / "fleet_generated" / "_planted.py"
    planted.write_text("import fleet_sdk\n")
    try:
        done = _lint_imports(tree)
    finally:
        planted.unlink()
    assert done.returncode == 1, done.stdout
    assert "fleet_generated._planted -> fleet_sdk" in done.stdout


@pytest.mark.parametrize(
    "line",
    [
        "from fleet_sdk.policies import _ModelReplyError",  # a private name of a public module
        "from fleet_sdk._twin import sync_function",  # a private module
        "from fleet_sdk import _retry",
    ],
)
def test_a_private_name_imported_across_packages_is_caught(tree: Path, line: str) -> None:
    planted = tree / "fleet_local" / "_planted.py"
    name = line.rsplit(maxsplit=1)[-1]
    planted.write_text(f'"""Planted."""\n\n{line}\n\n__all__ = ["{name}"]\n')
    try:
        found = _ruff(tree, "fleet_local/_planted.py")
        clean = _ruff(tree, "fleet_local/_cli.py")
    finally:
        planted.unlink()
    assert found == {"PLC2701"}
    assert clean == set()  # the rule does not refuse everything
