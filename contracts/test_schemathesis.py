"""Contract suite: every operation of the schemas against one running local server.

schemathesis generates requests from ``schemas/*.yaml`` (examples, coverage
and fuzzing phases, positive and negative data) and checks every response:
no 5xx, status codes and bodies as the schema documents them, valid data
accepted, invalid data refused with a 4xx, and a 422 that names the bad field.

Runs are deterministic (Hypothesis derandomized, fixed seed) and bounded:
``FLEET_CONTRACT_EXAMPLES`` (default 5) fuzzing examples per operation;
``nox -s contracts`` raises it.

The instance-manager operations (whose server is ``https://{instance_host}/api/v1/env``)
are sent to the ``urls.manager.api`` of a real instance created for the suite.
Path parameters are fed real ids (see ``conftest.py``) on every other positive
case, so both 200s and 404s are checked against the schema.
"""

from __future__ import annotations

import itertools
import os
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import schemathesis
from schemathesis.config import SchemathesisConfig
from schemathesis.core.parameters import ParameterLocation

if TYPE_CHECKING:
    from conftest import ContractTarget

SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"
MAX_EXAMPLES = int(os.environ.get("FLEET_CONTRACT_EXAMPLES", "5"))
SEED = int(os.environ.get("FLEET_CONTRACT_SEED", "20240917"))
MANAGER_TAG = "instance-manager"
REQUEST_TIMEOUT = 30.0
# The key conftest starts the server with (or the one of FLEET_CONTRACT_URL's server). schemathesis
# applies it itself, so its negative cases can drop it on purpose and expect a 401.
API_KEY = os.environ.get("FLEET_CONTRACT_API_KEY", "contract-key")


def _config() -> SchemathesisConfig:
    return SchemathesisConfig.from_dict(
        {
            "seed": SEED,
            "suppress-health-check": ["too_slow", "filter_too_much", "data_too_large"],
            "generation": {
                "mode": "all",
                "max-examples": MAX_EXAMPLES,
                "deterministic": True,
                "database": "none",
            },
            "phases": {"stateful": {"enabled": False}},
            "checks": {
                # Schema-valid requests may still be refused for documented reasons the schema cannot
                # express: 400 (a bundle whose sha256 does not match) and 410 (deleting a lease that
                # already ended). An undocumented 400/410 still fails `status_code_conformance`.
                "positive_data_acceptance": {
                    "expected-statuses": [
                        "2xx",
                        "3xx",
                        "400",
                        "401",
                        "403",
                        "404",
                        "409",
                        "410",
                        "429",
                        "5xx",
                    ]
                },
            },
            # A stored report that still has pending results, and an imported one whose summaries
            # its own results contradict, are answered 422 although the request is schema-valid
            # (schemas/evaluation-reports.yaml documents both).
            "operations": [
                {
                    "include-operation-id": "get_evaluation_report",
                    "checks": {
                        "positive_data_acceptance": {
                            "expected-statuses": ["2xx", "401", "404", "422", "429", "5xx"]
                        }
                    },
                },
                {
                    "include-operation-id": "import_evaluation_report",
                    "checks": {
                        "positive_data_acceptance": {
                            "expected-statuses": ["2xx", "401", "409", "422", "429", "5xx"]
                        }
                    },
                },
            ],
            "request-timeout": REQUEST_TIMEOUT,
            "auth": {"openapi": {"bearerAuth": {"bearer": API_KEY}}},
        }
    )


def _load(stem: str) -> Any:
    return schemathesis.openapi.from_path(SCHEMAS / f"{stem}.yaml", config=_config())


env_instance = _load("env-instance")
sessions_ingest = _load("sessions-ingest")
traces_jobs = _load("traces-jobs")
browser_lease = _load("browser-lease")
evaluation_reports = _load("evaluation-reports")

# Per-operation call counters: real ids go into every other positive case.
_calls: defaultdict[str, itertools.count[int]] = defaultdict(itertools.count)


