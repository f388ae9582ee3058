"""Every JSON request body is checked against its operation's schema in ``schemas/*.yaml``.

FastAPI validates bodies with the generated pydantic models in lax mode, which lets through
what the schemas forbid: ``false`` for an integer, ``"1"`` for a number, ``null`` for a field
whose type does not include ``null`` (the generated models type every optional field
``X | None``), ``0`` for a ``date-time``. So the schemas themselves decide: at startup each
operation's ``requestBody`` schema becomes one JSON Schema 2020-12 validator (OpenAPI 3.1
schemas are JSON Schema), and the request gate (``_request_gate``) checks each body with
:meth:`BodySchemas.check` before any route sees it. Anything refused is answered as FastAPI's
422, ``detail: [{loc: ["body", ...path to the bad field], msg, type}]``, so the response names
the field. A body the schema accepts still goes through the route's pydantic model as before.

The check runs in the order that costs least for a hostile body: the JSON is parsed; a body
nested deeper than ``fleet_sdk.protocol.MAX_JSON_DEPTH``, or holding more than
``MAX_JSON_VALUES`` values, is refused (on any route, schema operation or not); then the
schema's size bounds (``maxItems``, ``maxLength``, ``maxProperties``) are compared with the
sizes of what is there, top-down, before anything inside an oversized value is looked at; only
then does the validator walk the body, and last come values no schema type can refuse (lone
surrogates, ``NaN``). The check is blocking; the gate runs it in a worker thread for any body
larger than a few kilobytes.

The schemas are looked up in ``$FLEET_LOCAL_SCHEMAS``, then next to this module
(``fleet_local/schemas``, for a packaged server), then in the source tree's ``schemas/``.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml
from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from jsonschema import Draft202012Validator, FormatChecker  # type: ignore[import-untyped]
from jsonschema.exceptions import ValidationError  # type: ignore[import-untyped]
from pydantic import ValidationError as PydanticValidationError
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012
from starlette.routing import compile_path

from fleet_sdk.protocol import MAX_JSON_DEPTH, too_deep

__all__ = [
    "CHECKED_BODY",
    "MAX_JSON_VALUES",
    "SCHEMAS_ENV",
    "BodySchema",
    "BodySchemas",
    "CheckedBody",
    "checked_body",
    "find_schemas",
    "is_json_media",
    "load_body_schemas",
    "model_refusal",
]

SCHEMAS_ENV = "FLEET_LOCAL_SCHEMAS"
"""Directory of the ``*.yaml`` schemas, when not the packaged or source-tree one."""

_HERE = Path(__file__).resolve().parent
_CANDIDATES = (_HERE / "schemas", _HERE.parent / "schemas")
_BASE_URI = "https://fleet-sdk.local/schemas/"
_METHODS = ("get", "put", "post", "delete", "patch")
_JSON_CONTENT = "application/json"
_MAX_MSG = 200
_NAMED_GROUP = re.compile(r"\(\?P<[A-Za-z_][A-Za-z0-9_]*>")
"""A named group's opening in a route regex (made plain where regexes are joined)."""

# RFC 3339 ``date-time`` (what OpenAPI's ``format: date-time`` means), except that a client may
# leave out the zone, which is then read as UTC (schemas/README.md: clients send
# ``datetime.now().isoformat()``).
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})?")

_FORMATS = FormatChecker(formats=())


def _is_date_time(value: object) -> bool:
    if not isinstance(value, str):
        return True  # ``type`` rules on non-strings
    if _RFC3339.fullmatch(value) is None:
        return False
    try:
        datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


_FORMATS.checks("date-time")(_is_date_time)

# pydantic's names for the failures the schemas can report (the ``type`` of a ValidationIssue).
_TYPE_NAMES = {
    "integer": "int_type",
    "number": "float_type",
    "string": "string_type",
    "boolean": "bool_type",
    "object": "dict_type",
    "array": "list_type",
    "null": "none_required",
}
_KEYWORD_TYPES = {
    "required": "missing",
    "additionalProperties": "extra_forbidden",
    "enum": "enum",
    "const": "literal_error",
    "minimum": "greater_than_equal",
    "exclusiveMinimum": "greater_than",
    "maximum": "less_than_equal",
    "exclusiveMaximum": "less_than",
    "minLength": "string_too_short",
    "maxLength": "string_too_long",
    "pattern": "string_pattern_mismatch",
    "minItems": "too_short",
    "maxItems": "too_long",
    "format": "format",
    "anyOf": "union",
    "oneOf": "union",
}


