"""Diff the public Fleet SDK's pydantic models against ``schemas/`` (``nox -s fidelity``).

The public SDK (``fleet-python``, pinned in the ``dev`` extra) ships models generated from
the orchestrator's own OpenAPI document: ``fleet.models`` for the control plane, sessions
and traces, ``fleet.instance.models`` for an instance's manager API. They are the best
outside evidence of the production wire. For every model there, this module finds the
component of the same name in our schemas and compares names, fields, required-ness and
simple types (``string``, ``integer``, ``number``, ``boolean``, ``array``, ``object``);
for every enum, its values.

Each difference has a stable id, ``<module>.<Model>[.<field>] <kind>``. The differences we
keep on purpose are listed (an id, or a pattern with ``*``), with one line of reason each, in
``contracts/fidelity_allowlist.yaml``; any other difference fails the check, and so does an
allowlist entry that no longer matches a difference (so the list cannot rot). See
``docs/wire-fidelity.md``.

Run as ``python -m contracts.fidelity [--schemas DIR] [--allowlist FILE]``.
"""

from __future__ import annotations

import argparse
import enum
import fnmatch
import importlib
import inspect
import sys
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS_DIR = ROOT / "schemas"
ALLOWLIST = Path(__file__).resolve().parent / "fidelity_allowlist.yaml"

ANY = "any"
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_SIMPLE = {str: "string", int: "integer", float: "number", bool: "boolean"}


@dataclass(frozen=True)
class Field:
    """One field, reduced to what the check compares."""

    required: bool
    type: str


@dataclass(frozen=True)
class Shape:
    """A model (``fields``) or an enum (``values``)."""

    fields: Mapping[str, Field] | None = None
    values: frozenset[str] | None = None


@dataclass(frozen=True)
class Difference:
    """One difference between their model and our schema component."""

    id: str
    detail: str


@dataclass(frozen=True)
class Report:
    """The outcome of one check."""

    unexpected: list[Difference]
    allowed: list[Difference]
    stale: list[str]

    @property
    def ok(self) -> bool:
        return not self.unexpected and not self.stale

    def render(self) -> str:
        """The diff, one line per difference, unexpected ones first."""
        lines = [f"wire fidelity: {len(self.unexpected)} unexpected, {len(self.allowed)} allowlisted"]
        lines += [f"  UNEXPECTED {d.id}: {d.detail}" for d in self.unexpected]
        lines += [f"  STALE ALLOWLIST ENTRY {entry} (no such difference any more)" for entry in self.stale]
        return "\n".join(lines)


# ---------------------------------------------------------------- their side (pydantic)


