"""The generated clients' layout: one module per schema tag, and a raw view built once per client.

Each surface package holds ``models.py``, ``_operations.py`` (the operation table), one module per
tag with that tag's clients, and ``client.py`` gathering them (the import path the SDK uses). The
``with_raw_response`` view is cached on the client, as openai-python's resources cache theirs.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import httpx
import pytest

from codegen.generate import DEFAULT_OUT, DEFAULT_SCHEMAS, render_all, write_tree
from codegen.openapi import Spec, SpecError, load_spec, module_name
from fleet_sdk._runtime import APIResponse, AsyncHTTPClient, HTTPClient

FIXTURE_SCHEMAS = Path(__file__).parent / "fixtures" / "schemas"
BASE_URL = "https://api.test.invalid"
SPECS = [load_spec(path) for path in sorted(DEFAULT_SCHEMAS.glob("*.yaml"))]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    """The fixture schema's surface (two tags) generated into a temporary package."""
    root = tmp_path_factory.mktemp("fixture-modules")
    write_tree(render_all(FIXTURE_SCHEMAS), root / "fixture_modules_api")
    sys.path.insert(0, str(root))
    try:
        yield importlib.import_module("fixture_modules_api.demo_widgets")
    finally:
        sys.path.remove(str(root))
        for name in [n for n in sys.modules if n.split(".")[0] == "fixture_modules_api"]:
            del sys.modules[name]


def _deleting(status: int = 204) -> tuple[httpx.MockTransport, list[httpx.Request]]:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(status)

    return httpx.MockTransport(answer), seen


def _public_methods(cls: type) -> set[str]:
    return {name for name in vars(cls) if not name.startswith("_") and name != "with_raw_response"}


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.surface)
def test_each_tags_operations_live_in_its_own_module(spec: Spec) -> None:
    """Every tag of every schema has a module of its own, holding exactly that tag's operations."""
    files = {p.name for p in (DEFAULT_OUT / spec.surface).glob("*.py")}
    assert files == {"__init__.py", "_operations.py", "client.py", "models.py"} | {
        f"{tag.module}.py" for tag in spec.tags
    }
    client = importlib.import_module(f"fleet_generated.{spec.surface}.client")
    for tag in spec.tags:
        module = importlib.import_module(f"fleet_generated.{spec.surface}.{tag.module}")
        operation_ids = {op.operation_id for op in tag.operations}
        for prefix in ("", "Async"):
            cls = getattr(module, f"{prefix}{tag.class_name}")
            assert cls.__module__ == module.__name__
            assert _public_methods(cls) == operation_ids
            for op_id in operation_ids:
                assert inspect.getmodule(getattr(cls, op_id)) is module, op_id
            raw_view = getattr(module, f"{prefix}{tag.class_name}WithRawResponse")
            assert raw_view.__module__ == module.__name__
            # client.py (the SDK's import path) gathers the same classes, not copies.
            assert getattr(client, cls.__name__) is cls
        assert {module.OPERATIONS[op_id].tag for op_id in operation_ids} == {tag.name}


def test_the_fixture_splits_its_two_tags(demo: ModuleType) -> None:
    """A schema with two tags gets two modules; neither holds the other's operations."""
    widgets = importlib.import_module(f"{demo.__name__}.widgets")
    admin = importlib.import_module(f"{demo.__name__}.widget_admin")
    assert "delete_widget" in _public_methods(widgets.WidgetsClient)
    assert _public_methods(admin.WidgetAdminClient) == {"widget_health"}
    assert not _public_methods(widgets.WidgetsClient) & _public_methods(admin.WidgetAdminClient)
    assert demo.WidgetsClient is widgets.WidgetsClient
    assert demo.AsyncWidgetAdminClient is admin.AsyncWidgetAdminClient


def test_sync_raw_view_is_built_once(demo: ModuleType) -> None:
    """``with_raw_response`` is the same object on every access, per client, and still raw."""
    transport, seen = _deleting()
    client = demo.WidgetsClient(
        HTTPClient(BASE_URL, api_key="k", http_client=httpx.Client(transport=transport))
    )
    view = client.with_raw_response
    assert client.with_raw_response is view
    other = demo.WidgetsClient(
        HTTPClient(BASE_URL, api_key="k", http_client=httpx.Client(transport=transport))
    )
    assert other.with_raw_response is not view
    raw = view.delete_widget("w-1")
    assert isinstance(raw, APIResponse)
    assert raw.status_code == 204
    # Building the view did not turn the client itself raw.
    assert client.delete_widget("w-2") is None
    assert [r.url.path for r in seen] == ["/v1/widgets/w-1", "/v1/widgets/w-2"]


async def test_async_raw_view_is_built_once(demo: ModuleType) -> None:
    transport, seen = _deleting()
    http = AsyncHTTPClient(BASE_URL, api_key="k", http_client=httpx.AsyncClient(transport=transport))
    client = demo.AsyncWidgetsClient(http)
    view = client.with_raw_response
    assert client.with_raw_response is view
    raw = await client.with_raw_response.delete_widget("w-1")
    assert isinstance(raw, APIResponse)
    assert raw.status_code == 204
    assert await client.delete_widget("w-2") is None
    assert len(seen) == 2


def test_a_copied_client_does_not_share_the_raw_view(demo: ModuleType) -> None:
    """The raw twin behind a view is a copy of the client; a view already cached on the client
    must not ride along into it (it would wrap the original client, not the twin)."""
    transport, _ = _deleting()
    client = demo.WidgetsClient(
        HTTPClient(BASE_URL, api_key="k", http_client=httpx.Client(transport=transport))
    )
    view = client.with_raw_response
    twin = client._raw_twin()
    assert "with_raw_response" not in vars(twin)
    assert twin.with_raw_response is not view


@pytest.mark.parametrize("tag", ["client", "models", "1st-tag", "class"])
def test_a_tag_whose_module_would_clash_is_refused(tag: str) -> None:
    with pytest.raises(SpecError, match="module name"):
        module_name(tag)


def test_module_names() -> None:
    assert module_name("control-plane") == "control_plane"
    assert module_name("traces jobs") == "traces_jobs"