def find_schemas() -> Path:
    """The directory holding the four ``*.yaml`` schemas.

    Raises:
        RuntimeError: when none of the places it may be in has them.
    """
    override = os.environ.get(SCHEMAS_ENV)
    candidates = (Path(override),) if override else _CANDIDATES
    for candidate in candidates:
        if (candidate / "env-instance.yaml").is_file():
            return candidate
    tried = ", ".join(str(c) for c in candidates)
    raise RuntimeError(
        f"the local server validates request bodies against schemas/*.yaml, but found none in {tried}; "
        f"set {SCHEMAS_ENV} to the directory of the schemas"
    )


def _pointer(*parts: str) -> str:
    return "".join("/" + part.replace("~", "~0").replace("/", "~1") for part in parts)


@dataclass(frozen=True)
class BodySchema:
    """The request body of one operation.

    Attributes:
        operation: ``operationId (file)``, for messages.
        required: Whether the schema requires a body.
        validator: The compiled validator of the body's schema.
        resolver: Resolves the ``$ref`` of ``validator.schema`` (for the size bounds).
    """

    operation: str
    required: bool
    validator: Any
    resolver: Any

    def issues(self, body: Any) -> list[dict[str, Any]]:
        """The ValidationIssues of ``body`` (empty when it is valid), ``loc`` starting at ``"body"``."""
        seen: set[tuple[tuple[str | int, ...], str]] = set()
        issues: list[dict[str, Any]] = []
        for error in self.validator.iter_errors(body):
            for issue in (issue for cause in _causes(error) for issue in _issues(cause)):
                key = (tuple(issue["loc"]), issue["type"])
                if key not in seen:
                    seen.add(key)
                    issues.append(issue)
        return issues

    def oversized(self, body: Any) -> list[dict[str, Any]]:
        """Issues for arrays, strings and objects larger than the schema's ``maxItems``,
        ``maxLength`` and ``maxProperties``, found top-down: nothing inside an oversized value
        is looked at (the validator would walk all of it, and quote it whole in its message)."""
        return _oversized(self.validator.schema, body, ("body",), self.resolver, 0)


_SIZE_BOUNDS = (
    ("maxItems", list, "List should have at most {bound} items, not {size}", "too_long"),
    ("maxLength", str, "String should have at most {bound} characters, not {size}", "string_too_long"),
    ("maxProperties", dict, "Object should have at most {bound} properties, not {size}", "too_long"),
)


def _oversized(schema: Any, value: Any, loc: tuple[str | int, ...], resolver: Any, depth: int) -> list[Any]:
    """The size-bound issues of ``value`` under ``schema`` (see ``BodySchema.oversized``).

    Only what the schema pins down is followed: ``$ref``, ``allOf``, ``properties``,
    ``additionalProperties`` and ``items``; an ``anyOf``/``oneOf`` counts only when every
    branch finds the value too large. Deeper than ``MAX_JSON_DEPTH`` is the depth check's.
    """
    if not isinstance(schema, dict) or depth > MAX_JSON_DEPTH:
        return []
    for keyword, kind, message, issue_type in _SIZE_BOUNDS:
        bound = schema.get(keyword)
        if isinstance(value, kind) and isinstance(bound, int) and len(value) > bound:
            return [_issue(loc, message.format(bound=bound, size=len(value)), issue_type)]
    issues: list[Any] = []
    if isinstance(schema.get("$ref"), str):
        resolved = resolver.lookup(schema["$ref"])
        issues += _oversized(resolved.contents, value, loc, resolved.resolver, depth)
    for sub in schema.get("allOf", ()):
        issues += _oversized(sub, value, loc, resolver, depth)
    for keyword in ("anyOf", "oneOf"):
        found = [_oversized(sub, value, loc, resolver, depth) for sub in schema.get(keyword, ())]
        if found and all(found):
            issues += found[0]
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for name, child in value.items():
            sub = properties.get(name, extra)
            if isinstance(sub, dict) and sub:
                issues += _oversized(sub, child, (*loc, name), resolver, depth + 1)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict) and schema["items"]:
        for index, child in enumerate(value):
            issues += _oversized(schema["items"], child, (*loc, index), resolver, depth + 1)
    return issues


