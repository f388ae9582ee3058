"""The generated clients against an ``httpx.MockTransport``: every surface, sync and async.

Request bodies and response payloads are built from the schemas themselves (the smallest
instance that satisfies each component schema), so the tests follow schema edits; the
assertions check what goes on the wire (method, path, query, JSON body, Bearer header)
and that what comes back is the typed model.
"""

from __future__ import annotations

import functools
import importlib
import json
import re
import sys
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pydantic
import pytest
import yaml

from codegen.generate import render_all, write_tree
from codegen.openapi import Spec, load_spec
from fleet_sdk._runtime import APIResponse, AsyncHTTPClient, HTTPClient

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ROOT / "schemas"
FIXTURE_SCHEMAS = Path(__file__).parent / "fixtures" / "schemas"
API_KEY = "sk-test-generated-clients"
BASE_URL = "https://api.test.invalid"


@functools.cache
def _doc(schema: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((SCHEMAS / schema).read_text(encoding="utf-8"))
    return loaded


@functools.cache
def _spec(schema: str) -> Spec:
    return load_spec(SCHEMAS / schema)


# --------------------------------------------------------------------------------------
# Minimal valid instances of component schemas
# --------------------------------------------------------------------------------------


def _deref(doc: dict[str, Any], node: Any) -> Any:
    while isinstance(node, dict) and "$ref" in node:
        target: Any = doc
        for part in node["$ref"][2:].split("/"):
            target = target[part]
        node = target
    return node


def _string_for(schema: dict[str, Any]) -> str:
    if schema.get("format") == "date-time":
        return "2024-05-01T12:00:00Z"
    pattern = schema.get("pattern")
    if pattern in ("^[^/]+$", "^[^/]*$", "^[A-Za-z0-9._-]+$"):  # an id: no slash, or a plain name
        return "x"
    if pattern:
        # The other patterns in the schemas are of the form ^[chars]{n}$ or ^[chars]{n,m}$.
        match = re.fullmatch(r"\^\[([^\]]+)\]\{(\d+)(?:,\d+)?\}\$", pattern)
        assert match, f"sample builder does not know pattern {pattern!r}"
        return match.group(1)[0] * int(match.group(2))
    return "x" * max(1, int(schema.get("minLength", 1)))


def sample(doc: dict[str, Any], schema: Any) -> Any:
    """The smallest JSON value valid for ``schema`` (required properties only)."""
    schema = _deref(doc, schema)
    if not isinstance(schema, dict) or not schema:
        return None
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return next(v for v in schema["enum"] if v is not None)
    for key in ("oneOf", "anyOf"):
        if key in schema:
            options = [o for o in schema[key] if _deref(doc, o).get("type") != "null"]
            return sample(doc, options[0])
    if "allOf" in schema:
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            value = sample(doc, part)
            if isinstance(value, dict):
                merged.update(value)
        return merged
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        props = schema.get("properties") or {}
        return {name: sample(doc, props.get(name, {})) for name in schema.get("required", [])}
    if kind == "array":
        return [sample(doc, schema.get("items", {})) for _ in range(int(schema.get("minItems", 0)))]
    if kind == "string":
        return _string_for(schema)
    if kind == "integer":
        return int(schema.get("minimum", 1))
    if kind == "number":
        return float(schema.get("minimum", 1.0))
    if kind == "boolean":
        return True
    return None


def _annotation_sample(doc: dict[str, Any], annotation: str) -> Any:
    """A JSON sample for ``models.X`` / ``list[models.X]`` / ``None``."""
    if annotation == "None":
        return None
    match = re.fullmatch(r"(list\[)?models\.(\w+)\]?", annotation)
    assert match, annotation
    one = sample(doc, {"$ref": f"#/components/schemas/{match.group(2)}"})
    return [one] if match.group(1) else one


def _union_members(annotation: str) -> list[str]:
    """The members of ``models.X | models.Y`` (one member for any other annotation)."""
    return annotation.split(" | ")


# --------------------------------------------------------------------------------------
# Mock transport
# --------------------------------------------------------------------------------------


@dataclass
class Recorder:
    """Answers every request with ``status``/``payload`` and keeps the requests."""

    status: int = 200
    payload: Any = None
    requests: list[httpx.Request] = field(default_factory=list)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.status == 204:
            return httpx.Response(204)
        return httpx.Response(self.status, json=self.payload)

    @property
    def last(self) -> httpx.Request:
        assert self.requests, "no request was sent"
        return self.requests[-1]


def sync_http(recorder: Recorder, api_key: str | None = API_KEY) -> HTTPClient:
    transport = httpx.MockTransport(recorder)
    return HTTPClient(BASE_URL, api_key=api_key, http_client=httpx.Client(transport=transport))


def async_http(recorder: Recorder, api_key: str | None = API_KEY) -> AsyncHTTPClient:
    transport = httpx.MockTransport(recorder)
    return AsyncHTTPClient(BASE_URL, api_key=api_key, http_client=httpx.AsyncClient(transport=transport))


def _json_body(request: httpx.Request) -> Any:
    return json.loads(request.content) if request.content else None


def _dump(model: Any) -> Any:
    if isinstance(model, list):
        return [_dump(item) for item in model]
    if isinstance(model, pydantic.BaseModel):
        return model.model_dump(mode="json", by_alias=True)
    return model


# --------------------------------------------------------------------------------------
# One explicit case per surface
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    surface: str
    schema: str
    client: str  # sync class name; the async one is "Async" + client
    operation: str
    expected_method: str  # written here, not read from the spec loader under test
    args: tuple[str, ...] = ()  # path arguments, in order
    kwargs: dict[str, Any] = field(default_factory=dict)  # query / idempotency kwargs
    expected_path: str = ""
    expected_query: dict[str, list[str]] = field(default_factory=dict)
    expected_headers: dict[str, str] = field(default_factory=dict)
    deprecated: bool = False


CASES = [
    Case(
        surface="env_instance",
        schema="env-instance.yaml",
        client="ControlPlaneClient",
        operation="list_instances",
        expected_method="GET",
        kwargs={"status": "running", "region": "us-west-2"},
        expected_path="/v1/env/instances",
        expected_query={"status": ["running"], "region": ["us-west-2"]},
    ),
    Case(
        surface="env_instance",
        schema="env-instance.yaml",
        client="ControlPlaneClient",
        operation="create_instance",
        expected_method="POST",
        kwargs={"idempotency_key": "idem-123"},
        expected_path="/v1/env/instances",
        expected_headers={"Idempotency-Key": "idem-123"},
    ),
    Case(
        surface="env_instance",
        schema="env-instance.yaml",
        client="ControlPlaneClient",
        operation="list_tasks",
        expected_method="GET",
        kwargs={"env_key": "fira", "task_keys": ["t1", "t2"]},
        expected_path="/v1/tasks",
        expected_query={"env_key": ["fira"], "task_keys": ["t1", "t2"]},
    ),
    Case(
        surface="env_instance",
        schema="env-instance.yaml",
        client="ControlPlaneClient",
        operation="get_instance",
        expected_method="GET",
        args=("inst/1",),
        expected_path="/v1/env/instances/inst%2F1",
    ),
    Case(
        surface="sessions_ingest",
        schema="sessions-ingest.yaml",
        client="SessionsClient",
        operation="ingest_session",
        expected_method="POST",
        expected_path="/v1/sessions/ingest",
    ),
    Case(
        surface="sessions_ingest",
        schema="sessions-ingest.yaml",
        client="SessionsClient",
        operation="log_session",
        expected_method="POST",
        expected_path="/v1/traces/logs",
    ),
    Case(
        surface="sessions_ingest",
        schema="sessions-ingest.yaml",
        client="SessionsClient",
        operation="get_session_transcript",
        expected_method="GET",
        args=("sess-1",),
        expected_path="/v1/sessions/sess-1/transcript",
    ),
    Case(
        surface="traces_jobs",
        schema="traces-jobs.yaml",
        client="TracesJobsClient",
        operation="create_trace_job",
        expected_method="POST",
        expected_path="/v1/traces/jobs",
    ),
    Case(
        surface="browser_lease",
        schema="browser-lease.yaml",
        client="BrowserLeaseClient",
        operation="create_browser_lease",
        expected_method="POST",
        kwargs={"idempotency_key": "lease-key"},
        expected_path="/v1/browser",
        expected_headers={"Idempotency-Key": "lease-key"},
    ),
    Case(
        surface="browser_lease",
        schema="browser-lease.yaml",
        client="BrowserLeaseClient",
        operation="get_browser_lease",
        expected_method="GET",
        args=("lease-1",),
        expected_path="/v1/browser/lease-1",
    ),
    Case(
        surface="evaluation_reports",
        schema="evaluation-reports.yaml",
        client="EvaluationReportsClient",
        operation="import_evaluation_report",
        expected_method="POST",
        expected_path="/v1/evaluation_reports",
    ),
    Case(
        surface="evaluation_reports",
        schema="evaluation-reports.yaml",
        client="EvaluationReportsClient",
        operation="get_evaluation_report",
        expected_method="GET",
        args=("run-1",),
        expected_path="/v1/evaluation_reports/run-1",
    ),
]


@dataclass
class Prepared:
    module: ModuleType
    models: ModuleType
    body: Any  # the model instance passed as ``body`` (or None)
    body_json: Any  # the JSON the body was built from: what must go on the wire
    payload: Any  # JSON the mock answers with
    return_annotation: str


def _prepare(case: Case) -> Prepared:
    module = importlib.import_module(f"fleet_generated.{case.surface}")
    doc = _doc(case.schema)
    spec = _spec(case.schema)
    op = next(o for o in spec.operations if o.operation_id == case.operation)
    assert op.deprecated == case.deprecated
    body = body_json = None
    if op.body_annotation:
        name = op.body_annotation.removeprefix("models.")
        body_json = _annotation_sample(doc, op.body_annotation)
        body = getattr(module.models, name).model_validate(body_json)
    return Prepared(
        module=module,
        models=module.models,
        body=body,
        body_json=body_json,
        payload=_annotation_sample(doc, op.return_annotation),
        return_annotation=op.return_annotation,
    )


def _call_args(case: Case, prepared: Prepared) -> tuple[tuple[Any, ...], dict[str, Any]]:
    args: tuple[Any, ...] = case.args + ((prepared.body,) if prepared.body is not None else ())
    return args, dict(case.kwargs)


def _assert_request(case: Case, prepared: Prepared, request: httpx.Request) -> None:
    assert request.method == case.expected_method
    assert request.url.raw_path.decode().split("?")[0] == case.expected_path
    query: dict[str, list[str]] = {}
    for key, value in request.url.params.multi_items():
        query.setdefault(key, []).append(value)
    assert query == case.expected_query
    assert request.headers["Authorization"] == f"Bearer {API_KEY}"
    for name, value in case.expected_headers.items():
        assert request.headers[name] == value
    if "idempotency_key" not in case.kwargs:
        assert "Idempotency-Key" not in request.headers
    assert _json_body(request) == prepared.body_json


def _assert_typed(prepared: Prepared, result: Any) -> None:
    match = re.fullmatch(r"(list\[)?models\.(\w+)\]?", prepared.return_annotation)
    assert match
    cls = getattr(prepared.models, match.group(2))
    if match.group(1):
        assert isinstance(result, list) and result
        assert all(isinstance(item, cls) for item in result)
        expected: Any = [cls.model_validate(item) for item in prepared.payload]
    else:
        assert isinstance(result, cls)
        expected = cls.model_validate(prepared.payload)
    assert _dump(result) == _dump(expected)


def _ids(case: Case) -> str:
    return f"{case.surface}.{case.operation}"


@pytest.fixture
def deprecation_guard(request: pytest.FixtureRequest) -> Iterator[Callable[[Case], Any]]:
    def guard(case: Case) -> Any:
        if case.deprecated:
            return pytest.warns(DeprecationWarning, match=case.operation)
        return warnings.catch_warnings()

    yield guard


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_sync_client(case: Case, deprecation_guard: Callable[[Case], Any]) -> None:
    prepared = _prepare(case)
    recorder = Recorder(payload=prepared.payload)
    client = getattr(prepared.module, case.client)(sync_http(recorder))
    args, kwargs = _call_args(case, prepared)
    with deprecation_guard(case):
        if not case.deprecated:
            warnings.simplefilter("error", DeprecationWarning)
        result = getattr(client, case.operation)(*args, **kwargs)
    assert len(recorder.requests) == 1
    _assert_request(case, prepared, recorder.last)
    _assert_typed(prepared, result)


@pytest.mark.parametrize("case", CASES, ids=_ids)
async def test_async_client(case: Case, deprecation_guard: Callable[[Case], Any]) -> None:
    prepared = _prepare(case)
    recorder = Recorder(payload=prepared.payload)
    client = getattr(prepared.module, f"Async{case.client}")(async_http(recorder))
    args, kwargs = _call_args(case, prepared)
    with deprecation_guard(case):
        if not case.deprecated:
            warnings.simplefilter("error", DeprecationWarning)
        result = await getattr(client, case.operation)(*args, **kwargs)
    assert len(recorder.requests) == 1
    _assert_request(case, prepared, recorder.last)
    _assert_typed(prepared, result)


@pytest.mark.parametrize("case", CASES, ids=_ids)
def test_sync_with_raw_response(case: Case) -> None:
    prepared = _prepare(case)
    recorder = Recorder(payload=prepared.payload)
    client = getattr(prepared.module, case.client)(sync_http(recorder))
    raw_client = client.with_raw_response
    assert type(raw_client).__name__ == f"{case.client}WithRawResponse"
    args, kwargs = _call_args(case, prepared)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        raw = getattr(raw_client, case.operation)(*args, **kwargs)
    assert isinstance(raw, APIResponse)
    assert raw.retries_taken == 0
    assert raw.status_code == 200
    _assert_request(case, prepared, recorder.last)
    _assert_typed(prepared, raw.parse())


@pytest.mark.parametrize("case", CASES, ids=_ids)
async def test_async_with_raw_response(case: Case) -> None:
    prepared = _prepare(case)
    recorder = Recorder(payload=prepared.payload)
    client = getattr(prepared.module, f"Async{case.client}")(async_http(recorder))
    raw_client = client.with_raw_response
    assert type(raw_client).__name__ == f"Async{case.client}WithRawResponse"
    args, kwargs = _call_args(case, prepared)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        raw = await getattr(raw_client, case.operation)(*args, **kwargs)
    assert isinstance(raw, APIResponse)
    assert raw.retries_taken == 0
    _assert_request(case, prepared, recorder.last)
    _assert_typed(prepared, raw.parse())


def test_every_surface_has_a_case() -> None:
    surfaces = {path.stem.replace("-", "_") for path in SCHEMAS.glob("*.yaml")}
    assert surfaces == {case.surface for case in CASES}


# --------------------------------------------------------------------------------------
# Every operation of every schema, through the sync client
# --------------------------------------------------------------------------------------


def _all_operations() -> list[tuple[str, str]]:
    return [
        (path.name, op.operation_id)
        for path in sorted(SCHEMAS.glob("*.yaml"))
        for op in _spec(path.name).operations
    ]


def _method_and_path(doc: dict[str, Any], operation_id: str) -> tuple[str, str]:
    """Method and path of an operation, read straight from the YAML (not via codegen)."""
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if isinstance(op, dict) and op.get("operationId") == operation_id:
                return method.upper(), path
    raise AssertionError(f"no operation {operation_id}")


@pytest.mark.parametrize(("schema", "operation_id"), _all_operations())
def test_every_operation_round_trips(schema: str, operation_id: str) -> None:
    spec = _spec(schema)
    doc = _doc(schema)
    module = importlib.import_module(f"fleet_generated.{spec.surface}")
    op = next(o for o in spec.operations if o.operation_id == operation_id)
    tag = next(t for t in spec.tags if t.name == op.tag)

    wire_method, wire_path = _method_and_path(doc, operation_id)
    meta = module.OPERATIONS[operation_id]
    assert (meta.method, meta.path, meta.tag, meta.deprecated) == (
        wire_method,
        wire_path,
        op.tag,
        op.deprecated,
    )

    # A union body or response (one of several named models) is sent and parsed once per member.
    bodies = _union_members(op.body_annotation) if op.body_annotation else [None]
    returns = _union_members(op.return_annotation)
    for index in range(max(len(bodies), len(returns))):
        body_annotation, return_annotation = bodies[index % len(bodies)], returns[index % len(returns)]
        _round_trip(module, tag.class_name, op, doc, body=body_annotation, returns=return_annotation)


def _round_trip(
    module: ModuleType, class_name: str, op: Any, doc: dict[str, Any], *, body: str | None, returns: str
) -> None:
    """Call one operation with a sample body of type ``body``, answering a sample of type
    ``returns``, and check the request sent and the value returned."""
    body_annotation, return_annotation = body, returns
    wire_method, wire_path = _method_and_path(doc, op.operation_id)
    recorder = Recorder(status=int(op.success_status), payload=_annotation_sample(doc, return_annotation))
    client = getattr(module, class_name)(sync_http(recorder))
    args: list[Any] = [f"v-{p.name}" for p in op.path_params]
    body_json: Any = None
    if body_annotation:
        match = re.fullmatch(r"(list\[)?models\.(\w+)\]?", body_annotation)
        assert match
        one = _annotation_sample(doc, body_annotation.replace("list[", "").rstrip("]"))
        model = getattr(module.models, match.group(2)).model_validate(one)
        args.append([model] if match.group(1) else model)
        body_json = [one] if match.group(1) else one
    # Required query parameters are keyword-only; each is sent with a recognisable value.
    required_query = {p.py_name: f"q-{p.name}" for p in op.query_params if p.required}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore" if op.deprecated else "error", DeprecationWarning)
        result = getattr(client, op.operation_id)(*args, **required_query)

    request = recorder.last
    expected_path = wire_path
    for p in op.path_params:
        expected_path = expected_path.replace(f"{{{p.name}}}", f"v-{p.name}")
    assert request.method == wire_method
    assert request.url.path == expected_path
    assert request.url.host == httpx.URL(BASE_URL).host
    for p in op.query_params:
        if p.required:
            assert request.url.params.get(p.name) == f"q-{p.name}"
    if body_annotation:
        assert _json_body(request) == body_json
    if return_annotation == "None":
        assert result is None
    else:
        match = re.fullmatch(r"(list\[)?models\.(\w+)\]?", return_annotation)
        assert match
        cls = getattr(module.models, match.group(2))
        assert all(isinstance(r, cls) for r in result) if match.group(1) else isinstance(result, cls)


def test_deprecated_operation_warns_once_per_call(demo: ModuleType) -> None:
    widget = {"id": "w", "name": "n", "status": "active", "labels": [], "created_at": "2024-05-01T12:00:00Z"}
    client = demo.WidgetsClient(sync_http(Recorder(payload=widget)))
    with pytest.warns(DeprecationWarning) as record:
        client.rename_widget("w", demo.models.WidgetCreate(name="n"))
    assert len([w for w in record if issubclass(w.category, DeprecationWarning)]) == 1
    assert record[0].filename == __file__  # stacklevel points at the caller


def test_server_url_constants_match_schemas() -> None:
    for path in SCHEMAS.glob("*.yaml"):
        spec = _spec(path.name)
        module = importlib.import_module(f"fleet_generated.{spec.surface}")
        assert spec.server_url == module.SERVER_URL
        assert set(module.OPERATIONS) == {op.operation_id for op in spec.operations}


# --------------------------------------------------------------------------------------
# Shapes the real schemas do not use yet (204, header params), via the fixture schema
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModuleType]:
    root = tmp_path_factory.mktemp("fixture-pkg")
    write_tree(render_all(FIXTURE_SCHEMAS), root / "fixture_api")
    sys.path.insert(0, str(root))
    try:
        yield importlib.import_module("fixture_api.demo_widgets")
    finally:
        sys.path.remove(str(root))
        for name in [n for n in sys.modules if n == "fixture_api" or n.startswith("fixture_api.")]:
            del sys.modules[name]


