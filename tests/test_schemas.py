"""``schemas/*.yaml`` are valid OpenAPI 3.1 and follow the conventions of ``schemas/README.md``.

The generator relies on these conventions (one tag per operation, snake_case operationIds,
named bodies, documented errors), so a schema edit that breaks one fails here with the
operation named, not later as an odd client.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from openapi_spec_validator import validate

from codegen.openapi import load_spec

SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"
FIXTURES = Path(__file__).parent / "fixtures" / "schemas"
EXPECTED = {
    "env-instance.yaml",
    "sessions-ingest.yaml",
    "traces-jobs.yaml",
    "browser-lease.yaml",
    "evaluation-reports.yaml",
}
METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
SNAKE = re.compile(r"[a-z][a-z0-9]*(_[a-z0-9]+)*")
KNOWN_TAGS = {
    "control-plane",
    "instance-manager",
    "sessions",
    "traces-jobs",
    "browser-lease",
    "evaluation-reports",
}
ERROR_SCHEMA = "#/components/schemas/ErrorResponse"

SCHEMA_FILES = sorted(SCHEMAS.glob("*.yaml"))
ALL_FILES = [*SCHEMA_FILES, *sorted(FIXTURES.glob("*.yaml"))]


def _id(path: Path) -> str:
    return f"{path.parent.name}/{path.name}"


@functools.cache
def _load(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return doc


def _deref(doc: dict[str, Any], node: Any) -> Any:
    while isinstance(node, dict) and "$ref" in node:
        target: Any = doc
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def _operations(doc: dict[str, Any]) -> list[tuple[str, str, dict[str, Any], dict[str, Any]]]:
    return [
        (path, method, op, item)
        for path, item in doc["paths"].items()
        for method, op in item.items()
        if method in METHODS
    ]


def _params(doc: dict[str, Any], op: dict[str, Any], item: dict[str, Any]) -> list[dict[str, Any]]:
    return [_deref(doc, p) for p in [*item.get("parameters", []), *op.get("parameters", [])]]


def test_expected_schemas_exist() -> None:
    assert {p.name for p in SCHEMA_FILES} == EXPECTED


@pytest.mark.parametrize("path", ALL_FILES, ids=_id)
def test_validates_as_openapi_31(path: Path) -> None:
    doc = _load(path)
    assert doc["openapi"] == "3.1.0"
    assert doc["info"]["version"] == "1.0.0"
    validate(doc)


@pytest.mark.parametrize("path", ALL_FILES, ids=_id)
def test_servers_and_security(path: Path) -> None:
    doc = _load(path)
    assert doc["servers"] and doc["servers"][0]["url"].startswith("https://")
    bearer = doc["components"]["securitySchemes"]["bearerAuth"]
    assert (bearer["type"], bearer["scheme"]) == ("http", "bearer")
    assert {"bearerAuth": []} in doc["security"]


@pytest.mark.parametrize("path", ALL_FILES, ids=_id)
def test_operation_ids_tags_and_docs(path: Path) -> None:
    doc = _load(path)
    ids = [op.get("operationId") for _, _, op, _ in _operations(doc)]
    assert ids, "no operations"
    assert len(ids) == len(set(ids)), f"duplicate operationIds: {sorted(i for i in ids if ids.count(i) > 1)}"
    declared_tags = {tag["name"] for tag in doc.get("tags", [])}
    for route, method, op, _ in _operations(doc):
        where = f"{method.upper()} {route}"
        assert isinstance(op.get("operationId"), str) and SNAKE.fullmatch(op["operationId"]), where
        assert len(op.get("tags", [])) == 1, f"{where}: exactly one tag, got {op.get('tags')}"
        assert op["tags"][0] in declared_tags, f"{where}: tag {op['tags'][0]} not declared in `tags`"
        if path.parent == SCHEMAS:
            assert op["tags"][0] in KNOWN_TAGS, f"{where}: unknown tag {op['tags'][0]}"
        assert op.get("summary"), f"{where}: no summary"
        assert op.get("description"), f"{where}: no description"


@pytest.mark.parametrize("path", ALL_FILES, ids=_id)
def test_documented_errors(path: Path) -> None:
    """401, 429 and 5XX always; 404 with a path parameter; 422 with a body or query."""
    doc = _load(path)
    for route, method, op, item in _operations(doc):
        where = f"{method.upper()} {route} ({op.get('operationId')})"
        params = _params(doc, op, item)
        statuses = {str(code) for code in op["responses"]}
        required = {"401", "429", "5XX"}
        if any(p["in"] == "path" for p in params):
            required.add("404")
        if "requestBody" in op or any(p["in"] == "query" for p in params):
            required.add("422")
        assert required <= statuses, f"{where}: missing error responses {sorted(required - statuses)}"
        for status in statuses:
            if status[0] in "45":
                response = _deref(doc, op["responses"][status])
                schema = response["content"]["application/json"]["schema"]
                assert schema == {"$ref": ERROR_SCHEMA}, f"{where}: {status} does not use ErrorResponse"
        successes = {s for s in statuses if s.startswith("2")}
        assert successes and successes <= {"200", "201", "202", "204"}, f"{where}: success codes {successes}"


@pytest.mark.parametrize("path", ALL_FILES, ids=_id)
def test_parameters(path: Path) -> None:
    """Path parameters are required strings; query parameters are scalars or string arrays."""
    doc = _load(path)
    for route, method, op, item in _operations(doc):
        where = f"{method.upper()} {route}"
        for param in _params(doc, op, item):
            schema = _deref(doc, param.get("schema", {}))
            if param["in"] == "path":
                assert param.get("required") is True, f"{where}: path parameter {param['name']}"
                assert schema.get("type") == "string", f"{where}: path parameter {param['name']}"
                assert f"{{{param['name']}}}" in route, f"{where}: {param['name']} not in path"
            elif param["in"] == "query" and schema.get("type") == "array":
                assert _deref(doc, schema["items"]).get("type") == "string", f"{where}: {param['name']}"
                assert param.get("style", "form") == "form" and param.get("explode", True), where


@pytest.mark.parametrize("path", ALL_FILES, ids=_id)
def test_error_response_shape(path: Path) -> None:
    schemas = _load(path)["components"]["schemas"]
    error = schemas["ErrorResponse"]
    assert error["required"] == ["detail"]
    assert set(error["properties"]) == {"detail", "code", "retryable"}
    assert set(schemas["ValidationIssue"]["required"]) == {"loc", "msg", "type"}


@pytest.mark.parametrize("path", ALL_FILES, ids=_id)
def test_objects_list_required(path: Path) -> None:
    for name, schema in _load(path)["components"]["schemas"].items():
        if schema.get("type") == "object" or "properties" in schema:
            assert "required" in schema, f"components/schemas/{name} does not list `required`"


@pytest.mark.parametrize("path", SCHEMA_FILES, ids=_id)
def test_instance_manager_paths_have_own_server(path: Path) -> None:
    doc = _load(path)
    for route, method, op, item in _operations(doc):
        if op["tags"] == ["instance-manager"]:
            servers = op.get("servers") or item.get("servers")
            assert servers, f"{method.upper()} {route}: instance-manager path without servers"
            assert op.get("security") == [{}, {"runnerToken": []}], f"{method.upper()} {route}"


@pytest.mark.parametrize("path", ALL_FILES, ids=_id)
def test_generator_accepts_schema(path: Path) -> None:
    """Bodies and responses are named models, parameters are typed: ``codegen`` can read it."""
    spec = load_spec(path)
    assert {op.operation_id for op in spec.operations} == {
        op["operationId"] for _, _, op, _ in _operations(_load(path))
    }
