"""The contract cassettes: replay, schema conformance, secret hygiene, and proof that the
matchers reject the regressions they exist for.

Cassettes are recorded by ``nox -s record`` (``contracts/recording.py``); this module never
touches the network: the SDK's transport refuses every request vcrpy does not answer.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator
from hashlib import sha256
from typing import Any, Final

import httpx
import pytest
from vcr.request import Request

from contracts.cassette_io import (
    Interaction,
    cassette_paths,
    find_operation,
    interactions,
    load_cassette,
    request_schema,
    response_spec,
    schema_errors,
)
from contracts.matchers import (
    INSTANCE_HOST_RE,
    ORCHESTRATOR_HOST,
    PLATFORM_HOST,
    S3_HOST,
    auth_scheme_of,
    expected_auth_scheme,
    mismatches,
)
from contracts.recording import (
    CASSETTES,
    IDEMPOTENCY_PLACEHOLDER,
    REDACTED,
    UUID4_PLACEHOLDER,
    contract_vcr,
    no_retries,
    s3_client,
    screenshot_store,
)
from contracts.scenarios import SCENARIOS, ScenarioContext
from fleet_sdk import AsyncFleet

RECORD_HINT: Final = "record it with `nox -s record` (python -m contracts.recording)"
REPLAY_KEY: Final = "sk-replay-not-a-real-key-0000000000"


def _cassette_ids() -> list[str]:
    return [path.stem for path in cassette_paths()]


# ---------------------------------------------------------------- replay


def test_every_scenario_has_its_cassette_and_nothing_else() -> None:
    recorded = set(_cassette_ids())
    missing = sorted(set(SCENARIOS) - recorded)
    stray = sorted(recorded - set(SCENARIOS))
    assert not missing, f"scenarios without a cassette: {missing}; {RECORD_HINT}"
    assert not stray, f"cassettes without a scenario: {stray}"


def _refuse(request: httpx.Request) -> httpx.Response:
    raise AssertionError(f"replay reached the network: {request.method} {request.url}")


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_replay(name: str) -> None:
    """The SDK still sends exactly the recorded requests and still understands the responses."""
    if not (CASSETTES / f"{name}.yaml").is_file():
        pytest.fail(f"no cassette for {name!r}; {RECORD_HINT}")
    replay = contract_vcr("none")
    async with httpx.AsyncClient(transport=httpx.MockTransport(_refuse)) as pool:
        fleet = AsyncFleet(REPLAY_KEY, http_client=pool, environ={}, retry=no_retries())
        context = ScenarioContext(
            fleet=fleet, s3=s3_client, screenshot_store=screenshot_store, poll_interval=0.0
        )
        with replay.use_cassette(f"{name}.yaml", allow_playback_repeats=False) as cassette:
            await SCENARIOS[name](context)
            unplayed = [str(r) for i, r in enumerate(cassette.requests) if not cassette.play_counts[i]]
        await fleet.close()
    assert not unplayed, f"recorded requests the SDK no longer sends: {unplayed}"


# ---------------------------------------------------------------- OpenAPI conformance


def _json(raw: bytes, what: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise AssertionError(f"{what} is not JSON: {raw[:120]!r}") from exc


def _request_bytes(request: Request) -> bytes:
    body: Any = request._body
    if body is None:
        return b""
    return body.encode() if isinstance(body, str) else bytes(body)


def _check_s3(item: Interaction) -> None:
    """S3 has no OpenAPI document here: pin the shape of docs/wire.md#traces instead."""
    match = re.fullmatch(r"/harness/screenshot/([0-9a-f]{24})\.(png|jpeg)", item.request.path)
    assert match, f"{item.label}: not a screenshot key"
    assert item.request.method in ("HEAD", "PUT"), item.label
    if item.request.method == "PUT":
        body = _request_bytes(item.request)
        assert sha256(body).hexdigest()[:24] == match.group(1), f"{item.label}: key is not sha256(bytes)[:24]"
        mime = "image/png" if match.group(2) == "png" else "image/jpeg"
        assert item.request.headers.get("Content-Type") == mime, item.label