@dataclass(frozen=True)
class CheckedBody:
    """A JSON body as the request gate checked it.

    Attributes:
        value: The decoded body (None when it was empty or refused).
        issues: Why it is refused (ValidationIssues naming the field); empty when accepted.
        too_large: It is refused for holding more than ``MAX_JSON_VALUES`` values (a 413).
    """

    value: Any
    issues: list[dict[str, Any]]
    too_large: bool = False


MAX_JSON_VALUES = 500_000
"""The most values (objects, arrays and scalars, each counted) a JSON body may hold, 413 beyond.

Every step after decoding costs per value, and the validator tens of microseconds each, so a
body of a million small values would keep a core busy for a minute. A full 5 MiB report holds
about 300,000; an ingest of 10,000 messages with tool calls about 100,000."""

CHECKED_BODY = "fleet_local.checked_body"
"""Where the request gate leaves the :class:`CheckedBody` of a request in its ASGI scope."""


def checked_body(request: Request) -> Any:
    """The decoded JSON body the request gate checked, for a route that reads its own body.

    Raises:
        RequestValidationError: The body is not JSON by its ``Content-Type`` (422 naming the
            body, as a FastAPI body parameter answers).
        RuntimeError: The request did not come through the gate.
    """
    checked = request.scope.get(CHECKED_BODY)
    if not isinstance(checked, CheckedBody):
        raise RuntimeError("the request gate did not check this request's body")
    if checked.value is None and not is_json_media(request.headers.get("content-type", "")):
        msg = "the body must be JSON (Content-Type: application/json)"
        raise RequestValidationError([_issue(("body",), msg, "model_attributes_type")])
    return checked.value


def _holds_more_than(value: Any, limit: int) -> bool:
    """Whether ``value`` holds more than ``limit`` values (itself and everything in it)."""
    count = 1
    stack = [value]
    while stack:
        item = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        count += len(children)
        if count > limit:
            return True
        stack.extend(child for child in children if isinstance(child, dict | list))
    return False


def model_refusal(exc: PydanticValidationError, *where: str | int) -> RequestValidationError:
    """The 422 of a body part a route's pydantic model refused (at ``where`` in the body).

    Args:
        exc: What the model said.
        where: The path from the body to the part the model was given.
    """
    return RequestValidationError(
        [
            {"loc": ("body", *where, *error["loc"]), "msg": error["msg"], "type": error["type"]}
            for error in exc.errors(include_url=False)
        ]
    )


def _decode(raw: bytes) -> tuple[Any, list[dict[str, Any]]]:
    """The JSON value of ``raw``, or the issue that says why it is none."""
    try:
        return json.loads(raw), []
    except RecursionError:  # the parser's own nesting limit (far above ours)
        msg = f"JSON nested deeper than {MAX_JSON_DEPTH} levels"
        return None, [_issue(("body",), msg, "json_invalid")]
    except json.JSONDecodeError as exc:
        return None, [_issue(("body", exc.pos), f"JSON decode error: {exc.msg}", "json_invalid")]
    except ValueError as exc:  # bytes that are no Unicode text
        return None, [_issue(("body",), f"JSON decode error: {type(exc).__name__}", "json_invalid")]


def _type_name(expected: Any) -> str:
    names = [expected] if isinstance(expected, str) else [t for t in expected if t != "null"] or ["null"]
    return _TYPE_NAMES.get(names[0], "type_error")


def _truncate(text: str) -> str:
    return text if len(text) <= _MAX_MSG else text[: _MAX_MSG - 3] + "..."


