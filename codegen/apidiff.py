"""What changed in the API between two versions of ``schemas/``, and which changes break callers.

``python -m codegen`` (``nox -s generate``) prints this against the previous commit's schemas
(``git show HEAD:schemas/<file>``), so a schema edit shows its effect on the generated clients
before it is committed.

Compared per document: operations (method and path), their parameters, the type of their request
body and success response, and the fields of every named component schema (added, removed,
required-ness, type). A change is **breaking** when code written against the old API can fail
against the new one:

* an operation, a model or a parameter is removed;
* a request field or parameter is removed, becomes required, or is added as required;
* a response field is removed or stops being required (a reader may now find it absent);
* a type no longer accepts a value it accepted (request side: a union member dropped) or may
  now carry one it never did (response side: a union member added, ``null`` included);
* a request body that was one model becomes a union (its generated method loses the keyword form).

Whether a model is on the request or the response side (or both) follows from the operations
that reach it through ``$ref``s; a model no operation reaches is treated as both.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = ["Change", "diff_documents", "diff_schema_dirs", "format_changes", "load_dir", "load_revision"]

_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
_REQUEST, _RESPONSE = "request", "response"


@dataclass(frozen=True)
class Change:
    """One API change.

    Attributes:
        document: The schema file (``env-instance.yaml``).
        sign: ``+`` added, ``-`` removed, ``~`` changed.
        subject: What changed: ``operation GET /v1/regions (list_regions)``,
            ``field InstanceRequest.seed``, ``parameter GET /v1/env/instances ?status``.
        detail: How, in a few words.
        breaking: Whether code written against the old API can fail against the new one.
    """

    document: str
    sign: str
    subject: str
    detail: str
    breaking: bool


@dataclass(frozen=True)
class _Field:
    required: bool
    type: str


def type_of(schema: Any) -> str:
    """A schema's type as a short, order-independent string (``string | null``, ``array[Task]``).

    Args:
        schema: A JSON Schema (OpenAPI 3.1) object.
    """
    if not isinstance(schema, Mapping):
        return "any"
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return " | ".join(sorted({part for sub in schema[key] for part in type_of(sub).split(" | ")}))
    kinds = schema.get("type")
    if kinds is None:
        return "any"
    names = []
    for kind in kinds if isinstance(kinds, list) else [kinds]:
        if kind == "array":
            names.append(f"array[{type_of(schema.get('items'))}]")
        elif kind == "object" and isinstance(schema.get("additionalProperties"), Mapping):
            names.append(f"object[{type_of(schema['additionalProperties'])}]")
        elif kind == "string" and "format" in schema:
            names.append(f"string<{schema['format']}>")
        else:
            names.append(str(kind))
    return " | ".join(sorted(set(names)))


def _refs(schema: Any) -> Iterator[str]:
    """Names of the component schemas a schema refers to, at any depth."""
    if isinstance(schema, Mapping):
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            yield ref.rsplit("/", 1)[-1]
        for value in schema.values():
            yield from _refs(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _refs(value)


def _operations(doc: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``{"GET /v1/x": operation}`` of a document."""
    found = {}
    for path, item in (doc.get("paths") or {}).items():
        for method in _METHODS:
            if isinstance(item, Mapping) and method in item:
                operation = dict(item[method])
                operation["parameters"] = [*item.get("parameters", []), *operation.get("parameters", [])]
                found[f"{method.upper()} {path}"] = operation
    return found


def _resolve(doc: Mapping[str, Any], node: Any) -> Any:
    """Follow a local ``$ref`` to ``components/<kind>/<name>`` (parameters, responses)."""
    ref = node.get("$ref") if isinstance(node, Mapping) else None
    if (
        not isinstance(ref, str)
        or not ref.startswith("#/components/")
        or ref.startswith("#/components/schemas/")
    ):
        return node
    target: Any = doc
    for part in ref[2:].split("/"):
        target = target.get(part, {}) if isinstance(target, Mapping) else {}
    return target


def _usage(doc: Mapping[str, Any]) -> dict[str, set[str]]:
    """For each component schema, whether requests, responses or both reach it."""
    schemas = (doc.get("components") or {}).get("schemas") or {}
    usage: dict[str, set[str]] = {}
    for operation in _operations(doc).values():
        roots = {
            _REQUEST: [operation.get("requestBody"), *operation["parameters"]],
            _RESPONSE: list((operation.get("responses") or {}).values()),
        }
        for side, nodes in roots.items():
            todo = [name for node in nodes for name in _refs(_resolve(doc, node))]
            while todo:
                name = todo.pop()
                if side not in usage.setdefault(name, set()):
                    usage[name].add(side)
                    todo.extend(_refs(schemas.get(name)))
    return usage


