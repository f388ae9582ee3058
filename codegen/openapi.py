"""Read one OpenAPI document (following ``schemas/README.md``) into plain operation records.

Only what the client generator needs is extracted: per operation its method, path,
tag, typed parameters, request body model, success type and documented errors.
Anything outside the conventions raises ``SpecError`` naming the place, rather than
generating a client that silently differs from the schema.
"""

from __future__ import annotations

import keyword
import re
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fleet_sdk._exceptions import status_error_class

HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
SUCCESS_STATUSES = ("200", "201", "202", "204")
IDEMPOTENCY_HEADER = "Idempotency-Key"
RESERVED_NAMES = frozenset({"self", "body", "options", "idempotency_key", "models", "warnings"})

# Descriptions become public docstrings. Notes on why the schema chose something (where the
# upstream wire behaviour is unspecified) belong in an ``x-design-note`` next to the
# description, never in it; ``python -m codegen.design_notes`` moves them mechanically.
DESIGN_NOTE_MARKERS = (
    "design choice",
    "designer's choice",
    "protocol.md",
    "protocol is silent",
    "protocol does",
    "protocol names",
    "protocol only",
    "wire reference names",
)
DESIGN_NOTE_KEY = "x-design-note"


class SpecError(ValueError):
    """The schema does not follow the conventions the generator relies on."""


@dataclass(frozen=True)
class Param:
    """One path, query or header parameter of an operation."""

    name: str  # wire name
    py_name: str  # Python argument name
    location: str  # path | query | header
    annotation: str  # Python type, without "| None"
    required: bool
    description: str


@dataclass(frozen=True)
class BodyField:
    """One top-level property of a request body model, offered as a keyword argument."""

    name: str  # wire name (the model field's alias when they differ)
    py_name: str  # Python keyword argument name
    required: bool
    description: str


@dataclass(frozen=True)
class ErrorDoc:
    status: str
    exception: str
    description: str


@dataclass(frozen=True)
class Operation:
    operation_id: str
    method: str  # upper case
    path: str
    tag: str
    summary: str
    description: str
    deprecated: bool
    server: str
    path_params: list[Param]
    query_params: list[Param]
    header_params: list[Param]
    idempotency_key: Param | None
    body_annotation: str | None
    body_model: str | None  # component name when the body is one model (keywords offered)
    body_fields: list[BodyField]
    body_required: bool
    body_description: str
    return_annotation: str  # "None", "models.X", "list[models.X]", "models.X | models.Y"
    cast_to: str  # "type(None)", "models.X", "list[models.X]", 'cast("type[models.X | models.Y]", ...)'
    success_status: str
    success_description: str
    errors: list[ErrorDoc]
    referenced_models: frozenset[str]


@dataclass(frozen=True)
class Tag:
    name: str
    class_name: str
    module: str  # the tag's client module in the surface package (``module_name``)
    description: str
    operations: list[Operation] = field(default_factory=list)


@dataclass(frozen=True)
class Spec:
    file_name: str
    surface: str
    title: str
    description: str
    server_url: str
    tags: list[Tag]

    @property
    def operations(self) -> list[Operation]:
        return [op for tag in self.tags for op in tag.operations]

    @property
    def referenced_models(self) -> frozenset[str]:
        names: set[str] = set()
        for op in self.operations:
            names |= op.referenced_models
        return frozenset(names)


def surface_name(path: Path) -> str:
    """``schemas/env-instance.yaml`` -> ``env_instance``."""
    return path.stem.replace("-", "_")


def class_name(tag: str) -> str:
    """``control-plane`` -> ``ControlPlaneClient``."""
    words = [w for w in re.split(r"[^0-9A-Za-z]+", tag) if w]
    if not words:
        raise SpecError(f"tag {tag!r} has no usable name")
    return "".join(w[:1].upper() + w[1:] for w in words) + "Client"


# Module names a tag's client module cannot take: the surface package's other modules.
RESERVED_MODULES = frozenset({"client", "models"})


def module_name(tag: str) -> str:
    """``control-plane`` -> ``control_plane``: the module of the tag's clients in its surface package."""
    words = [w.lower() for w in re.split(r"[^0-9A-Za-z]+", tag) if w]
    name = "_".join(words)
    if not name or name[0].isdigit() or keyword.iskeyword(name) or name in RESERVED_MODULES:
        raise SpecError(f"tag {tag!r} gives no usable module name ({name!r})")
    return name


def py_identifier(name: str, taken: set[str]) -> str:
    """A snake_case Python argument name for a wire name, unique within ``taken``."""
    ident = re.sub(r"[^0-9A-Za-z_]", "_", name)
    ident = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", ident).lower()
    if not ident or ident[0].isdigit():
        ident = f"p_{ident}"
    while keyword.iskeyword(ident) or ident in RESERVED_NAMES or ident in taken:
        ident += "_"
    taken.add(ident)
    return ident


