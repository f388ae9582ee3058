"""The server the contract suite runs against, and real resources to aim at.

One ``LocalFleet`` serves every surface for the whole session. Before the
suite runs, real resources are created through the API (an instance, a trace
job with one ingested session, an evaluation job, a stored
report, browser leases...) so that path parameters can
be fed ids that exist and positive cases reach 200s, not only 404s.

Set ``FLEET_CONTRACT_URL`` (and ``FLEET_CONTRACT_API_KEY``) to run the suite
against an already running server instead of starting one.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from fleet_local import LocalFleet
from fleet_sdk.reports import Outcome, Source, build_report

Ids = dict[str, list[str]]
"""Real values by path-parameter name."""


@dataclass
class ContractTarget:
    """Where the suite sends requests and which ids exist there.

    Attributes:
        base_url: Every bearer-authenticated surface (control plane, sessions, traces, browser).
        api_key: The bearer key.
        manager_url: ``urls.manager.api`` of the instance created for the suite (None if none could be).
        ids: Real path-parameter values by surface (schema file stem), then by parameter name.
        victims: Ids reserved for destructive operations, by operation label (``DELETE /v1/...``).
        setup_notes: What could not be created, to explain operations left at 404s.
    """

    base_url: str
    api_key: str
    manager_url: str | None = None
    ids: dict[str, Ids] = field(default_factory=dict)
    victims: dict[str, Ids] = field(default_factory=dict)
    setup_notes: list[str] = field(default_factory=list)

    @property
    def headers(self) -> dict[str, str]:
        """The auth header of the bearer surfaces."""
        return {"Authorization": f"Bearer {self.api_key}"}


@pytest.fixture(scope="session")
def contract_server() -> Iterator[tuple[str, str]]:
    """(base URL, API key) of the server under test: a fresh ``LocalFleet`` unless one is given."""
    url = os.environ.get("FLEET_CONTRACT_URL")
    if url:
        yield url.rstrip("/"), os.environ.get("FLEET_CONTRACT_API_KEY", "contract-key")
        return
    with LocalFleet(api_key="contract-key") as server:
        yield server.base_url, server.api_key


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _setup(client: httpx.Client, target: ContractTarget) -> None:
    """Create the resources whose ids the suite feeds into path parameters (best effort)."""
    notes = target.setup_notes
    control: Ids = {"name": ["seed", "current"]}
    sessions: Ids = {}
    browser: Ids = {}

    envs = _json(client.get("/v1/env/"))
    env_key = envs[0]["env_key"] if isinstance(envs, list) and envs else None
    if env_key is None:
        notes.append("no environment listed by GET /v1/env/")
    else:
        control["env_key"] = [env_key]

        def create_instance() -> dict[str, Any] | None:
            created = client.post("/v1/env/instances", json={"env_key": env_key})
            if created.status_code != 200:
                notes.append(f"POST /v1/env/instances -> {created.status_code}: {created.text[:200]}")
                return None
            instance: dict[str, Any] = created.json()
            return instance

        instance = create_instance()
        if instance is not None:
            control["instance_id"] = [instance["instance_id"]]
            target.manager_url = instance["urls"]["manager"]["api"].rstrip("/")
            # A backup from the start, so POST .../restore can succeed whichever operation runs first.
            backup = client.post(f"/v1/env/instances/{instance['instance_id']}/snapshot")
            if backup.status_code != 200:
                notes.append(f"POST .../snapshot -> {backup.status_code}: {backup.text[:200]}")
        victim = create_instance()
        if victim is not None:
            target.victims["DELETE /v1/env/instances/{instance_id}"] = {
                "instance_id": [victim["instance_id"]]
            }

    tasks = _json(client.get("/v1/tasks"))
    if isinstance(tasks, dict) and tasks.get("tasks"):
        control["task_key"] = [tasks["tasks"][0]["task_key"]]
    else:
        notes.append("no task listed by GET /v1/tasks")

    # One evaluation job of our own, so GET /v1/jobs/{job_id} is fed a real id.
    job_body: dict[str, Any] = {"models": ["local/scripted"], "pass_k": 1, "name": "contract-suite"}
    if "task_key" in control:
        job_body["task_keys"] = control["task_key"]
    elif env_key is not None:
        job_body["env_key"] = env_key
    job = client.post("/v1/jobs", json=job_body)
    if job.status_code == 200:
        control["job_id"] = [job.json()["job_id"]]
    else:
        notes.append(f"POST /v1/jobs -> {job.status_code}: {job.text[:200]}")

    # One stored report, so GET /v1/evaluation_reports/{run_id} is fed a real run_id.
    reports: Ids = {}
    envelope = build_report(
        run_id=f"contract-{uuid.uuid4().hex[:12]}",
        source=Source(kind="client"),
        suite_name="contract-suite",
        task_keys=["contract-task"],
        models=["local/scripted"],
        k=1,
        outcomes=[
            Outcome(task_key="contract-task", model="local/scripted", sample=0, status="passed", score=1.0)
        ],
    )
    stored = client.post("/v1/evaluation_reports", json=envelope.to_dict())
    if stored.status_code in (200, 201):
        reports["run_id"] = [stored.json()["run_id"]]
    else:
        notes.append(f"POST /v1/evaluation_reports -> {stored.status_code}: {stored.text[:200]}")

    trace_job = client.post("/v1/traces/jobs", json={"name": "contract-suite"})
    if trace_job.status_code == 200:
        job_id = trace_job.json()["job_id"]
        ingest = client.post(
            "/v1/sessions/ingest",
            json={
                "job_id": job_id,
                "task_key": control.get("task_key", ["contract-task"])[0],
                "model": "contract-model",
                "messages": [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}],
                "metadata": {"score": 1.0},
                "verifier_execution_id": None,
            },
        )
        if ingest.status_code == 200:
            sessions = {"job_id": [job_id], "session_id": [ingest.json()["session_id"]]}
        else:
            notes.append(f"POST /v1/sessions/ingest -> {ingest.status_code}: {ingest.text[:200]}")
    else:
        notes.append(f"POST /v1/traces/jobs -> {trace_job.status_code}")

    leases = [client.post("/v1/browser", json={"ttl_seconds": 3600}) for _ in range(2)]
    if all(lease.status_code == 200 for lease in leases):
        browser = {"lease_id": [leases[0].json()["lease_id"]]}
        target.victims["DELETE /v1/browser/{lease_id}"] = {"lease_id": [leases[1].json()["lease_id"]]}
    else:
        notes.append("could not create browser leases")

    target.ids = {
        "env-instance": control,
        "sessions-ingest": sessions,
        "browser-lease": browser,
        "evaluation-reports": reports,
    }


@pytest.fixture(scope="session")
def contract_target(contract_server: tuple[str, str]) -> ContractTarget:
    """The server under test with real resources created on it."""
    base_url, api_key = contract_server
    target = ContractTarget(base_url=base_url, api_key=api_key)
    with httpx.Client(base_url=base_url, headers=target.headers, timeout=60) as client:
        _setup(client, target)
    return target