def _fields(models: Mapping[str, Any], schema: Any, seen: frozenset[str] = frozenset()) -> dict[str, _Field]:
    """A model's fields, those it takes from ``allOf`` members (``$ref`` or inline) included."""
    if not isinstance(schema, Mapping):
        return {}
    ref = schema.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        return {} if name in seen else _fields(models, models.get(name), seen | {name})
    found: dict[str, _Field] = {}
    for member in schema.get("allOf") or []:
        found.update(_fields(models, member, seen))
    required = set(schema.get("required") or [])
    for name, prop in (schema.get("properties") or {}).items():
        found[name] = _Field(name in required, type_of(prop))
    for name in required & found.keys():
        found[name] = _Field(True, found[name].type)
    return found


def _params(doc: Mapping[str, Any], operation: Mapping[str, Any]) -> dict[str, _Field]:
    found = {}
    for raw in operation["parameters"]:
        param = _resolve(doc, raw)
        if isinstance(param, Mapping) and "name" in param:
            marker = {"query": "?", "header": "header ", "path": "{", "cookie": "cookie "}.get(
                param.get("in", ""), ""
            )
            label = f"{marker}{param['name']}}}" if marker == "{" else f"{marker}{param['name']}"
            found[label] = _Field(bool(param.get("required")), type_of(param.get("schema")))
    return found


def _json_schema(doc: Mapping[str, Any], node: Any) -> Any:
    """The ``application/json`` schema of a request body or response (``$ref``s followed)."""
    content = _resolve(doc, node).get("content") if isinstance(_resolve(doc, node), Mapping) else None
    entry = content.get("application/json") if isinstance(content, Mapping) else None
    return entry.get("schema") if isinstance(entry, Mapping) else None


def _payloads(doc: Mapping[str, Any], operation: Mapping[str, Any]) -> dict[str, _Field]:
    """The request body and the success response of an operation, as pseudo-fields by side."""
    found = {}
    body = operation.get("requestBody")
    if isinstance(body, Mapping):
        found[_REQUEST] = _Field(bool(_resolve(doc, body).get("required")), type_of(_json_schema(doc, body)))
    responses = operation.get("responses") or {}
    success = next((responses[code] for code in ("200", "201", "202", "204") if code in responses), None)
    if success is not None:
        found[_RESPONSE] = _Field(True, type_of(_json_schema(doc, success)))
    return found


def _payload_changes(
    document: str, key: str, old: Mapping[str, _Field], new: Mapping[str, _Field]
) -> Iterator[Change]:
    """A changed body or response type: breaking when a body accepts less or a response may carry more."""
    for side, label in ((_REQUEST, "body"), (_RESPONSE, "response")):
        if side not in old or side not in new or old[side].type == new[side].type:
            continue
        before, after = old[side].type, new[side].type
        narrowed = not _members(before) <= _members(after)
        widened = not _members(after) <= _members(before)
        detail = f"type {before} -> {after}"
        if side == _REQUEST:
            # One model's fields are the generated method's keywords; a union offers none.
            unkeyed = len(_members(before)) == 1 < len(_members(after))
            if unkeyed:
                detail += " (the generated method no longer takes the body's fields as keywords)"
            breaking = narrowed or unkeyed
        else:
            breaking = widened
        yield Change(document, "~", f"{label} of operation {key}", detail, breaking)


def _prefixed(prefix: str) -> Callable[[str], str]:
    return lambda name: f"{prefix}{name}"


def _members(type_name: str) -> set[str]:
    return set(type_name.split(" | "))


def _field_changes(
    document: str,
    subject: Callable[[str], str],
    old: Mapping[str, _Field],
    new: Mapping[str, _Field],
    sides: set[str],
) -> Iterator[Change]:
    """Changes between two field (or parameter) sets of a model used on ``sides``.

    Args:
        document: The file name.
        subject: Names the changed field (``field Model.name``).
        old: Fields before.
        new: Fields now.
        sides: ``request``, ``response`` or both.
    """
    request, response = _REQUEST in sides, _RESPONSE in sides
    side = " and ".join(sorted(sides))
    for name in sorted(old.keys() - new.keys()):
        yield Change(document, "-", subject(name), f"removed ({side})", True)
    for name in sorted(new.keys() - old.keys()):
        added = new[name]
        state = "required" if added.required else "optional"
        detail = f"added, {state} {added.type} ({side})"
        yield Change(document, "+", subject(name), detail, request and added.required)
    for name in sorted(old.keys() & new.keys()):
        before, after = old[name], new[name]
        if before.required != after.required:
            became = "required" if after.required else "optional"
            breaking = (request and after.required) or (response and not after.required)
            yield Change(document, "~", subject(name), f"now {became} ({side})", breaking)
        if before.type != after.type:
            narrowed = not _members(before.type) <= _members(after.type)
            widened = not _members(after.type) <= _members(before.type)
            breaking = (request and narrowed) or (response and widened)
            detail = f"type {before.type} -> {after.type} ({side})"
            yield Change(document, "~", subject(name), detail, breaking)