def clean_text(text: Any) -> str:
    """Normalise a schema description for a docstring: dedented, stripped, no ``\"\"\"``."""
    if not text:
        return ""
    out = textwrap.dedent(str(text)).strip()
    return out.replace("\\", "\\\\").replace('"""', '\\"\\"\\"')


class _Resolver:
    def __init__(self, doc: dict[str, Any], where: str) -> None:
        self.doc = doc
        self.where = where

    def deref(self, node: Any) -> Any:
        seen = 0
        while isinstance(node, dict) and "$ref" in node:
            ref = node["$ref"]
            if not isinstance(ref, str) or not ref.startswith("#/"):
                raise SpecError(f"{self.where}: only local $refs are supported, got {ref!r}")
            target: Any = self.doc
            for raw_part in ref[2:].split("/"):
                part = raw_part.replace("~1", "/").replace("~0", "~")
                if not isinstance(target, dict) or part not in target:
                    raise SpecError(f"{self.where}: unresolvable $ref {ref!r}")
                target = target[part]
            node = target
            seen += 1
            if seen > 32:
                raise SpecError(f"{self.where}: $ref cycle at {ref!r}")
        return node


def _component_name(schema: Any) -> str | None:
    if isinstance(schema, dict) and isinstance(schema.get("$ref"), str):
        ref = schema["$ref"]
        prefix = "#/components/schemas/"
        if ref.startswith(prefix) and "/" not in ref[len(prefix) :]:
            return str(ref[len(prefix) :])
    return None


def _json_schema(content: Any, where: str) -> Any:
    if not isinstance(content, dict) or not content:
        return None
    for media, entry in content.items():
        if media == "application/json" or media.endswith("+json"):
            return (entry or {}).get("schema")
    raise SpecError(f"{where}: only application/json bodies are supported, got {sorted(content)}")


def _model_type(schema: Any, where: str, models: set[str]) -> str:
    """The Python type of a body/response schema: ``models.X`` (a ``$ref``), ``list[models.X]`` (an
    array of one) or ``models.X | models.Y`` (an ``anyOf``/``oneOf`` of ``$ref``s, for an operation
    that takes or answers one of several named shapes)."""
    name = _component_name(schema)
    if name is not None:
        models.add(name)
        return f"models.{name}"
    if isinstance(schema, dict) and schema.get("type") == "array":
        item = _component_name(schema.get("items"))
        if item is not None:
            models.add(item)
            return f"list[models.{item}]"
    members = _union_members(schema)
    if members:
        models.update(members)
        return " | ".join(f"models.{member}" for member in members)
    raise SpecError(
        f"{where}: bodies and responses must be a $ref to components/schemas, an array of one or an "
        f"anyOf/oneOf of them (no inline schemas), got {schema!r}"
    )


def _union_members(schema: Any) -> list[str]:
    """The component names of an ``anyOf``/``oneOf`` made only of ``$ref``s (two or more), else []."""
    if not isinstance(schema, dict):
        return []
    for combinator in ("anyOf", "oneOf"):
        options = schema.get(combinator)
        if isinstance(options, list) and len(options) >= 2 and set(schema) == {combinator}:
            names = [_component_name(option) for option in options]
            if all(names):
                return [str(name) for name in names]
    return []


def _cast_to(annotation: str) -> str:
    """The runtime value the client validates a response into (a union needs a cast for mypy:
    ``A | B`` is a ``UnionType`` object, not a ``type``)."""
    if " | " in annotation:
        return f'cast("type[{annotation}]", {annotation})'
    return annotation


def _scalar_type(schema: dict[str, Any], where: str) -> str:
    types = schema.get("type")
    if isinstance(types, list):
        non_null = [t for t in types if t != "null"]
        if len(non_null) != 1:
            raise SpecError(f"{where}: unsupported parameter type {types!r}")
        types = non_null[0]
    if "enum" in schema and types in (None, "string"):
        values = [v for v in schema["enum"] if v is not None]
        if all(isinstance(v, str) for v in values):
            return "Literal[" + ", ".join(f'"{v}"' for v in values) + "]"
    mapping = {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}
    if types not in mapping:
        raise SpecError(f"{where}: unsupported parameter type {types!r}")
    return mapping[types]


def _param_type(resolver: _Resolver, schema: Any, location: str, where: str) -> str:
    schema = resolver.deref(schema or {})
    if location == "path":
        return "str"
    if location == "query" and isinstance(schema, dict) and schema.get("type") == "array":
        items = resolver.deref(schema.get("items") or {})
        item_type = _scalar_type(items, where) if isinstance(items, dict) else "str"
        # The runtime's QueryValue accepts list[str] | list[int]; lists are invariant, so
        # enum items are typed as plain strings.
        return "list[int]" if item_type == "int" else "list[str]"
    if not isinstance(schema, dict):
        raise SpecError(f"{where}: parameter schema must be an object")
    return _scalar_type(schema, where)