def validation_names_the_field(ctx: Any, response: Any, case: Any) -> bool | None:
    """A 422 carries ``detail: [ValidationIssue]``; for a bad JSON-object body, one names a field."""
    if response.status_code != 422:
        return None
    body = response.json()
    detail = body.get("detail") if isinstance(body, dict) else None
    assert isinstance(detail, list) and detail, f"422 without a list of validation issues: {body!r}"
    locs = [issue.get("loc") for issue in detail if isinstance(issue, dict)]
    assert all(isinstance(loc, list) and loc for loc in locs), f"422 issue without a location: {body!r}"
    meta = case.meta
    if meta is not None and meta.is_negative_at(ParameterLocation.BODY) and isinstance(case.body, dict):
        named = [loc for loc in locs if len(loc) >= 2 and loc[0] == "body"]
        assert named or any(loc[0] != "body" for loc in locs), (
            f"422 for an invalid body does not name the bad field: {body!r}"
        )
    return None


def _feed_real_ids(case: Any, surface: str, target: ContractTarget) -> None:
    """Replace generated path parameters by ids that exist, on every other positive case."""
    if not case.path_parameters:
        return
    meta = case.meta
    if meta is not None and meta.is_negative_at(ParameterLocation.PATH):
        return
    label = f"{case.operation.method.upper()} {case.operation.path}"
    if next(_calls[label]) % 2:
        return
    pool = target.victims.get(label) or target.ids.get(surface, {})
    for name in list(case.path_parameters):
        values = pool.get(name)
        if values:
            case.path_parameters[name] = values[0]


# Status codes seen per operation, for the final check that real ids reached 2xx answers.
_seen: defaultdict[str, set[int]] = defaultdict(set)


def _run(case: Any, surface: str, target: ContractTarget) -> None:
    _feed_real_ids(case, surface, target)
    base_url = target.base_url
    if MANAGER_TAG in (case.operation.tags or []):
        if target.manager_url is None:
            # Never a skip: a suite that could not create an instance has not tested the manager.
            pytest.fail(f"no instance to aim manager operations at: {target.setup_notes}")
        base_url = target.manager_url
    response = case.call(base_url=base_url, timeout=REQUEST_TIMEOUT)
    if case.method.upper() == case.operation.method.upper():  # not an unsupported-method probe
        _seen[f"{surface} {case.operation.method.upper()} {case.operation.path}"].add(response.status_code)
    case.validate_response(
        response,
        additional_checks=[validation_names_the_field],
        transport_kwargs={"base_url": base_url, "timeout": REQUEST_TIMEOUT},
    )


@env_instance.parametrize()
def test_env_instance(case: Any, contract_target: ContractTarget) -> None:
    _run(case, "env-instance", contract_target)


@sessions_ingest.parametrize()
def test_sessions_ingest(case: Any, contract_target: ContractTarget) -> None:
    _run(case, "sessions-ingest", contract_target)


@traces_jobs.parametrize()
def test_traces_jobs(case: Any, contract_target: ContractTarget) -> None:
    _run(case, "traces-jobs", contract_target)


@browser_lease.parametrize()
def test_browser_lease(case: Any, contract_target: ContractTarget) -> None:
    _run(case, "browser-lease", contract_target)


@evaluation_reports.parametrize()
def test_evaluation_reports(case: Any, contract_target: ContractTarget) -> None:
    _run(case, "evaluation-reports", contract_target)


@pytest.fixture(scope="module", autouse=True)
def real_ids_reach_success(contract_target: ContractTarget) -> Iterator[None]:
    """Once the module's cases have run, in whatever order: operations whose path parameters were
    fed real ids got at least one 2xx. A failure shows as an error in the last case's teardown.

    Regression: this was a test that had to run last, and failed when the order was shuffled.
    """
    yield

    def fed_real_ids(label: str) -> bool:
        surface, method, path = label.split(" ", 2)
        names = re.findall(r"{(\w+)}", path)
        pool = contract_target.victims.get(f"{method} {path}") or contract_target.ids.get(surface, {})
        return bool(names) and all(pool.get(name) for name in names)

    fed = {label for label in _seen if fed_real_ids(label)}
    missing = sorted(label for label in fed if not any(200 <= status < 300 for status in _seen[label]))
    assert not missing, (
        f"no 2xx for operations fed real ids: {missing}; seen: { {m: _seen[m] for m in missing} }"
    )
