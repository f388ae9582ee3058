"""Our schemas against the public Fleet SDK's models (``contracts/fidelity.py``).

The check itself must pass, and it must fail, naming the field, when a schema drifts: a
field renamed or made required in a copy of ``schemas/`` is reported, and so is an
allowlist entry that no longer matches anything.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from contracts import fidelity


def test_schemas_match_the_public_sdk_models_or_the_allowlist() -> None:
    report = fidelity.check()
    assert report.ok, report.render()
    assert report.allowed, "the allowlist is exercised"


def _mutated_schemas(tmp_path: Path, edit: Any) -> Path:
    target = tmp_path / "schemas"
    shutil.copytree(fidelity.SCHEMAS_DIR, target)
    path = target / "env-instance.yaml"
    doc = yaml.safe_load(path.read_text())
    edit(doc["components"]["schemas"])
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return target


def _unexpected(schemas: Path) -> dict[str, str]:
    report = fidelity.check(schemas)
    assert not report.ok
    return {d.id: d.detail for d in report.unexpected}


def test_a_renamed_field_fails_the_check(tmp_path: Path) -> None:
    def rename(schemas: dict[str, Any]) -> None:
        response = schemas["InstanceResponse"]
        response["properties"]["instance_ident"] = response["properties"].pop("instance_id")
        response["required"] = ["instance_ident" if f == "instance_id" else f for f in response["required"]]

    found = _unexpected(_mutated_schemas(tmp_path, rename))
    assert set(found) == {
        "fleet.models.InstanceResponse.instance_id missing-field",
        "fleet.models.InstanceResponse.instance_ident extra-field",
    }
    assert "required=True" in found["fleet.models.InstanceResponse.instance_id missing-field"]


def test_a_field_made_required_fails_the_check(tmp_path: Path) -> None:
    def require(schemas: dict[str, Any]) -> None:
        schemas["InstanceRequest"]["required"].append("seed")

    found = _unexpected(_mutated_schemas(tmp_path, require))
    assert found == {"fleet.models.InstanceRequest.seed required": "theirs required=False, ours True"}


def test_a_changed_type_fails_the_check(tmp_path: Path) -> None:
    def retype(schemas: dict[str, Any]) -> None:
        schemas["HeartbeatResponse"]["properties"]["deadline_timestamp"]["type"] = ["string", "null"]

    found = _unexpected(_mutated_schemas(tmp_path, retype))
    assert found == {"fleet.models.HeartbeatResponse.deadline_timestamp type": "theirs number, ours string"}


def test_a_stale_allowlist_entry_fails_the_check(tmp_path: Path) -> None:
    data = yaml.safe_load(fidelity.ALLOWLIST.read_text())
    data["allowed"]["fleet.models.Environment.name missing-field"] = "no longer true"
    allowlist = tmp_path / "allowlist.yaml"
    allowlist.write_text(yaml.safe_dump(data))
    report = fidelity.check(allowlist=allowlist)
    assert report.stale == ["fleet.models.Environment.name missing-field"]
    assert not report.ok and "STALE" in report.render()


def test_main_prints_the_diff_and_exits_non_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def drop(schemas: dict[str, Any]) -> None:
        del schemas["AccountResponse"]

    status = fidelity.main(["--schemas", str(_mutated_schemas(tmp_path, drop))])
    out = capsys.readouterr().out
    assert status == 1
    assert "UNEXPECTED fleet.models.AccountResponse missing-model" in out