def _causes(error: ValidationError) -> list[ValidationError]:
    """The errors to report for ``error``: for an ``anyOf``/``oneOf``, those of the one branch meant.

    A branch is not the one meant when the value is not of its type, or when a ``const`` of its
    properties (a discriminator such as a content block's ``type``) does not match; among object
    shapes, when it lacks a required property another has. When exactly one branch is left, its
    errors are reported (they name deeper fields); else the union's own.
    """
    if error.validator not in ("anyOf", "oneOf") or not error.context:
        return [error]
    branches: dict[Any, list[ValidationError]] = {}
    for sub in error.context:
        branches.setdefault(sub.relative_schema_path[0], []).append(sub)
    depth = len(error.absolute_path)

    def meant(errors: list[ValidationError]) -> bool:
        return not any(
            (e.validator == "type" and len(e.absolute_path) == depth)
            or (e.validator == "const" and len(e.absolute_path) == depth + 1)
            for e in errors
        )

    candidates = [errors for errors in branches.values() if meant(errors)]
    if len(candidates) > 1:
        # A union of object shapes (the manager's two verifier bodies): the branch meant is the
        # one whose required properties are all there; when none is, the closest (fewest errors).
        complete = [
            errors
            for errors in candidates
            if not any(e.validator == "required" and len(e.absolute_path) == depth for e in errors)
        ]
        candidates = complete or [min(candidates, key=len)]
    if len(candidates) != 1:
        return [error]
    return [cause for sub in candidates[0] for cause in _causes(sub)]


def _union_types(error: ValidationError) -> list[str] | None:
    """The types an ``anyOf``/``oneOf`` allows, when every branch failed on the value's type."""
    depth = len(error.absolute_path)
    types: list[str] = []
    for sub in error.context:
        if sub.validator != "type" or len(sub.absolute_path) != depth:
            continue
        expected = sub.validator_value
        types += [expected] if isinstance(expected, str) else list(expected)
    branches = {sub.relative_schema_path[0] for sub in error.context}
    typed = {sub.relative_schema_path[0] for sub in error.context if sub.validator == "type"}
    return list(dict.fromkeys(types)) if types and typed == branches else None


def _issues(error: ValidationError) -> list[dict[str, Any]]:
    """One or more ValidationIssues for a JSON Schema error; each names the field it is about."""
    loc: list[str | int] = ["body", *error.absolute_path]
    keyword = str(error.validator)
    instance = error.instance
    if keyword == "required" and isinstance(instance, dict):
        missing = [name for name in error.validator_value if name not in instance]
        return [{"loc": [*loc, name], "msg": "Field required", "type": "missing"} for name in missing]
    if keyword == "additionalProperties" and isinstance(instance, dict):
        known = error.schema.get("properties", {})
        patterns = error.schema.get("patternProperties", {})
        extra = [
            name
            for name in instance
            if name not in known and not any(re.search(pattern, name) for pattern in patterns)
        ]
        return [
            {"loc": [*loc, name], "msg": "Extra inputs are not permitted", "type": "extra_forbidden"}
            for name in extra
        ]
    if keyword == "type":
        expected = error.validator_value
        allowed = " or ".join([expected] if isinstance(expected, str) else expected)
        return [{"loc": loc, "msg": f"Input should be of type {allowed}", "type": _type_name(expected)}]
    if keyword in ("anyOf", "oneOf") and (types := _union_types(error)):
        return [
            {"loc": loc, "msg": f"Input should be of type {' or '.join(types)}", "type": _type_name(types)}
        ]
    if keyword == "format":
        msg = f"Input should be a valid {error.validator_value}"
        if error.validator_value == "date-time":
            msg += " (RFC 3339, e.g. 2024-01-31T12:00:00Z; without a zone it is read as UTC)"
        return [{"loc": loc, "msg": msg, "type": f"{str(error.validator_value).replace('-', '_')}_format"}]
    return [{"loc": loc, "msg": _truncate(error.message), "type": _KEYWORD_TYPES.get(keyword, keyword)}]