def _error_class(code: str) -> str:
    """The runtime's exception for a documented status (``404``, ``5XX``, ``default``)."""
    if re.fullmatch(r"[45]\d\d", code):
        return status_error_class(int(code), None).__name__
    if code.upper() == "5XX":
        return status_error_class(500, None).__name__
    return "APIStatusError"


def _body_fields(resolver: _Resolver, schema: Any, taken: set[str]) -> list[BodyField]:
    target = resolver.deref(schema)
    if not isinstance(target, dict) or not isinstance(target.get("properties"), dict):
        return []
    required = set(target.get("required") or [])
    fields = []
    for name, raw in target["properties"].items():
        prop = resolver.deref(raw)
        fields.append(
            BodyField(
                name=str(name),
                py_name=py_identifier(str(name), taken),
                required=name in required,
                description=clean_text(prop.get("description") if isinstance(prop, dict) else ""),
            )
        )
    return fields


def check_design_notes(doc: Any, where: str, path: str = "") -> None:
    """Refuse descriptions that carry design notes: they would become public docstrings."""
    if isinstance(doc, dict):
        for key, value in doc.items():
            here = f"{path}/{key}"
            if key in ("description", "summary") and isinstance(value, str):
                lowered = value.lower()
                marker = next((m for m in DESIGN_NOTE_MARKERS if m in lowered), None)
                if marker is not None:
                    raise SpecError(
                        f"{where}: {here} carries a design note ({marker!r}); move it into "
                        f"{DESIGN_NOTE_KEY} (python -m codegen.design_notes {where})"
                    )
            elif not key.startswith("x-"):
                check_design_notes(value, where, here)
    elif isinstance(doc, list):
        for index, item in enumerate(doc):
            check_design_notes(item, where, f"{path}/{index}")


def _server(servers: Any) -> str | None:
    if isinstance(servers, list) and servers and isinstance(servers[0], dict):
        url = servers[0].get("url")
        if isinstance(url, str):
            return url
    return None


