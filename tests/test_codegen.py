"""``codegen``: generated/fleet_generated/ matches schemas/, the check catches drift, the tree is synced.

Determinism across hash seeds and ``mypy --strict`` on the generated code (and on the fixture
surface) are static checks: ``.ci/run`` and ``nox -s lint typecheck`` run them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from codegen.__main__ import main
from codegen.generate import (
    DEFAULT_OUT,
    DEFAULT_SCHEMAS,
    PROJECT_ROOT,
    check,
    diff_tree,
    header,
    render_all,
)
from codegen.openapi import SpecError, class_name, load_spec

FIXTURE_SCHEMAS = Path(__file__).parent / "fixtures" / "schemas"
PROBE = "codegen_drift_probe"


def _tree(directory: Path) -> dict[str, bytes]:
    return {
        path.relative_to(directory).as_posix(): path.read_bytes()
        for path in sorted(directory.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }


def test_generated_is_up_to_date() -> None:
    """The drift test: regenerating from schemas/ gives exactly generated/fleet_generated."""
    diff = check(DEFAULT_SCHEMAS, DEFAULT_OUT)
    assert not diff, f"generated/ is stale; run `nox -s generate`:\n{diff}"


def test_generated_holds_only_the_generated_package() -> None:
    """``generated/`` is everything codegen writes and nothing else: one package, no hand-written file."""
    top = PROJECT_ROOT / "generated"
    assert DEFAULT_OUT.parent == top
    assert sorted(p.name for p in top.iterdir() if p.name != "__pycache__") == [DEFAULT_OUT.name]
    assert set(_tree(DEFAULT_OUT)) - {p for p in _tree(DEFAULT_OUT) if "__pycache__" in p} == set(
        render_all(DEFAULT_SCHEMAS)
    )


def test_check_fails_on_schema_change(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    schemas = tmp_path / "schemas"
    shutil.copytree(DEFAULT_SCHEMAS, schemas)
    target = schemas / "sessions-ingest.yaml"
    doc = yaml.safe_load(target.read_text(encoding="utf-8"))
    doc["components"]["schemas"]["SessionIngestResponse"]["properties"][PROBE] = {
        "type": "string",
        "description": "Added by the drift test.",
    }
    target.write_text(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True), encoding="utf-8")

    assert main(["--check", "--schemas", str(schemas), "--out", str(DEFAULT_OUT)]) == 1
    diff = capsys.readouterr().out
    assert "--- committed/sessions_ingest/models.py" in diff
    assert "+++ regenerated/sessions_ingest/models.py" in diff
    added = [line for line in diff.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert any(PROBE in line for line in added), diff
    # Only the changed surface differs.
    assert "env_instance" not in diff and "browser_lease" not in diff


def test_check_flags_missing_and_extra_files(tmp_path: Path) -> None:
    files = render_all(FIXTURE_SCHEMAS)
    out = tmp_path / "fixture_api"
    out.mkdir()
    for rel, content in files.items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(content, encoding="utf-8")
    assert diff_tree(files, out) == ""
    (out / "demo_widgets" / "client.py").unlink()
    (out / "demo_widgets" / "stale.py").write_text("x = 1\n", encoding="utf-8")
    (out / "demo_widgets" / "__pycache__").mkdir()
    (out / "demo_widgets" / "__pycache__" / "client.cpython-311.pyc").write_bytes(b"\0")
    diff = diff_tree(files, out)
    assert "Missing generated file: demo_widgets/client.py" in diff
    assert "Extra file not produced by codegen: demo_widgets/stale.py" in diff
    assert "__pycache__" not in diff


def test_generate_syncs_the_tree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Writing removes stale surfaces, and a second run rewrites nothing."""
    out = tmp_path / "fleet_api"
    shutil.copytree(DEFAULT_OUT, out, ignore=shutil.ignore_patterns("__pycache__"))
    (out / "env_instance" / "__pycache__").mkdir()
    (out / "env_instance" / "__pycache__" / "client.cpython-311.pyc").write_bytes(b"\0")
    assert main(["--schemas", str(FIXTURE_SCHEMAS), "--out", str(out)]) == 0
    assert set(_tree(out)) == set(render_all(FIXTURE_SCHEMAS))
    assert not (out / "env_instance").exists()
    capsys.readouterr()
    assert main(["--schemas", str(FIXTURE_SCHEMAS), "--out", str(out)]) == 0
    assert "0 file(s) changed" in capsys.readouterr().out


def _expected_header(rel: Path) -> str:
    if len(rel.parts) == 1:
        return header("*.yaml")
    schema = rel.parts[0].replace("_", "-") + ".yaml"
    assert (DEFAULT_SCHEMAS / schema).exists(), f"{rel}: no schemas/{schema}"
    return header(schema)


def test_every_generated_file_has_the_header() -> None:
    files = sorted(p for p in DEFAULT_OUT.rglob("*.py") if "__pycache__" not in p.parts)
    assert files
    for path in files:
        rel = path.relative_to(DEFAULT_OUT)
        first_line = path.read_text(encoding="utf-8").splitlines()[0]
        assert first_line == _expected_header(rel), rel
    assert header("x.yaml") == (
        "# Generated by codegen from schemas/x.yaml; do not edit. Regenerate with `nox -s generate`."
    )


