"""``LocalFleet``'s settings are typed keywords, each reaching the server it starts; one data dir
serves one server at a time."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import httpx
import pytest

from fleet_local import LocalFleet, LocalSettings
from fleet_sdk import FleetError


def test_a_misspelt_setting_is_a_type_error_naming_it() -> None:
    """It used to start a server anyway and fail 2-30 s later with ``unrecognized arguments:
    --allow-unjaild`` (a command-line flag, not the keyword the caller wrote)."""
    settings: dict[str, Any] = {"allow_unjaild": True}
    with pytest.raises(TypeError, match="allow_unjaild"):
        LocalFleet(**settings)


def test_every_server_setting_is_a_keyword() -> None:
    """Each ``LocalSettings`` field a caller may set has its keyword (``faults`` and
    ``allow_unjailed`` under their short names; host, port and data dir are LocalFleet's own)."""
    own = {"data_dir", "api_key", "host", "port"}
    renamed = {"faults_enabled": "faults", "allow_unjailed_verifiers": "allow_unjailed"}
    keywords = set(inspect.signature(LocalFleet).parameters)
    fields = set(inspect.signature(LocalSettings).parameters) - own
    assert {renamed.get(name, name) for name in fields} <= keywords


def test_a_setting_reaches_the_server() -> None:
    with LocalFleet(s3=False, max_body_bytes=2048) as local:
        response = httpx.post(
            f"{local.base_url}/v1/traces/jobs",
            content=b'{"name": "' + b"x" * 4096 + b'"}',
            headers={"Authorization": f"Bearer {local.api_key}", "Content-Type": "application/json"},
            timeout=30,
        )
    assert response.status_code == 413


def test_a_data_dir_in_use_is_refused_naming_its_server(tmp_path: Path) -> None:
    with LocalFleet(tmp_path, s3=False) as first:
        with pytest.raises(FleetError) as info:
            LocalFleet(tmp_path, s3=False).start()
        assert f"the data dir {tmp_path} is in use by another local server (pid {first.pid})" in str(
            info.value
        )
    with LocalFleet(tmp_path, s3=False) as again:  # free once the first stopped
        assert again.base_url