def _operation(
    resolver: _Resolver,
    *,
    path: str,
    method: str,
    op: dict[str, Any],
    path_item: dict[str, Any],
    default_server: str,
) -> Operation:
    where = f"{resolver.where} {method.upper()} {path}"
    op_id = op.get("operationId")
    if not isinstance(op_id, str) or not re.fullmatch(r"[a-z][a-z0-9_]*", op_id) or keyword.iskeyword(op_id):
        raise SpecError(f"{where}: operationId must be snake_case, got {op_id!r}")
    tags = op.get("tags")
    if not isinstance(tags, list) or len(tags) != 1 or not isinstance(tags[0], str):
        raise SpecError(f"{where}: operation must have exactly one tag, got {tags!r}")

    # Parameters: path-level ones, overridden by operation-level ones with the same (name, in).
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for raw in [*(path_item.get("parameters") or []), *(op.get("parameters") or [])]:
        param = resolver.deref(raw)
        merged[(param["name"], param["in"])] = param

    taken: set[str] = set()
    placeholders = re.findall(r"{([^}]+)}", path)
    path_params: list[Param] = []
    for name in placeholders:
        param = merged.get((name, "path"))
        if param is None:
            raise SpecError(f"{where}: path placeholder {{{name}}} has no path parameter")
        path_params.append(
            Param(
                name=name,
                py_name=py_identifier(name, taken),
                location="path",
                annotation="str",
                required=True,
                description=clean_text(param.get("description")),
            )
        )
    query_params: list[Param] = []
    header_params: list[Param] = []
    idempotency: Param | None = None
    for (name, location), param in merged.items():
        if location == "path":
            if name not in placeholders:
                raise SpecError(f"{where}: path parameter {name!r} is not in the path")
            continue
        if location == "cookie":
            raise SpecError(f"{where}: cookie parameters are not supported")
        p_where = f"{where} parameter {name!r}"
        if location == "header" and name.lower() == IDEMPOTENCY_HEADER.lower():
            idempotency = Param(
                name=name,
                py_name="idempotency_key",
                location="header",
                annotation="str",
                required=False,
                description=clean_text(param.get("description")) or "makes the call safe to retry.",
            )
            continue
        record = Param(
            name=name,
            py_name=py_identifier(name, taken),
            location=location,
            annotation=_param_type(resolver, param.get("schema"), location, p_where),
            required=bool(param.get("required", False)),
            description=clean_text(param.get("description")),
        )
        (query_params if location == "query" else header_params).append(record)
    # Required keyword-only arguments first, each group in schema order.
    query_params.sort(key=lambda p: not p.required)
    header_params.sort(key=lambda p: not p.required)

    models: set[str] = set()
    body_annotation: str | None = None
    body_model: str | None = None
    body_fields: list[BodyField] = []
    body_required = False
    body_description = ""
    if "requestBody" in op:
        request_body = resolver.deref(op["requestBody"])
        schema = _json_schema(request_body.get("content"), f"{where} requestBody")
        body_annotation = _model_type(schema, f"{where} requestBody", models)
        body_required = bool(request_body.get("required", False))
        body_model = _component_name(schema)
        if body_model is not None:
            body_fields = _body_fields(resolver, schema, taken)
        body_description = clean_text(request_body.get("description"))
        if not body_description:
            target = resolver.deref(schema)
            if isinstance(target, dict) and target.get("type") == "array":
                target = resolver.deref(target.get("items"))
            body_description = clean_text(target.get("description") if isinstance(target, dict) else "")

    responses = {str(code): resolver.deref(resp) for code, resp in (op.get("responses") or {}).items()}
    successes = [code for code in SUCCESS_STATUSES if code in responses]
    if not successes:
        raise SpecError(f"{where}: no 200/201/202/204 response")
    success = successes[0]
    success_response = responses[success]
    if success == "204":
        return_annotation, cast_to = "None", "type(None)"
    else:
        schema = _json_schema(success_response.get("content"), f"{where} response {success}")
        if schema is None:
            raise SpecError(f"{where}: response {success} has no JSON body (use 204 for no body)")
        return_annotation = _model_type(schema, f"{where} response {success}", models)
        cast_to = _cast_to(return_annotation)

    errors: list[ErrorDoc] = []
    for code, response in responses.items():
        if code.startswith(("1", "2", "3")):
            continue
        errors.append(
            ErrorDoc(
                status=code,
                exception=_error_class(code),
                description=clean_text(response.get("description")),
            )
        )

    server = _server(op.get("servers")) or _server(path_item.get("servers")) or default_server
    return Operation(
        operation_id=op_id,
        method=method.upper(),
        path=path,
        tag=tags[0],
        summary=clean_text(op.get("summary")),
        description=clean_text(op.get("description")),
        deprecated=bool(op.get("deprecated", False)),
        server=server,
        path_params=path_params,
        query_params=query_params,
        header_params=header_params,
        idempotency_key=idempotency,
        body_annotation=body_annotation,
        body_model=body_model,
        body_fields=body_fields,
        body_required=body_required,
        body_description=body_description,
        return_annotation=return_annotation,
        cast_to=cast_to,
        success_status=success,
        success_description=clean_text(success_response.get("description")),
        errors=errors,
        referenced_models=frozenset(models),
    )


def load_spec(path: Path) -> Spec:
    """Parse ``path`` into a ``Spec``; raises ``SpecError`` on convention violations."""
    where = path.name
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(doc, dict):
        raise SpecError(f"{where}: not a YAML mapping")
    check_design_notes(doc, where)
    resolver = _Resolver(doc, where)
    server_url = _server(doc.get("servers"))
    if server_url is None:
        raise SpecError(f"{where}: no top-level servers entry")

    tag_docs: dict[str, str] = {}
    for tag in doc.get("tags") or []:
        tag_docs[tag["name"]] = clean_text(tag.get("description"))
    by_tag: dict[str, list[Operation]] = {name: [] for name in tag_docs}
    seen_ids: set[str] = set()
    for path_name, path_item in (doc.get("paths") or {}).items():
        for method, op in path_item.items():
            if method not in HTTP_METHODS:
                continue
            operation = _operation(
                resolver,
                path=str(path_name),
                method=method,
                op=op,
                path_item=path_item,
                default_server=server_url,
            )
            if operation.operation_id in seen_ids:
                raise SpecError(f"{where}: duplicate operationId {operation.operation_id!r}")
            seen_ids.add(operation.operation_id)
            by_tag.setdefault(operation.tag, []).append(operation)

    tags: list[Tag] = []
    class_names: set[str] = set()
    modules: set[str] = set()
    for name, operations in by_tag.items():
        if not operations:
            continue
        cls = class_name(name)
        if cls in class_names:
            raise SpecError(f"{where}: tags collide on class name {cls}")
        class_names.add(cls)
        module = module_name(name)
        if module in modules:
            raise SpecError(f"{where}: tags collide on module name {module}")
        modules.add(module)
        tags.append(
            Tag(
                name=name,
                class_name=cls,
                module=module,
                description=tag_docs.get(name, ""),
                operations=operations,
            )
        )

    info = doc.get("info") or {}
    return Spec(
        file_name=path.name,
        surface=surface_name(path),
        title=str(info.get("title", surface_name(path))),
        description=clean_text(info.get("description")),
        server_url=server_url,
        tags=tags,
    )
