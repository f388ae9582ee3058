"""The request gate and the body validators find a path's route with one regex per request, and
find exactly what trying the routes one by one found.

The gate used to try every keyed route's regex on every request (dozens of them, on each MCP
call too), and ``BodySchemas.match`` every template of the method; both now join their regexes
into one. Joining drops the routes' named groups, so these tests hold the joined answer against
the one-by-one answer for a concrete path of every route of the real app, with each path's near
misses (a segment more, a segment less, a trailing slash), and the requests the gate sees most.
"""

from __future__ import annotations

import re

import pytest

from fleet_local._app import create_app
from fleet_local._manager import MANAGER_PREFIX
from fleet_local._request_gate import RequestGate, _gate_headers, any_of
from fleet_local._server import build_state
from fleet_local._state import LocalSettings
from fleet_local._validation import load_body_schemas

_GROUP = re.compile(r"\(\?P<[^>]+>[^)]*\)")


def concrete(pattern: re.Pattern[str]) -> list[str]:
    """A concrete path of a route regex, and its near misses."""
    path = re.sub(r"\\(.)", r"\1", _GROUP.sub("inst_0123abcd", pattern.pattern).strip("^$"))
    head, _, _ = path.rpartition("/")
    return [path, path + "/", path + "/more", head or "/", path.replace("inst_0123abcd", "a/b")]


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> list[re.Pattern[str]]:
    """The keyed routes' regexes, as the app hands them to its request gate."""
    state = build_state(LocalSettings(data_dir=tmp_path_factory.mktemp("data"), s3=False))
    try:
        app = create_app(state)
    finally:
        state.store.close()
    gate = next(m for m in app.user_middleware if m.cls is RequestGate)
    return list(gate.kwargs["keyed_paths"])


def paths_of(patterns: list[re.Pattern[str]]) -> list[str]:
    bodies = load_body_schemas({"instance-manager": MANAGER_PREFIX})
    templates = [rx for _, rx, _ in bodies._templates]
    paths = [p for pattern in [*patterns, *templates] for p in concrete(pattern)]
    extra = ["/", "", "/v1/regions", "/instances/inst_1/mcp", "/instances/inst_1/api/v1/mcp/", "/x" * 40]
    return [*paths, *(path for _, path in bodies._bodies), *extra]


def test_one_regex_for_the_keyed_routes_answers_as_each_route(keyed: list[re.Pattern[str]]) -> None:
    assert len(keyed) > 30
    joined = any_of(keyed)
    paths = paths_of(keyed)
    assert sum(joined(p) for p in paths) >= len(keyed)  # every route's own path, at least
    for path in paths:
        assert joined(path) == any(p.match(path) for p in keyed), path
    for pattern in keyed:  # and each route alone
        assert [any_of([pattern])(path) for path in paths] == [bool(pattern.match(path)) for path in paths]


def test_patterns_that_cannot_be_joined_are_tried_one_by_one() -> None:
    mixed = [re.compile(r"^/a/(?P<x>[^/]+)$"), re.compile(r"^/B$", re.IGNORECASE)]
    backref = [re.compile(r"^/(?P<x>[a-z])/(?P=x)$"), re.compile(r"^/c$")]
    for patterns, hits, misses in (
        (mixed, ["/a/1", "/b", "/B"], ["/a", "/a/1/2", "/c"]),
        (backref, ["/q/q", "/c"], ["/q/r", "/d"]),
    ):
        matches = any_of(patterns)
        assert all(matches(p) for p in hits) and not any(matches(p) for p in misses)
    assert not any_of([])("/")


def test_body_schemas_find_the_template_trying_each_would(keyed: list[re.Pattern[str]]) -> None:
    bodies = load_body_schemas({"instance-manager": MANAGER_PREFIX})
    one_by_one = bodies._templates
    for path in paths_of(keyed):
        for method in ("POST", "PUT", "PATCH", "GET", "DELETE"):
            literal = bodies._bodies.get((method, path))
            expected = literal or next((b for m, rx, b in one_by_one if m == method and rx.match(path)), None)
            assert bodies.match(method, path) is expected, (method, path)
            assert bodies.match(method.lower(), path) is expected
    assert sum(bodies.match("POST", p) is not None for p in paths_of(keyed)) >= 10


def test_the_gate_reads_its_headers_as_a_dict_of_all_of_them_would() -> None:
    """The last of a repeated header wins (as before), names in any case; others are left out."""
    raw = [
        (b"Authorization", b"Bearer first"),
        (b"content-type", b"application/json"),
        (b"X-Custom", b"\xff"),
        (b"AUTHORIZATION", b"Bearer last"),
        (b"Content-Length", b"12"),
        (b"x-api-key", b"k\xe9"),
    ]
    assert _gate_headers(raw) == {
        "authorization": "Bearer last",
        "content-type": "application/json",
        "content-length": "12",
        "x-api-key": "k\xe9",
    }
    everything = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in raw}
    assert all(everything[name] == value for name, value in _gate_headers(raw).items())
    assert _gate_headers([]) == {}