def test_fixture_204_returns_none(demo: ModuleType) -> None:
    recorder = Recorder(status=204)
    assert demo.WidgetsClient(sync_http(recorder)).delete_widget("w-1") is None
    assert recorder.last.method == "DELETE"
    assert recorder.last.url.path == "/v1/widgets/w-1"
    raw = demo.WidgetsClient(sync_http(recorder)).with_raw_response.delete_widget("w-1")
    assert raw.status_code == 204
    assert raw.parse() is None


async def test_fixture_204_async(demo: ModuleType) -> None:
    recorder = Recorder(status=204)
    assert await demo.AsyncWidgetsClient(async_http(recorder)).delete_widget("w-1") is None


def test_fixture_query_header_and_idempotency(demo: ModuleType) -> None:
    widget = {"id": "w", "name": "n", "status": "active", "labels": [], "created_at": "2024-05-01T12:00:00Z"}
    recorder = Recorder(payload=[widget])
    client = demo.WidgetsClient(sync_http(recorder))
    result = client.list_widgets(status="active", label=["a", "b"])
    assert isinstance(result[0], demo.models.Widget)
    assert recorder.last.url.params.get_list("label") == ["a", "b"]
    assert recorder.last.url.params["status"] == "active"
    assert "limit" not in recorder.last.url.params

    recorder.payload = widget
    client.get_widget("w", x_trace_id="trace-1", options={"extra_headers": {"X-Other": "1"}})
    assert recorder.last.headers["X-Trace-Id"] == "trace-1"
    assert recorder.last.headers["X-Other"] == "1"

    options = {"idempotency_key": "from-options"}
    client.create_widget(demo.models.WidgetCreate(name="n"), idempotency_key="k-1", options=options)
    assert recorder.last.headers["Idempotency-Key"] == "k-1"
    assert options == {"idempotency_key": "from-options"}  # the caller's dict is not mutated
    assert _json_body(recorder.last) == {"name": "n"}
    client.create_widget(demo.models.WidgetCreate(name="n"), options=options)
    assert recorder.last.headers["Idempotency-Key"] == "from-options"