@pytest.mark.parametrize("cassette", _cassette_ids())
def test_recorded_bodies_match_their_openapi_operation(cassette: str) -> None:
    problems: list[str] = []
    for item in load_cassette(CASSETTES / f"{cassette}.yaml"):
        if item.request.host == S3_HOST:
            _check_s3(item)
            continue
        operation = find_operation(item.request)
        if operation is None:
            problems.append(f"{item.label}: no operation of schemas/*.yaml has this method and URL")
            continue
        body = _request_bytes(item.request)
        schema = request_schema(operation)
        if schema is not None:
            problems += [
                f"{item.label} request: {e}"
                for e in schema_errors(operation, schema, _json(body, f"{item.label} request"))
            ]
        else:
            assert not body, f"{item.label}: {operation.operation_id} takes no body, one was sent"
        spec = response_spec(operation, item.status)
        if spec is None:
            problems.append(f"{item.label}: status {item.status} is not documented")
            continue
        schema = next(
            (
                c.get("schema")
                for m, c in (spec.get("content") or {}).items()
                if m.startswith("application/json")
            ),
            None,
        )
        if schema is None:
            assert not item.response_body, f"{item.label}: undocumented response body"
            continue
        assert (item.response_header("content-type") or "").startswith("application/json"), item.label
        problems += [
            f"{item.label} response {item.status}: {e}"
            for e in schema_errors(operation, schema, _json(item.response_body, f"{item.label} response"))
        ]
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------- headers and auth in the cassettes


def test_every_recorded_request_uses_the_auth_scheme_of_its_host() -> None:
    wrong = [
        f"{item.label}: {got!r}, expected {expected!r}"
        for item in interactions()
        if (got := auth_scheme_of(item.request)) != (expected := expected_auth_scheme(item.request.host))
    ]
    assert not wrong, "\n".join(wrong)


def test_sdk_requests_carry_a_request_id_and_redacted_credentials() -> None:
    for item in interactions():
        headers = {k.lower(): v for k, v in item.request.headers.items()}
        if item.request.host == S3_HOST:
            assert headers.get("authorization") == f"AWS4-HMAC-SHA256 {REDACTED}", item.label
            continue
        assert headers.get("x-request-id") == UUID4_PLACEHOLDER, f"{item.label}: X-Request-ID is not a uuid4"
        assert headers.get("idempotency-key") in (None, IDEMPOTENCY_PLACEHOLDER), item.label
        if "authorization" in headers:
            assert headers["authorization"] == f"Bearer {REDACTED}", item.label


def test_the_cassettes_cover_every_surface() -> None:
    hosts = Counter(
        "instance" if INSTANCE_HOST_RE.match(item.request.host) else item.request.host
        for item in interactions()
    )
    assert set(hosts) == {ORCHESTRATOR_HOST, PLATFORM_HOST, S3_HOST, "instance"}, hosts
    called = {(op.method, op.path) for item in interactions() if (op := find_operation(item.request))}
    for required in [
        ("POST", "/v1/env/instances"),
        ("GET", "/v1/env/instances/{instance_id}"),
        ("DELETE", "/v1/env/instances/{instance_id}"),
        ("POST", "/reset"),
        ("POST", "/resources/sqlite/{name}/query"),
        ("POST", "/v1/verifiers/execute"),
        ("POST", "/v1/tasks"),
        ("POST", "/v1/jobs"),
        ("GET", "/v1/jobs/{job_id}"),
        ("GET", "/v1/sessions/job/{job_id}"),
        ("POST", "/v1/traces/jobs"),
        ("POST", "/v1/sessions/ingest"),
        ("POST", "/v1/browser"),
        ("DELETE", "/v1/browser/{lease_id}"),
    ]:
        assert required in called, f"no cassette calls {required}"
    s3 = {item.request.method for item in interactions() if item.request.host == S3_HOST}
    assert s3 == {"HEAD", "PUT"}


# ---------------------------------------------------------------- secrets


_SECRET_PATTERNS: Final = {
    "OpenAI-style key": re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}"),
    # ``LocalFleet`` keys: ``local-`` + ``secrets.token_urlsafe`` (mixed case), not ``local-job_<hex>`` ids.
    "local server key": re.compile(r"\blocal-(?=[\w\-]*[A-Z])(?=[\w\-]*[a-z])[\w\-]{20,}"),
    "AWS access key id": re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    "SigV4 credential": re.compile(r"Credential=|Signature=[0-9a-f]"),
    "AWS session token": re.compile(r"(?i)x-amz-security-token"),
    "unredacted bearer": re.compile(r"(?i)\bbearer\s+(?!<redacted>)[^\s'\"]{6,}"),
    "unredacted SigV4": re.compile(r"AWS4-HMAC-SHA256\s+(?!<redacted>)\S"),
    "private key": re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
}
_TOKEN: Final = re.compile(r"[A-Za-z0-9_\-+/=.~]{24,}")
# JSON fields whose values are expected to be long opaque data, never credentials.
_OPAQUE_FIELDS: Final = frozenset({"bundle", "sha256", "X-Amz-Content-SHA256"})


