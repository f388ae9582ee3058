"""Importing a trainer adapter without its framework says which extra installs it.

Regression: ``import fleet_sdk.integrations.openenv`` without OpenEnv ended in a bare
``ModuleNotFoundError: No module named 'openenv'``. Each framework is hidden from a fresh
interpreter (``sys.modules[name] = None``, as if it were not installed).
"""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize(
    ("adapter", "package", "extra"),
    [("openenv", "openenv", "openenv"), ("skyrl", "skyrl_gym", "skyrl"), ("ray", "ray", "ray")],
)
def test_an_adapter_without_its_framework_names_its_extra(adapter: str, package: str, extra: str) -> None:
    code = (
        "import sys\n"
        f"sys.modules[{package!r}] = None\n"
        "try:\n"
        f"    import fleet_sdk.integrations.{adapter}\n"
        "except ModuleNotFoundError as exc:\n"
        "    print(exc.name)\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    name, message = done.stdout.splitlines()
    assert name == package
    assert message == (
        f"fleet_sdk.integrations.{adapter} needs {package}, which is not installed: "
        f"pip install 'fleet-sdk[{extra}]'"
    )