def test_fixture_operations_and_servers(demo: ModuleType) -> None:
    assert demo.SERVER_URL == "https://widgets.example.com"
    health = demo.OPERATIONS["widget_health"]
    assert health.server == "https://{widget_host}/api"
    assert health.tag == "widget-admin"
    assert demo.OPERATIONS["delete_widget"].success_status == 204
    assert demo.OPERATIONS["rename_widget"].deprecated is True
    with pytest.raises(AttributeError):
        health.path = "/other"  # frozen


# --------------------------------------------------------------------------------------
# Request bodies as keyword arguments
# --------------------------------------------------------------------------------------


def test_body_keywords_send_only_what_was_passed() -> None:
    from fleet_generated.env_instance import ControlPlaneClient, models

    recorder = Recorder(payload=_annotation_sample(_doc("env-instance.yaml"), "models.InstanceResponse"))
    client = ControlPlaneClient(sync_http(recorder))
    client.create_instance(env_key="orderdesk", region=None)
    # Left out: not on the wire. Passed as None: sent as null.
    assert _json_body(recorder.last) == {"env_key": "orderdesk", "region": None}
    client.create_instance(models.InstanceRequest(env_key="orderdesk"))
    assert _json_body(recorder.last) == {"env_key": "orderdesk"}


async def test_body_keywords_async_and_raw() -> None:
    from fleet_generated.env_instance import AsyncControlPlaneClient

    recorder = Recorder(payload=_annotation_sample(_doc("env-instance.yaml"), "models.InstanceResponse"))
    client = AsyncControlPlaneClient(async_http(recorder))
    raw = await client.with_raw_response.create_instance(env_key="orderdesk", idempotency_key="k-9")
    assert isinstance(raw, APIResponse)
    assert _json_body(recorder.last) == {"env_key": "orderdesk"}
    assert recorder.last.headers["Idempotency-Key"] == "k-9"