def _entropy(token: str) -> float:
    counts = Counter(token)
    return -sum(n / len(token) * math.log2(n / len(token)) for n in counts.values())


def _looks_like_key(token: str) -> bool:
    """Long, mixed-alphabet, high-entropy: the shape of an API key or secret."""
    core = token.strip("=.")
    if len(core) < 24 or core.startswith(("http", "data:")):
        return False
    if re.fullmatch(r"[0-9a-f\-]+", core, flags=re.IGNORECASE):
        return False  # hex digests, uuids, etags
    classes = sum(bool(re.search(p, core)) for p in ("[a-z]", "[A-Z]", "[0-9]"))
    return classes == 3 and _entropy(core) >= 4.0


def _strings(value: Any, key: str = "") -> Iterator[tuple[str, str]]:
    """(field, text) for every string inside a parsed value, skipping opaque fields."""
    if key in _OPAQUE_FIELDS:
        return
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(v, str(k))
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v, key)
    elif isinstance(value, bytes):
        try:
            text = value.decode("utf-8")
        except UnicodeDecodeError:
            return  # binary payload (a screenshot)
        yield from _strings(text, key)
    elif isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            yield key, value
            return
        if isinstance(parsed, dict | list):
            yield from _strings(parsed, key)
        else:
            yield key, value


def secret_findings(text: str, parsed: Any) -> list[str]:
    """Everything in a cassette that looks like a credential (raw text and parsed strings)."""
    findings = [
        f"{name}: {m.group(0)[:24]}..." for name, p in _SECRET_PATTERNS.items() for m in p.finditer(text)
    ]
    for field, value in _strings(parsed):
        for token in _TOKEN.findall(value):
            if _looks_like_key(token):
                findings.append(f"high-entropy token in {field or 'value'}: {token[:12]}...")
    return findings


def _cassette_document(path: str) -> tuple[str, Any]:
    import yaml

    text = (CASSETTES / path).read_text()
    return text, yaml.load(text, Loader=yaml.CSafeLoader if hasattr(yaml, "CSafeLoader") else yaml.SafeLoader)


@pytest.mark.parametrize("cassette", _cassette_ids())
def test_no_secret_in_cassette(cassette: str) -> None:
    text, parsed = _cassette_document(f"{cassette}.yaml")
    findings = secret_findings(text, parsed)
    assert not findings, f"{cassette}.yaml holds what looks like a secret:\n" + "\n".join(findings)


@pytest.mark.parametrize(
    "planted",
    [
        "Authorization: Bearer sk-live-9f8Qx2LmT4vB7nR1cZ",
        "Bearer local-Zx81nQwLk3j9HbV2pYt6RmCd4Ef0",
        "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20260101/us-east-1/s3/aws4_request",
        "key id AKIAIOSFODNN7EXAMPLE",
        '{"api_key": "Xq7Lm2Pz9Rt4Vb8Nc1Kd6Wf3Hj5Gs0Ya"}',
        "x-amz-security-token: FwoGZXIvYXdzEJr",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY",
    ],
)
def test_the_secret_scan_catches_planted_secrets(planted: str) -> None:
    document = {"interactions": [{"request": {"headers": {"x": [planted]}, "body": planted}}]}
    assert secret_findings(planted, document), planted


def test_the_secret_scan_leaves_ordinary_values_alone() -> None:
    ordinary = [
        "Bearer <redacted>",
        "AWS4-HMAC-SHA256 <redacted>",
        "inst_41c01eb4204e8594",
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "https://inst-41c01eb4204e8594.env.fleetai.com/api/v1/env/resources/sqlite/current/query",
        "2026-11-29T21:08:44.996961Z",
        "calendar-book-planning-sync-with-kwame",
    ]
    for value in ordinary:
        assert not secret_findings(value, {"value": value}), value


