"""Every bad query value is a 4xx: empty enum values, dates at the ends of time, huge integers.

Each of these answered a 500 or a silent default before: ``?format=&theme=`` rendered the default
report where ``?format=bogus`` is a 422; a trace window ending in the first minutes of the year 1
raised ``OverflowError`` computing its start; a presigned S3 URL dated then raised the same, and
one with an ``X-Amz-Expires`` of 5,000 digits a ``ValueError``; the web UI took a search or an id
of 5,000 digits (or ``²``) for a number. Beyond those cases, every query parameter the schemas
declare is tried with the bad values of its type.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from _http import raw_client

from fleet_local import LocalFleet
from fleet_sdk.reports import Outcome, Source, build_report
from fleet_sdk.types import env_instance as models

SCHEMAS = Path(__file__).parents[2] / "schemas"
RUN_ID = "query-values"
EXTREME_TIMES = [
    "0001-01-01T00:00:00Z",
    "0001-01-01T00:00:44Z",
    "0001-01-01T00:30:00+01:00",  # the year 0 in UTC
    "9999-12-31T23:59:59Z",
    "9999-12-31T23:30:00-01:00",  # the year 10000 in UTC
    "2026-13-01T00:00:00Z",
    "",
]
BAD_VALUES: dict[str, list[str]] = {
    "integer": ["", "9" * 5000, "-" + "9" * 5000, "1e3", "0x10", "NaN"],
    "boolean": ["", "maybe", "9" * 5000],
    "date-time": EXTREME_TIMES,
    "string": ["", "x" * 5000, "\u202e\ufffd"],
    "array": ["", "x" * 5000],
}


@pytest.fixture(scope="module")
def api(local: LocalFleet) -> Iterator[httpx.Client]:
    """A keyed client, and a complete report stored under :data:`RUN_ID`."""
    with raw_client(local) as client:
        report = build_report(
            run_id=RUN_ID,
            source=Source(kind="client"),
            suite_name="suite",
            task_keys=["t1"],
            models=["local/scripted"],
            k=1,
            outcomes=[Outcome(task_key="t1", model="local/scripted", status="passed", score=1.0)],
        )
        stored = client.post("/v1/evaluation_reports", json=report.to_dict())
        assert stored.status_code in (200, 201), stored.text
        yield client


def named(response: httpx.Response) -> list[list[Any]]:
    return [issue["loc"] for issue in response.json()["detail"]]


@pytest.mark.parametrize(
    ("path", "name"),
    [
        (f"/v1/evaluation_reports/{RUN_ID}", "format"),
        (f"/v1/evaluation_reports/{RUN_ID}", "theme"),
        (f"/v1/evaluation_reports/{RUN_ID}", "download"),
        ("/v1/env/instances", "status"),
        ("/v1/env/runs", "active"),
    ],
)
def test_an_empty_enum_value_is_a_422_like_any_other_bad_one(api: httpx.Client, path: str, name: str) -> None:
    """``?format=&theme=`` answered 200 with the default rendering, where ``?format=bogus`` is 422."""
    for value in ("", "bogus"):
        refused = api.get(path, params={name: value})
        assert refused.status_code == 422, (value, refused.text)
        assert ["query", name] in named(refused)


def test_a_trace_window_at_the_ends_of_time_is_answered_or_refused_never_a_500(api: httpx.Client) -> None:
    """``end=0001-01-01T00:00:44Z`` was a 500: the window's start, 60 minutes before, is before
    the year 1. It starts at the earliest time there is instead."""
    early = api.get("/v1/evaluation_trace_window", params={"end": "0001-01-01T00:00:44Z"})
    assert early.status_code == 200, early.text
    assert (early.json()["start"], early.json()["end"]) == (
        "0001-01-01T00:00:00+00:00",
        "0001-01-01T00:00:44+00:00",
    )
    whole = api.get(
        "/v1/evaluation_trace_window", params={"start": "0001-01-01T00:00:00Z", "end": "9999-12-31T23:59:59Z"}
    )
    assert whole.status_code == 200, whole.text
    assert len(whole.json()["buckets"]) <= 10_000
    for name, value in (("end", "0001-01-01T00:30:00+01:00"), ("start", "9999-12-31T23:30:00-01:00")):
        refused = api.get("/v1/evaluation_trace_window", params={name: value})
        assert refused.status_code == 422, refused.text
        assert named(refused) == [["query", name]]
        assert "years 1 to 9999" in refused.json()["detail"][0]["msg"]


def _query_parameters() -> list[tuple[str, str, str, dict[str, Any]]]:
    """(schema file, GET path, parameter name, parameter schema) of every query parameter."""
    found = []
    for schema in (
        "env-instance.yaml",
        "evaluation-reports.yaml",
        "traces-jobs.yaml",
        "sessions-ingest.yaml",
    ):
        paths = yaml.safe_load((SCHEMAS / schema).read_text()).get("paths", {})
        for path, operations in paths.items():
            get = operations.get("get")
            if not isinstance(get, dict):
                continue
            for parameter in [*operations.get("parameters", []), *get.get("parameters", [])]:
                if isinstance(parameter, dict) and parameter.get("in") == "query":
                    found.append((schema, path, parameter["name"], parameter.get("schema") or {}))
    return found


def test_every_query_parameter_answers_the_bad_values_of_its_type_with_a_4xx(api: httpx.Client) -> None:
    parameters = _query_parameters()
    assert len(parameters) >= 20, "the schemas' query parameters were not found"
    tried = 0
    for _schema, path, name, schema in parameters:
        url = path.replace("{run_id}", RUN_ID)
        url = url.replace("{", "").replace("}", "")  # any other path parameter: an id nobody has
        kind = schema.get("format") if schema.get("format") == "date-time" else schema.get("type", "string")
        for value in BAD_VALUES.get(kind, BAD_VALUES["string"]):
            answer = api.get(url, params={name: value})
            tried += 1
            assert answer.status_code < 500, (url, name, value[:40], answer.status_code, answer.text[:300])
            if "enum" in schema and value not in schema["enum"]:
                assert answer.status_code == 422, (url, name, value[:40], answer.text[:300])
    assert tried >= 80


def test_a_presigned_url_dated_at_the_ends_of_time_is_refused(local: LocalFleet) -> None:
    """A keyless presigned PUT dated in the first minutes of the year 1 raised ``OverflowError``
    (its validity window starts 15 minutes earlier), and an ``X-Amz-Expires`` of 5,000 digits a
    ``ValueError``: each dropped the connection instead of answering."""
    assert local.s3_url is not None
    signed = {
        "X-Amz-Algorithm": "AWS4-HMAC-SHA256",
        "X-Amz-Credential": "local/20260101/us-east-1/s3/aws4_request",
        "X-Amz-SignedHeaders": "host",
        "X-Amz-Signature": "0" * 64,
    }
    cases = [
        ({"X-Amz-Date": "00010101T000000Z", "X-Amz-Expires": "60"}, 403),
        ({"X-Amz-Date": "99991231T235959Z", "X-Amz-Expires": "604800"}, 403),
        ({"X-Amz-Date": "20260101T000000Z", "X-Amz-Expires": "9" * 5000}, 400),
    ]
    with httpx.Client(timeout=60) as keyless:
        for query, status in cases:
            answer = keyless.put(
                f"{local.s3_url}/fleet-sessions-images/anything.png", params={**signed, **query}, content=b"x"
            )
            assert answer.status_code == status, (query, answer.text)


def test_the_web_uis_ids_of_5000_digits_or_superscripts_are_not_a_500(
    local: LocalFleet, instance: models.InstanceResponse
) -> None:
    """The keyless web UI took any text ``str.isdigit`` accepts for an id: ``int()`` of 5,000 digits
    raises, and so does ``int("²")``, both 500s. A search for them finds nothing; a form posted to
    them is a 404."""
    base = f"/instances/{instance.instance_id}/orders"
    with httpx.Client(base_url=local.base_url, timeout=60) as keyless:
        for text in ("9" * 5000, "²", "12"):
            search = keyless.get(base, params={"q": text})
            assert search.status_code == 200, (text[:3], search.text[:300])
            posted = keyless.post(f"{base}/{text}/cancel", data={"reason": "x"})
            assert posted.status_code in (303, 404), (text[:3], posted.status_code)