def test_body_keywords_and_model_together_are_refused() -> None:
    from fleet_generated.env_instance import ControlPlaneClient, models

    recorder = Recorder()
    client = ControlPlaneClient(sync_http(recorder))
    with pytest.raises(TypeError, match="region"):
        client.create_instance(models.InstanceRequest(env_key="orderdesk"), region="us-west-2")
    assert recorder.requests == []


def test_body_keywords_name_the_missing_field() -> None:
    from fleet_generated.env_instance import ControlPlaneClient

    recorder = Recorder()
    with pytest.raises(pydantic.ValidationError, match="env_key"):
        ControlPlaneClient(sync_http(recorder)).create_instance(region="us-west-2")
    assert recorder.requests == []


def test_raw_view_wraps_the_client_methods_with_their_signatures() -> None:
    import inspect

    from fleet_generated.env_instance import AsyncControlPlaneClient, ControlPlaneClient

    for cls in (ControlPlaneClient, AsyncControlPlaneClient):
        client = cls(sync_http(Recorder()) if cls is ControlPlaneClient else async_http(Recorder()))  # type: ignore[arg-type]
        view = client.with_raw_response
        for name in ("create_instance", "get_instance", "list_instances"):
            assert inspect.signature(getattr(view, name)) == inspect.signature(getattr(client, name))


