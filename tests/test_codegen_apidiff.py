"""``codegen.apidiff``: the API changes ``python -m codegen`` prints, breaking ones marked."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from codegen import apidiff
from codegen.__main__ import _report_api_changes


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


BASE: dict[str, Any] = {
    "openapi": "3.1.0",
    "paths": {
        "/v1/widgets": {
            "post": {
                "operationId": "create_widget",
                "requestBody": _json(_ref("WidgetRequest")),
                "responses": {"200": _json(_ref("Widget"))},
            },
            "get": {
                "operationId": "list_widgets",
                "parameters": [
                    {"name": "color", "in": "query", "required": False, "schema": {"type": "string"}},
                    {"name": "size", "in": "query", "required": False, "schema": {"type": "integer"}},
                ],
                "responses": {"200": _json({"type": "array", "items": _ref("Widget")})},
            },
        },
        "/v1/widgets/{widget_id}": {
            "delete": {
                "operationId": "delete_widget",
                "parameters": [
                    {"name": "widget_id", "in": "path", "required": True, "schema": {"type": "string"}}
                ],
                "responses": {"204": {"description": "gone"}},
            }
        },
    },
    "components": {
        "schemas": {
            "WidgetRequest": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string"},
                    "color": {"type": ["string", "null"]},
                    "count": {"type": "integer"},
                    "legacy": {"type": "string"},
                },
            },
            "Widget": {
                "type": "object",
                "required": ["id", "name", "parts"],
                "properties": {
                    "id": {"type": "string"},
                    "name": {"type": "string"},
                    "note": {"type": "string"},
                    "parts": {"type": "array", "items": _ref("Part")},
                },
            },
            "Part": {"type": "object", "required": ["sku"], "properties": {"sku": {"type": "string"}}},
            "Unused": {"type": "object", "properties": {"x": {"type": "string"}}},
        }
    },
}


def changed(edit: Any) -> list[apidiff.Change]:
    new = copy.deepcopy(BASE)
    edit(new)
    return apidiff.diff_documents("widgets.yaml", BASE, new)


def only(changes: list[apidiff.Change]) -> tuple[str, str, bool]:
    assert len(changes) == 1, changes
    return changes[0].subject, changes[0].detail, changes[0].breaking


def schemas(doc: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = doc["components"]["schemas"]
    return result


def test_no_change_is_no_change() -> None:
    assert apidiff.diff_documents("widgets.yaml", BASE, copy.deepcopy(BASE)) == []


def test_a_removed_operation_is_breaking_an_added_one_is_not() -> None:
    subject, detail, breaking = only(changed(lambda d: d["paths"]["/v1/widgets/{widget_id}"].pop("delete")))
    assert subject == "operation DELETE /v1/widgets/{widget_id}" and "delete_widget" in detail and breaking

    def add(d: dict[str, Any]) -> None:
        d["paths"]["/v1/widgets/{widget_id}"]["get"] = {
            "operationId": "get_widget",
            "responses": {"200": _json(_ref("Widget"))},
        }

    subject, detail, breaking = only(changed(add))
    assert (
        subject == "operation GET /v1/widgets/{widget_id}" and detail == "added (get_widget)" and not breaking
    )


def test_a_renamed_operation_id_is_breaking() -> None:
    def rename(d: dict[str, Any]) -> None:
        d["paths"]["/v1/widgets"]["get"]["operationId"] = "widgets"

    assert only(changed(rename)) == ("operation GET /v1/widgets", "renamed list_widgets -> widgets", True)


def test_a_removed_response_field_is_breaking() -> None:
    assert only(changed(lambda d: schemas(d)["Widget"]["properties"].pop("note"))) == (
        "field Widget.note",
        "removed (response)",
        True,
    )


def test_a_field_of_a_nested_response_model_is_on_the_response_side() -> None:
    def remove(d: dict[str, Any]) -> None:
        schemas(d)["Part"]["properties"].pop("sku")
        schemas(d)["Part"]["required"] = []

    assert only(changed(remove)) == ("field Part.sku", "removed (response)", True)


def test_a_request_field_newly_required_is_breaking_newly_optional_is_not() -> None:
    def require(d: dict[str, Any]) -> None:
        schemas(d)["WidgetRequest"]["required"] = ["name", "count"]

    assert only(changed(require)) == ("field WidgetRequest.count", "now required (request)", True)

    def relax(d: dict[str, Any]) -> None:
        schemas(d)["WidgetRequest"]["required"] = []

    assert only(changed(relax)) == ("field WidgetRequest.name", "now optional (request)", False)


def test_a_response_field_newly_optional_is_breaking_newly_required_is_not() -> None:
    def relax(d: dict[str, Any]) -> None:
        schemas(d)["Widget"]["required"] = ["id", "parts"]

    assert only(changed(relax)) == ("field Widget.name", "now optional (response)", True)

    def require(d: dict[str, Any]) -> None:
        schemas(d)["Widget"]["required"] = ["id", "name", "parts", "note"]

    assert only(changed(require)) == ("field Widget.note", "now required (response)", False)


def test_added_fields_break_only_when_a_request_must_send_them() -> None:
    def optional(d: dict[str, Any]) -> None:
        schemas(d)["WidgetRequest"]["properties"]["seed"] = {"type": ["integer", "null"]}

    assert only(changed(optional)) == (
        "field WidgetRequest.seed",
        "added, optional integer | null (request)",
        False,
    )

    def required(d: dict[str, Any]) -> None:
        schemas(d)["WidgetRequest"]["properties"]["seed"] = {"type": "integer"}
        schemas(d)["WidgetRequest"]["required"] = ["name", "seed"]

    assert only(changed(required))[2] is True

    def response(d: dict[str, Any]) -> None:
        schemas(d)["Widget"]["properties"]["region"] = {"type": "string"}
        schemas(d)["Widget"]["required"] = ["id", "name", "parts", "region"]

    assert only(changed(response)) == ("field Widget.region", "added, required string (response)", False)


def test_a_removed_request_field_is_breaking() -> None:
    assert only(changed(lambda d: schemas(d)["WidgetRequest"]["properties"].pop("legacy")))[2] is True


@pytest.mark.parametrize(
    ("model", "field", "new_type", "breaking"),
    [
        ("WidgetRequest", "color", {"type": "string"}, True),  # a request no longer accepts null
        ("WidgetRequest", "count", {"type": ["integer", "null"]}, False),  # a request accepts more
        ("Widget", "note", {"type": ["string", "null"]}, True),  # a response may now be null
        ("Widget", "name", {"type": "integer"}, True),
        ("Widget", "parts", {"type": "array", "items": {"type": "string"}}, True),
    ],
)
def test_type_changes_break_when_a_value_is_no_longer_accepted_or_newly_returned(
    model: str, field: str, new_type: dict[str, Any], breaking: bool
) -> None:
    def retype(d: dict[str, Any]) -> None:
        schemas(d)[model]["properties"][field] = new_type

    subject, detail, is_breaking = only(changed(retype))
    assert subject == f"field {model}.{field}" and detail.startswith("type ") and is_breaking is breaking


def test_parameters_removed_or_newly_required_are_breaking() -> None:
    def remove(d: dict[str, Any]) -> None:
        d["paths"]["/v1/widgets"]["get"]["parameters"].pop(0)

    assert only(changed(remove)) == ("parameter GET /v1/widgets ?color", "removed (request)", True)

    def require(d: dict[str, Any]) -> None:
        d["paths"]["/v1/widgets"]["get"]["parameters"][1]["required"] = True

    assert only(changed(require)) == ("parameter GET /v1/widgets ?size", "now required (request)", True)


def test_models_removed_are_breaking_and_all_of_fields_count() -> None:
    assert only(changed(lambda d: schemas(d).pop("Unused"))) == ("model Unused", "removed", True)

    def alias(d: dict[str, Any]) -> None:  # Widget's fields move to a base model it extends
        base = schemas(d)["Widget"]
        schemas(d)["WidgetBase"] = base
        schemas(d)["Widget"] = {"allOf": [_ref("WidgetBase")]}

    assert only(changed(alias)) == ("model WidgetBase", "added", False)


def test_the_report_marks_breaking_changes() -> None:
    changes = changed(lambda d: schemas(d)["Widget"]["properties"].pop("note"))
    changes += changed(lambda d: schemas(d)["WidgetRequest"]["properties"].update(seed={"type": "integer"}))
    text = apidiff.format_changes(changes, "HEAD")
    assert text.splitlines() == [
        "API changes since HEAD: 2, 1 breaking.",
        "  widgets.yaml",
        "    BREAKING - field Widget.note: removed (response)",
        "             + field WidgetRequest.seed: added, optional integer (request)",
    ]
    assert apidiff.format_changes([], "HEAD") == "API changes since HEAD: none.\n"


def test_codegen_reports_against_the_previous_commit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    schemas_dir = tmp_path / "schemas"
    schemas_dir.mkdir()
    (schemas_dir / "widgets.yaml").write_text(yaml.safe_dump(BASE))

    def git(*args: str) -> None:
        subprocess.run(
            ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
            check=True,
            capture_output=True,
        )

    _report_api_changes(schemas_dir, "HEAD")
    assert "no revision 'HEAD'" in capsys.readouterr().out  # not a git checkout yet
    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "widgets")
    edited = copy.deepcopy(BASE)
    edited["paths"]["/v1/widgets/{widget_id}"].pop("delete")
    (schemas_dir / "widgets.yaml").write_text(yaml.safe_dump(edited))
    _report_api_changes(schemas_dir, "HEAD")
    out = capsys.readouterr().out
    assert "API changes since HEAD" in out and "1 breaking" in out
    assert "BREAKING - operation DELETE /v1/widgets/{widget_id}: removed (delete_widget)" in out


def test_a_union_body_loses_the_keyword_form_and_a_union_response_may_carry_more() -> None:
    """An operation that comes to take or answer one of two models changes its generated method."""

    def widen(d: dict[str, Any]) -> None:
        schemas(d)["WidgetCopy"] = {"type": "object", "required": ["source"], "properties": {"source": {}}}
        post = d["paths"]["/v1/widgets"]["post"]
        post["requestBody"] = _json({"anyOf": [_ref("WidgetRequest"), _ref("WidgetCopy")]})
        post["responses"]["200"] = _json({"anyOf": [_ref("Widget"), _ref("Part")]})

    found = {c.subject: c for c in changed(widen)}
    body = found["body of operation POST /v1/widgets"]
    assert body.detail.startswith("type WidgetRequest -> WidgetCopy | WidgetRequest (")
    assert "keywords" in body.detail and body.breaking
    response = found["response of operation POST /v1/widgets"]
    assert (response.detail, response.breaking) == ("type Widget -> Part | Widget", True)

    def narrow(d: dict[str, Any]) -> None:
        d["paths"]["/v1/widgets"]["post"]["responses"]["200"] = _json(_ref("Part"))

    assert only(changed(narrow)) == ("response of operation POST /v1/widgets", "type Widget -> Part", True)