# ---------------------------------------------------------------- the matchers reject regressions


def _recorded(cassette: str, predicate: Callable[[Request], bool]) -> Request:
    for item in load_cassette(CASSETTES / cassette):
        if predicate(item.request):
            return item.request
    raise AssertionError(f"{cassette} has no such request")


def _ingest() -> tuple[str, Request]:
    name = "session_ingest_with_image.yaml"
    return name, _recorded(name, lambda r: r.path == "/v1/sessions/ingest")


def _manager() -> tuple[str, Request]:
    name = "instance_reset_and_query.yaml"
    return name, _recorded(name, lambda r: bool(INSTANCE_HOST_RE.match(r.host)))


def _s3_put() -> tuple[str, Request]:
    name = "screenshot_upload_s3.yaml"
    return name, _recorded(name, lambda r: r.host == S3_HOST and r.method == "PUT")


def _with_uri(request: Request, old: str, new: str) -> Request:
    live = copy.deepcopy(request)
    assert old in live.uri
    live.uri = live.uri.replace(old, new)
    return live


def _with_auth(request: Request, headers: dict[str, str]) -> Request:
    live = copy.deepcopy(request)
    kept = {k: v for k, v in live.headers.items() if k.lower() != "authorization"}
    live.headers = {**kept, **headers}
    return live


def _with_renamed_field(request: Request, old: str, new: str) -> Request:
    live = copy.deepcopy(request)
    document: dict[str, Any] = json.loads(_request_bytes(request))
    document[new] = document.pop(old)
    live.body = json.dumps(document).encode()
    return live


Mutation = Callable[[Request], Request]
REGRESSIONS: Final[dict[str, tuple[Callable[[], tuple[str, Request]], Mutation]]] = {
    # The past regression: session ingest sent to the traces host (docs/wire.md#hosts).
    "ingest on the platform host": (_ingest, lambda r: _with_uri(r, ORCHESTRATOR_HOST, PLATFORM_HOST)),
    "X-API-Key instead of Bearer": (_ingest, lambda r: _with_auth(r, {"X-API-Key": "local-regression"})),
    "no credentials": (_ingest, lambda r: _with_auth(r, {})),
    "messages renamed to history": (_ingest, lambda r: _with_renamed_field(r, "messages", "history")),
    "legacy traces logs path": (_ingest, lambda r: _with_uri(r, "/v1/sessions/ingest", "/v1/traces/logs")),
    "plain http": (_ingest, lambda r: _with_uri(r, "https://", "http://")),
    "API key sent to the manager API": (
        _manager,
        lambda r: _with_auth(r, {"Authorization": "Bearer sk-live-regression-0000"}),
    ),
    "manager API under the orchestrator": (
        _manager,
        lambda r: _with_uri(r, f"https://{r.host}/api/v1/env", f"https://{ORCHESTRATOR_HOST}/api/v1/env"),
    ),
    "screenshot to the global S3 endpoint": (
        _s3_put,
        lambda r: _with_uri(r, S3_HOST, "fleet-sessions-images.s3.amazonaws.com"),
    ),
    "screenshot under another key": (
        _s3_put,
        lambda r: _with_uri(r, "/harness/screenshot/", "/screenshots/"),
    ),
}


@pytest.mark.parametrize("source", [_ingest, _manager, _s3_put], ids=["ingest", "manager", "s3-put"])
def test_the_unmutated_request_matches(source: Callable[[], tuple[str, Request]]) -> None:
    cassette_name, recorded = source()
    assert mismatches(copy.deepcopy(recorded), recorded) == []
    with contract_vcr("none").use_cassette(cassette_name) as cassette:
        assert cassette.can_play_response_for(copy.deepcopy(recorded))


@pytest.mark.parametrize("regression", sorted(REGRESSIONS))
def test_a_mutated_request_is_rejected(regression: str) -> None:
    source, mutate = REGRESSIONS[regression]
    cassette_name, recorded = source()
    live = mutate(recorded)
    assert mismatches(live, recorded), f"{regression}: the matchers accepted it"
    # The same through vcrpy itself: the redaction filter runs first, the secret never matters.
    with contract_vcr("none").use_cassette(cassette_name) as cassette:
        assert not cassette.can_play_response_for(live), f"{regression}: the cassette would replay it"