@pytest.mark.parametrize("schema", sorted(p.name for p in SCHEMAS.glob("*.yaml")))
def test_blocking_clients_are_their_async_twins(schema: str) -> None:
    """Every blocking method is derived from its async source: same signature, same docstring."""
    import inspect

    module = importlib.import_module(
        f"fleet_generated.{schema.removesuffix('.yaml').replace('-', '_')}.client"
    )
    pairs = [
        (getattr(module, name), getattr(module, f"Async{name}"))
        for name in module.__all__
        if f"Async{name}" in module.__all__ and not name.endswith("WithRawResponse")
    ]
    assert pairs
    for sync_cls, async_cls in pairs:
        async_ops = {n for n, f in vars(async_cls).items() if inspect.iscoroutinefunction(f)}
        sync_ops = {n for n in vars(sync_cls) if not n.startswith("_") and n != "with_raw_response"}
        assert sync_ops == async_ops, sync_cls.__name__
        for name in async_ops:
            sync_fn, async_fn = getattr(sync_cls, name), getattr(async_cls, name)
            assert not inspect.iscoroutinefunction(sync_fn)
            assert inspect.signature(sync_fn) == inspect.signature(async_fn), name
            assert sync_fn.__doc__ == async_fn.__doc__ and async_fn.__doc__


def test_a_blocking_method_that_would_suspend_is_refused() -> None:
    import asyncio

    from fleet_generated._resource import blocking

    class Sleeper:
        async def nap(self) -> int:
            await asyncio.sleep(0)
            return 1

    with pytest.raises(RuntimeError, match="suspended"):
        blocking(Sleeper.nap)(Sleeper())