def test_one_surface_per_schema() -> None:
    surfaces = {p.parent.name for p in DEFAULT_OUT.glob("*/client.py")}
    assert surfaces == {p.stem.replace("-", "_") for p in DEFAULT_SCHEMAS.glob("*.yaml")}
    for path in DEFAULT_SCHEMAS.glob("*.yaml"):
        spec = load_spec(path)
        assert {p.name for p in (DEFAULT_OUT / spec.surface).glob("*.py")} == {
            "__init__.py",
            "_operations.py",
            "client.py",
            "models.py",
            *(f"{tag.module}.py" for tag in spec.tags),
        }


@pytest.mark.parametrize(
    ("tag", "expected"),
    [
        ("control-plane", "ControlPlaneClient"),
        ("instance-manager", "InstanceManagerClient"),
        ("sessions", "SessionsClient"),
        ("traces-jobs", "TracesJobsClient"),
        ("browser-lease", "BrowserLeaseClient"),
    ],
)
def test_class_names(tag: str, expected: str) -> None:
    assert class_name(tag) == expected


def test_spec_rejects_inline_body(tmp_path: Path) -> None:
    doc = yaml.safe_load((FIXTURE_SCHEMAS / "demo-widgets.yaml").read_text(encoding="utf-8"))
    doc["paths"]["/v1/widgets"]["post"]["requestBody"]["content"]["application/json"]["schema"] = {
        "type": "object",
        "properties": {"name": {"type": "string"}},
    }
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    with pytest.raises(SpecError, match=r"POST /v1/widgets requestBody.*\$ref"):
        load_spec(path)


def test_spec_reads_a_union_of_named_models_as_a_body_and_a_response(tmp_path: Path) -> None:
    """An operation that takes one of two models gets ``body: models.A | models.B`` (no keyword
    form) and validates its answer into the union (a ``cast`` keeps mypy's ``type[T]`` happy)."""
    doc = yaml.safe_load((FIXTURE_SCHEMAS / "demo-widgets.yaml").read_text(encoding="utf-8"))
    post = doc["paths"]["/v1/widgets"]["post"]
    union = {
        "anyOf": [{"$ref": "#/components/schemas/WidgetCreate"}, {"$ref": "#/components/schemas/Widget"}]
    }
    post["requestBody"]["content"]["application/json"]["schema"] = union
    post["responses"]["201" if "201" in post["responses"] else "200"]["content"]["application/json"][
        "schema"
    ] = union
    path = tmp_path / "union.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    op = next(o for o in load_spec(path).operations if o.operation_id == post["operationId"])
    assert op.body_annotation == "models.WidgetCreate | models.Widget"
    assert (op.body_model, op.body_fields) == (None, [])
    assert op.return_annotation == "models.WidgetCreate | models.Widget"
    assert (
        op.cast_to == 'cast("type[models.WidgetCreate | models.Widget]", models.WidgetCreate | models.Widget)'
    )


def test_spec_rejects_two_tags(tmp_path: Path) -> None:
    doc = yaml.safe_load((FIXTURE_SCHEMAS / "demo-widgets.yaml").read_text(encoding="utf-8"))
    doc["paths"]["/v1/widgets"]["get"]["tags"] = ["widgets", "widget-admin"]
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    with pytest.raises(SpecError, match="exactly one tag"):
        load_spec(path)


def test_design_notes_are_refused_in_descriptions(tmp_path: Path) -> None:
    """A "Design choice" in a description would become a public docstring; codegen refuses it."""
    schema = tmp_path / "traces-jobs.yaml"
    text = (DEFAULT_SCHEMAS / "traces-jobs.yaml").read_text(encoding="utf-8")
    schema.write_text(text.replace("summary: Create a trace job", "summary: Design choice - create a job"))
    with pytest.raises(SpecError, match="x-design-note"):
        load_spec(schema)


def test_design_notes_move_is_reproducible(tmp_path: Path) -> None:
    """``python -m codegen.design_notes`` moves a marked note out and changes nothing on a second run."""
    from codegen.design_notes import transform_file

    schema = tmp_path / "s.yaml"
    schema.write_text(
        "components:\n  schemas:\n    A:\n      type: object\n      description: |\n"
        "        Does one thing.\n\n        Design choice (the reference is silent): 409 on reuse.\n",
        encoding="utf-8",
    )
    assert transform_file(schema) is True
    moved = yaml.safe_load(schema.read_text(encoding="utf-8"))["components"]["schemas"]["A"]
    assert moved["description"].split() == ["Does", "one", "thing.", "409", "on", "reuse."]
    assert "Design choice" in moved["x-design-note"]
    assert transform_file(schema) is False
    for path in DEFAULT_SCHEMAS.glob("*.yaml"):
        load_spec(path)  # the committed schemas carry no notes in descriptions