class BodySchemas:
    """The request-body validators of every schema operation, by method and local path template.

    Args:
        schemas: Directory of the ``*.yaml`` schemas.
        prefixes: Where the local server mounts the operations of a tag (the instance manager's
            paths are relative to each instance's manager base), by tag.
    """

    def __init__(self, schemas: Path, prefixes: Mapping[str, str]) -> None:
        documents: dict[str, Any] = {}
        for path in sorted(schemas.glob("*.yaml")):
            loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
            documents[path.name] = yaml.load(path.read_text(encoding="utf-8"), Loader=loader)
        registry: Registry[Any] = Registry().with_resources(
            (_BASE_URI + name, Resource.from_contents(doc, default_specification=DRAFT202012))
            for name, doc in documents.items()
        )
        self._bodies: dict[tuple[str, str], BodySchema] = {}
        resolver = registry.resolver()
        for name, doc in documents.items():
            for route, item in doc.get("paths", {}).items():
                for method in _METHODS:
                    op = item.get(method)
                    if not isinstance(op, dict) or "requestBody" not in op:
                        continue
                    body = op["requestBody"]
                    if _JSON_CONTENT not in body.get("content", {}):
                        continue
                    pointer = _pointer(
                        "paths", route, method, "requestBody", "content", _JSON_CONTENT, "schema"
                    )
                    validator = Draft202012Validator(
                        {"$ref": f"{_BASE_URI}{name}#{pointer}"}, registry=registry, format_checker=_FORMATS
                    )
                    prefix = next((prefixes[tag] for tag in op.get("tags", ()) if tag in prefixes), "")
                    self._bodies[(method.upper(), prefix + route)] = BodySchema(
                        operation=f"{op.get('operationId')} ({name})",
                        required=bool(body.get("required", False)),
                        validator=validator,
                        resolver=resolver,
                    )
        # Resolve every $ref now, so a broken schema fails at startup and not on a request.
        for body_schema in self._bodies.values():
            body_schema.validator.is_valid(None)
            body_schema.oversized(None)
        # Concrete paths find their operation as Starlette's router would: a template's
        # parameters match one path segment, and a literal path wins over a template.
        self._templates = [
            (method, compile_path(path)[0], body_schema)
            for (method, path), body_schema in self._bodies.items()
            if "{" in path
        ]
        # Per method, the templates as one regex (tried once per request instead of once per
        # template); the first alternative that matches is the template ``next`` would find.
        self._by_method: dict[str, tuple[re.Pattern[str], list[BodySchema]]] = {}
        for method in {m for m, _, _ in self._templates}:
            ordered = [(regex, b) for m, regex, b in self._templates if m == method]
            joined = "|".join(
                f"(?P<_t{i}>{_NAMED_GROUP.sub('(?:', regex.pattern)})" for i, (regex, _) in enumerate(ordered)
            )
            self._by_method[method] = (re.compile(joined), [b for _, b in ordered])

    def match(self, method: str, path: str) -> BodySchema | None:
        """The body schema of the operation a request for ``method path`` (a concrete path) reaches."""
        method = method.upper()
        literal = self._bodies.get((method, path))
        if literal is not None:
            return literal
        templates = self._by_method.get(method)
        if templates is None:
            return None
        found = templates[0].match(path)
        return None if found is None or found.lastgroup is None else templates[1][int(found.lastgroup[2:])]

    def check(self, method: str, path: str, raw: bytes, *, is_json: bool = True) -> CheckedBody:
        """Decode and judge a request body (blocking: the gate runs big ones in a worker).

        Args:
            method: The request's method.
            path: The request's path.
            raw: The body as received (empty when there is none).
            is_json: Whether its ``Content-Type`` says JSON; any other body is only checked for
                being there when its operation requires one (the route refuses what it cannot read).
        """
        body_schema = self.match(method, path)
        if not raw:
            missing = body_schema is not None and body_schema.required
            return CheckedBody(None, [_issue(("body",), "Field required", "missing")] if missing else [])
        if not is_json:
            return CheckedBody(None, [])
        value, issues = _decode(raw)
        if issues:
            return CheckedBody(None, issues)
        # Both walks are skipped where the body is too short to fail them: a container at level
        # MAX_JSON_DEPTH + 1 takes that many opening and closing brackets, and every value at
        # least one character (each at least a byte), so a short body cannot be refused for either.
        where = too_deep(value) if len(raw) >= 2 * (MAX_JSON_DEPTH + 1) else None
        if where is not None:
            msg = f"arrays and objects nest deeper than {MAX_JSON_DEPTH} levels here"
            return CheckedBody(None, [_issue(("body", *where), msg, "too_deep")])
        if len(raw) > MAX_JSON_VALUES and _holds_more_than(value, MAX_JSON_VALUES):
            msg = f"request body holds more than {MAX_JSON_VALUES} JSON values"
            return CheckedBody(None, [_issue(("body",), msg, "too_many_values")], too_large=True)
        if body_schema is not None:
            issues = body_schema.oversized(value) or body_schema.issues(value) or unstorable_values(value)
        return CheckedBody(None if issues else value, issues)

    def check_routes(self, routes: Iterable[Any]) -> None:
        """Every route taking a body is a schema operation with a body, and the other way round.

        Raises:
            RuntimeError: naming the routes and operations left without a match.
        """
        served: set[tuple[str, str]] = set()
        unchecked: list[str] = []
        for route in routes:
            if not isinstance(route, APIRoute):
                continue
            for method in route.methods or ():
                served.add((method, route.path_format))
                if route.body_field is not None and (method, route.path_format) not in self._bodies:
                    unchecked.append(f"{method} {route.path_format}")
        unserved = [f"{m} {p} ({b.operation})" for (m, p), b in self._bodies.items() if (m, p) not in served]
        if unchecked or unserved:
            raise RuntimeError(
                "request-body validation does not line up with the routes: "
                f"routes with a body but no schema operation: {unchecked or 'none'}; "
                f"schema operations with a body but no route: {unserved or 'none'}"
            )