def diff_documents(
    document: str, old: Mapping[str, Any] | None, new: Mapping[str, Any] | None
) -> list[Change]:
    """The API changes from ``old`` to ``new`` (either may be None: a new or deleted file).

    Args:
        document: The file name, for the report.
        old: The previous OpenAPI document.
        new: The current OpenAPI document.
    """
    old, new = old or {}, new or {}
    changes: list[Change] = []
    old_ops, new_ops = _operations(old), _operations(new)
    for key in sorted(old_ops.keys() - new_ops.keys()):
        changes.append(
            Change(document, "-", f"operation {key}", f"removed ({old_ops[key].get('operationId')})", True)
        )
    for key in sorted(new_ops.keys() - old_ops.keys()):
        changes.append(
            Change(document, "+", f"operation {key}", f"added ({new_ops[key].get('operationId')})", False)
        )
    for key in sorted(old_ops.keys() & new_ops.keys()):
        before, after = old_ops[key].get("operationId"), new_ops[key].get("operationId")
        if before != after:  # the generated method is renamed
            changes.append(Change(document, "~", f"operation {key}", f"renamed {before} -> {after}", True))
        changes.extend(
            _field_changes(
                document,
                _prefixed(f"parameter {key} "),
                _params(old, old_ops[key]),
                _params(new, new_ops[key]),
                {_REQUEST},
            )
        )
        changes.extend(
            _payload_changes(document, key, _payloads(old, old_ops[key]), _payloads(new, new_ops[key]))
        )
    old_models = (old.get("components") or {}).get("schemas") or {}
    new_models = (new.get("components") or {}).get("schemas") or {}
    usage: dict[str, set[str]] = {}
    for source in (_usage(old), _usage(new)):
        for name, sides in source.items():
            usage.setdefault(name, set()).update(sides)
    for name in sorted(old_models.keys() - new_models.keys()):
        changes.append(Change(document, "-", f"model {name}", "removed", True))
    for name in sorted(new_models.keys() - old_models.keys()):
        changes.append(Change(document, "+", f"model {name}", "added", False))
    for name in sorted(old_models.keys() & new_models.keys()):
        sides = usage.get(name) or {_REQUEST, _RESPONSE}
        changes.extend(
            _field_changes(
                document,
                _prefixed(f"field {name}."),
                _fields(old_models, old_models[name], frozenset({name})),
                _fields(new_models, new_models[name], frozenset({name})),
                sides,
            )
        )
    return changes


def diff_schema_dirs(
    old: Mapping[str, Mapping[str, Any]], new: Mapping[str, Mapping[str, Any]]
) -> list[Change]:
    """The API changes between two sets of documents keyed by file name.

    Args:
        old: ``{file name: document}`` before.
        new: ``{file name: document}`` now.
    """
    changes: list[Change] = []
    for document in sorted(old.keys() | new.keys()):
        changes.extend(diff_documents(document, old.get(document), new.get(document)))
    return changes


def load_dir(schemas: Path) -> dict[str, dict[str, Any]]:
    """Every ``*.yaml`` document of a directory, by file name.

    Args:
        schemas: The directory.
    """
    return {path.name: yaml.safe_load(path.read_text()) for path in sorted(schemas.glob("*.yaml"))}


def _git(schemas: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(schemas), *args], capture_output=True, text=True, check=True, timeout=60
    ).stdout


def load_revision(schemas: Path, revision: str = "HEAD") -> dict[str, dict[str, Any]] | None:
    """The ``*.yaml`` documents of ``schemas`` as committed at ``revision``.

    Args:
        schemas: The schemas directory (inside a git checkout).
        revision: A git revision.

    Returns:
        ``{file name: document}``, or None when there is no such revision or no git checkout.
    """
    try:
        names = _git(schemas, "ls-tree", "--name-only", revision, "--", ".").split()
        return {
            name: yaml.safe_load(_git(schemas, "show", f"{revision}:./{name}"))
            for name in names
            if name.endswith(".yaml")
        }
    except (OSError, subprocess.SubprocessError):
        return None


def format_changes(changes: Iterable[Change], against: str) -> str:
    """The report ``python -m codegen`` prints.

    Args:
        changes: The changes.
        against: What they are relative to (``HEAD``).
    """
    changes = list(changes)
    if not changes:
        return f"API changes since {against}: none.\n"
    breaking = sum(change.breaking for change in changes)
    lines = [f"API changes since {against}: {len(changes)}, {breaking} breaking."]
    document = None
    for change in changes:
        if change.document != document:
            document = change.document
            lines.append(f"  {document}")
        mark = "BREAKING" if change.breaking else ""
        lines.append(f"    {mark:<9}{change.sign} {change.subject}: {change.detail}")
    return "\n".join(lines) + "\n"