def _annotation_type(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _annotation_type(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        members = {_annotation_type(arg) for arg in typing.get_args(annotation) if arg is not type(None)}
        return members.pop() if len(members) == 1 else ANY
    if origin in (list, tuple, set) or annotation in (list, tuple, set):
        return "array"
    if origin is dict or annotation is dict:
        return "object"
    if inspect.isclass(annotation):
        if issubclass(annotation, BaseModel):
            return "object"
        if issubclass(annotation, enum.Enum):
            return "string"
        if annotation in _SIMPLE:
            return _SIMPLE[annotation]
        # Constrained subclasses (``conint``...); bool is an int subclass, so exact matches come first.
        for base, name in _SIMPLE.items():
            if issubclass(annotation, base):
                return name
    return ANY


def their_shapes(module_name: str) -> dict[str, Shape]:
    """The models and enums defined in one module of the public SDK, by class name."""
    module = importlib.import_module(module_name)
    shapes: dict[str, Shape] = {}
    for name, cls in vars(module).items():
        if not inspect.isclass(cls) or cls.__module__ != module.__name__:
            continue
        if issubclass(cls, BaseModel):
            shapes[name] = Shape(
                fields={
                    field: Field(info.is_required(), _annotation_type(info.annotation))
                    for field, info in cls.model_fields.items()
                }
            )
        elif issubclass(cls, enum.Enum):
            shapes[name] = Shape(values=frozenset(str(member.value) for member in cls))
    return shapes


# ---------------------------------------------------------------- our side (OpenAPI)


def _schema_type(schema: Mapping[str, Any], components: Mapping[str, Any]) -> str:
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = components.get(ref.rsplit("/", 1)[-1], {})
        return _schema_type(target, components)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            members = {_schema_type(member, components) for member in schema[key]} - {"null"}
            return members.pop() if len(members) == 1 else ANY
    kind = schema.get("type")
    if isinstance(kind, list):
        members = set(kind) - {"null"}
        return members.pop() if len(members) == 1 else ANY
    if isinstance(kind, str):
        return kind
    return "object" if "properties" in schema else ANY


def _flatten(schema: Mapping[str, Any], components: Mapping[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """Properties and required names of an object schema, ``allOf`` members merged in."""
    properties: dict[str, Any] = {}
    required: set[str] = set()
    for member in schema.get("allOf", []):
        ref = member.get("$ref")
        target = components.get(ref.rsplit("/", 1)[-1], {}) if isinstance(ref, str) else member
        more, needed = _flatten(target, components)
        properties.update(more)
        required |= needed
    properties.update(schema.get("properties") or {})
    required |= set(schema.get("required", []))
    return properties, required


def our_shapes(paths: Iterable[Path]) -> dict[str, Shape]:
    """The components of our schema files, by name (the first file that defines a name wins)."""
    shapes: dict[str, Shape] = {}
    for path in paths:
        components = yaml.load(path.read_text(), Loader=_LOADER)["components"]["schemas"]
        for name, schema in components.items():
            if name in shapes:
                continue
            if "enum" in schema:
                shapes[name] = Shape(values=frozenset(str(value) for value in schema["enum"]))
                continue
            properties, required = _flatten(schema, components)
            shapes[name] = Shape(
                fields={
                    field: Field(field in required, _schema_type(sub, components))
                    for field, sub in properties.items()
                }
            )
    return shapes


# ---------------------------------------------------------------- the diff


def _compatible(theirs: str, ours: str) -> bool:
    # ``any`` on either side is not a claim about the type. Integer and number stay distinct: a
    # client typed ``int`` rejects ``12.5``.
    return ANY in (theirs, ours) or theirs == ours


def diff_module(module_name: str, theirs: Mapping[str, Shape], ours: Mapping[str, Shape]) -> list[Difference]:
    """Every difference between one module's models and our components."""
    out: list[Difference] = []
    for name, shape in sorted(theirs.items()):
        where = f"{module_name}.{name}"
        mine = ours.get(name)
        if mine is None:
            out.append(Difference(f"{where} missing-model", "no component of that name in schemas/"))
            continue
        if shape.values is not None or mine.values is not None:
            if shape.values != mine.values:
                detail = f"theirs {sorted(shape.values or [])}, ours {sorted(mine.values or [])}"
                out.append(Difference(f"{where} enum", detail))
            continue
        their_fields, our_fields = shape.fields or {}, mine.fields or {}
        for field in sorted(set(their_fields) | set(our_fields)):
            at = f"{where}.{field}"
            if field not in our_fields:
                out.append(Difference(f"{at} missing-field", f"theirs: {their_fields[field]}"))
                continue
            if field not in their_fields:
                out.append(Difference(f"{at} extra-field", f"ours: {our_fields[field]}"))
                continue
            t, o = their_fields[field], our_fields[field]
            if t.required != o.required:
                kind = "required" if o.required else "optional"
                out.append(Difference(f"{at} {kind}", f"theirs required={t.required}, ours {o.required}"))
            if not _compatible(t.type, o.type):
                out.append(Difference(f"{at} type", f"theirs {t.type}, ours {o.type}"))
    return out


def load_allowlist(path: Path = ALLOWLIST) -> tuple[dict[str, list[str]], dict[str, str]]:
    """(module -> our schema files, difference id -> reason) from the allowlist file."""
    data = yaml.safe_load(path.read_text())
    return dict(data["sources"]), {str(key): str(value) for key, value in data["allowed"].items()}


def check(schemas_dir: Path = SCHEMAS_DIR, allowlist: Path = ALLOWLIST) -> Report:
    """Diff every module named in the allowlist's ``sources`` against ``schemas_dir``."""
    sources, allowed = load_allowlist(allowlist)
    found: list[Difference] = []
    for module_name, files in sources.items():
        ours = our_shapes(schemas_dir / f"{stem}.yaml" for stem in files)
        found += diff_module(module_name, their_shapes(module_name), ours)

    def covered(difference: Difference) -> bool:
        return any(fnmatch.fnmatchcase(difference.id, pattern) for pattern in allowed)

    return Report(
        unexpected=[d for d in found if not covered(d)],
        allowed=[d for d in found if covered(d)],
        stale=sorted(p for p in allowed if not any(fnmatch.fnmatchcase(d.id, p) for d in found)),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m contracts.fidelity", description=__doc__.split("\n")[0])
    parser.add_argument("--schemas", type=Path, default=SCHEMAS_DIR, help="directory of the *.yaml schemas")
    parser.add_argument("--allowlist", type=Path, default=ALLOWLIST, help="the allowlist YAML")
    args = parser.parse_args(argv)
    report = check(args.schemas, args.allowlist)
    print(report.render())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
