"""``fleet_sdk.types``: the public home of the generated models, one module per API surface."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys

import pytest
from fleet_generated import SURFACES

import fleet_sdk.types


def test_every_surface_has_a_types_module() -> None:
    assert sorted(fleet_sdk.types.__all__) == sorted(SURFACES)
    for surface in SURFACES:
        assert importlib.import_module(f"fleet_sdk.types.{surface}") is getattr(fleet_sdk.types, surface)


@pytest.mark.parametrize("surface", SURFACES)
def test_a_types_module_exposes_exactly_the_generated_models(surface: str) -> None:
    public = importlib.import_module(f"fleet_sdk.types.{surface}")
    models = importlib.import_module(f"fleet_generated.{surface}.models")
    defined = sorted(
        name
        for name, value in vars(models).items()
        # pydantic puts parametrized generics such as "RootModel[str]" in the module too.
        if inspect.isclass(value) and value.__module__ == models.__name__ and name.isidentifier()
    )
    assert defined, surface
    assert public.__all__ == defined
    for name in defined:
        assert getattr(public, name) is getattr(models, name), name
    # Nothing else leaks in: no pydantic or typing names imported by the models module.
    assert sorted(n for n in vars(public) if not n.startswith("_")) == defined


def test_the_classes_are_the_ones_the_clients_use() -> None:
    from fleet_generated.env_instance import models

    from fleet_sdk.types import env_instance
    from fleet_sdk.types.env_instance import QueryRequest

    assert QueryRequest is env_instance.QueryRequest is models.QueryRequest
    assert isinstance(env_instance.QueryRequest(query="SELECT 1"), models.QueryRequest)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'models'"):
        _ = fleet_sdk.types.models


def _loaded_after(statement: str) -> set[str]:
    code = f"import sys\n{statement}\nprint('\\n'.join(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(result.stdout.split())


def test_importing_fleet_sdk_types_loads_no_models() -> None:
    assert _loaded_after("import fleet_sdk.types") - _loaded_after("import fleet_sdk") == {"fleet_sdk.types"}


def test_a_types_module_loads_only_its_own_surface() -> None:
    loaded = _loaded_after("from fleet_sdk.types import traces_jobs")
    surfaces = {name.split(".")[1] for name in loaded if name.startswith("fleet_generated.")}
    assert surfaces - {"_operation", "_resource", "_transport"} == {"traces_jobs"}