@functools.cache
def _load_cached(schemas: Path, prefixes: tuple[tuple[str, str], ...]) -> BodySchemas:
    return BodySchemas(schemas, dict(prefixes))


def load_body_schemas(prefixes: Mapping[str, str], schemas: Path | None = None) -> BodySchemas:
    """The validators for ``schemas`` (default: :func:`find_schemas`), built once per process."""
    return _load_cached((schemas or find_schemas()).resolve(), tuple(sorted(prefixes.items())))


def is_json_media(content_type: str) -> bool:
    """Whether a ``Content-Type`` names JSON (``application/json`` or ``application/*+json``)."""
    media = content_type.split(";", 1)[0].strip().lower()
    return media == _JSON_CONTENT or (media.startswith("application/") and media.endswith("+json"))


_SURROGATE_MSG = "Input should be valid Unicode (no lone surrogates)"


def unstorable_values(value: Any, loc: tuple[str | int, ...] = ("body",)) -> list[dict[str, Any]]:
    """Issues for values JSON decoding lets through but no schema type means and the store
    cannot keep: lone surrogates (in strings and keys) and ``NaN``/``Infinity``.

    Python's ``json`` accepts both; JSON Schema has no way to say "no lone surrogate" or
    "finite", so they are refused here, naming the field, instead of failing later as a 500.
    (Integers past 64 bits are fine in free-form JSON; typed integer fields carry schema
    bounds, and SQL arguments are checked where they are bound.)
    """
    issues: list[dict[str, Any]] = []
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(value, loc)]
    while stack and len(issues) < 10:
        item, where = stack.pop()
        if isinstance(item, dict):
            for key, child in item.items():
                shown = key if _valid_unicode(key) else key.encode("utf-8", "backslashreplace").decode()
                if shown is not key:
                    issues.append(_issue((*where, shown), _SURROGATE_MSG, "string_unicode"))
                stack.append((child, (*where, shown)))
        elif isinstance(item, list):
            stack.extend((child, (*where, index)) for index, child in enumerate(item))
        elif isinstance(item, str) and not _valid_unicode(item):
            issues.append(_issue(where, _SURROGATE_MSG, "string_unicode"))
        elif isinstance(item, float) and not math.isfinite(item):
            issues.append(_issue(where, "Input should be a finite number", "finite_number"))
    return issues


def _valid_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _issue(loc: tuple[str | int, ...], msg: str, kind: str) -> dict[str, Any]:
    return {"loc": loc, "msg": msg, "type": kind}
