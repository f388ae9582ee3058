"""Reading the recorded cassettes and finding each request's OpenAPI operation.

Shared by ``test_cassettes.py`` and ``test_hosts.py``. The operation of a recorded request is
found by method and URL: each path template of ``schemas/*.yaml`` is anchored to the
*production* server of that path (the document's first ``servers`` entry, or the path's own
``servers`` for the instance manager API, ``https://{instance_host}/api/v1/env``), so a request
on the wrong host finds no operation at all.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml
from openapi_schema_validator import OAS31Validator
from vcr.request import Request
from vcr.serialize import deserialize
from vcr.serializers import yamlserializer

from contracts.recording import CASSETTES

__all__ = [
    "SCHEMAS",
    "Interaction",
    "Operation",
    "cassette_paths",
    "find_operation",
    "interactions",
    "load_cassette",
    "operations",
    "request_schema",
    "response_spec",
    "schema_errors",
]

SCHEMAS: Final = Path(__file__).resolve().parent.parent / "schemas"
_METHODS: Final = ("get", "put", "post", "delete", "patch", "head", "options")


@dataclass(frozen=True)
class Interaction:
    """One recorded request and its response, with where it was recorded."""

    cassette: str
    index: int
    request: Request
    response: dict[str, Any]

    @property
    def label(self) -> str:
        """``cassette#index METHOD uri`` for messages."""
        return f"{self.cassette}#{self.index} {self.request.method} {self.request.uri}"

    @property
    def status(self) -> int:
        """The response status code."""
        return int(self.response["status"]["code"])

    @property
    def response_body(self) -> bytes:
        """The response body bytes."""
        body = self.response.get("body", {}).get("string", b"")
        return body.encode() if isinstance(body, str) else bytes(body or b"")

    def response_header(self, name: str) -> str | None:
        """A response header (first value), case-insensitively."""
        for key, values in (self.response.get("headers") or {}).items():
            if key.lower() == name.lower():
                value = values[0] if isinstance(values, list) else values
                return value.decode() if isinstance(value, bytes) else str(value)
        return None


def cassette_paths() -> list[Path]:
    """Every committed cassette, sorted."""
    return sorted(CASSETTES.glob("*.yaml"))


@functools.cache
def load_cassette(path: Path) -> tuple[Interaction, ...]:
    """The interactions of one cassette file."""
    requests, responses = deserialize(path.read_text(), yamlserializer)
    return tuple(
        Interaction(path.stem, index, request, response)
        for index, (request, response) in enumerate(zip(requests, responses, strict=True))
    )


def interactions() -> Iterator[Interaction]:
    """Every interaction of every cassette."""
    for path in cassette_paths():
        yield from load_cassette(path)


# ---------------------------------------------------------------- OpenAPI operations


@dataclass(frozen=True)
class Operation:
    """One OpenAPI operation, anchored to its production URL."""

    document: str
    method: str
    path: str
    url_pattern: re.Pattern[str]
    spec: dict[str, Any]
    components: dict[str, Any]

    @property
    def literal_segments(self) -> int:
        """Segments without a parameter: the more, the more specific the template."""
        return sum(1 for part in self.path.split("/") if part and "{" not in part)

    @property
    def operation_id(self) -> str:
        """The ``operationId``."""
        return str(self.spec.get("operationId", f"{self.method} {self.path}"))


def _template_regex(template: str) -> str:
    parts = re.split(r"(\{[^}]+\})", template)
    return "".join("[^/]+" if part.startswith("{") else re.escape(part) for part in parts)


@functools.cache
def operations() -> tuple[Operation, ...]:
    """Every operation of ``schemas/*.yaml``."""
    found: list[Operation] = []
    for schema_path in sorted(SCHEMAS.glob("*.yaml")):
        document = yaml.safe_load(schema_path.read_text())
        components = document.get("components", {})
        default_server = document["servers"][0]["url"]
        for path, item in document.get("paths", {}).items():
            servers = item.get("servers") or []
            server = servers[0]["url"] if servers else default_server
            pattern = re.compile("^" + _template_regex(server.rstrip("/")) + _template_regex(path) + "$")
            for method in _METHODS:
                if method in item:
                    found.append(
                        Operation(schema_path.name, method.upper(), path, pattern, item[method], components)
                    )
    return tuple(found)


def find_operation(request: Request) -> Operation | None:
    """The operation a request calls (the most specific template wins), or None."""
    url = f"{request.scheme}://{request.host}{request.path}"
    if request.port not in (None, {"https": 443, "http": 80}.get(request.scheme)):
        url = f"{request.scheme}://{request.host}:{request.port}{request.path}"
    candidates = [
        op for op in operations() if op.method == request.method.upper() and op.url_pattern.match(url)
    ]
    if not candidates:
        return None
    return max(candidates, key=lambda op: op.literal_segments)


def _resolve(node: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node and node["$ref"].startswith("#/components/"):
        section, name = node["$ref"].removeprefix("#/components/").split("/", 1)
        node = components[section][name]
    return node


def _json_schema(content: dict[str, Any] | None) -> dict[str, Any] | None:
    if not content:
        return None
    for media, spec in content.items():
        if media.split(";")[0].strip() in ("application/json", "application/problem+json"):
            schema = spec.get("schema")
            return schema if isinstance(schema, dict) else None
    return None


def _validate(schema: dict[str, Any], components: dict[str, Any], instance: Any) -> list[str]:
    validator = OAS31Validator(
        {**schema, "components": components}, format_checker=OAS31Validator.FORMAT_CHECKER
    )
    return [
        f"{'/'.join(str(p) for p in error.absolute_path) or '$'}: {error.message}"
        for error in sorted(validator.iter_errors(instance), key=lambda e: list(map(str, e.absolute_path)))
    ]


def request_schema(operation: Operation) -> dict[str, Any] | None:
    """The JSON schema of an operation's request body, or None when it takes none."""
    body = operation.spec.get("requestBody")
    if body is None:
        return None
    return _json_schema(_resolve(body, operation.components).get("content"))


def response_spec(operation: Operation, status: int) -> dict[str, Any] | None:
    """The documented response for ``status`` (exact, then ``4XX``/``5XX``, then ``default``)."""
    responses = operation.spec.get("responses", {})
    for key in (str(status), f"{str(status)[0]}XX", "default"):
        if key in responses:
            return _resolve(responses[key], operation.components)
    return None


def schema_errors(operation: Operation, schema: dict[str, Any], instance: Any) -> list[str]:
    """Validation errors of ``instance`` against ``schema`` (with the document's components)."""
    return _validate(schema, operation.components, instance)
