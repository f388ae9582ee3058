"""The public Fleet SDK's own examples (installed with ``fleet-python`` as the ``examples`` package)
run against ``LocalFleet`` as a user would run them: only ``FLEET_BASE_URL`` / ``FLEET_API_KEY``
and the environment keys in their source are changed (``hubspot`` / ``fira`` become a bundled
environment), with the command-line arguments their usage text asks for.

Each runs as a subprocess of its own, in a scratch directory, and must exit 0 with no traceback
and print what shows it worked. ``CANNOT_RUN`` lists every other installed example with the
reason it cannot run on one machine; ``test_every_example_is_run_or_explained`` fails when an
upgrade of the public SDK brings one that is neither (see docs/wire-fidelity.md).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from fleet_local import LocalFleet

_SPEC = importlib.util.find_spec("examples")
assert _SPEC is not None and _SPEC.submodule_search_locations, "fleet-python's examples are not installed"
EXAMPLES = Path(next(iter(_SPEC.submodule_search_locations)))

"""How a verifier run fails when the public SDK calls a bundled verifier's first function, a helper."""

RUN_SECONDS = 300.0
"""Deadline of one example's run (they take a second or two each)."""

ENV_KEY = "orderdesk"
TASK_KEY = "orderdesk-count-pending-orders"
# The bundled environment standing in for each production one the examples name.
THEIR_ENVS = {"fira": ENV_KEY, "hubspot": ENV_KEY}

CANNOT_RUN: dict[str, str] = {
    "diff_example.py": (
        "written against HubSpot's data (the `entries` table and its columns); no bundled environment has it"
    ),
    "dsl_example.py": "written against HubSpot's data (the `entries` table and its columns)",
    "query_builder_example.py": "written against HubSpot's data (the `entries` table and its columns)",
    "example_task.py": "written against Jira's data (the `issues` table, project SCRUM)",
    "example_verifier.py": "written against Jira's data (issues DEBT-720 and DEBT-722)",
    "example.py": (
        "prints env.resources(), which raises in fleet-python 0.2.133 itself: Resource.__repr__ reads "
        "mode.value and SQLiteResource.mode is a str (its calls are run in contracts/test_public_sdk_wire.py)"
    ),
    "example_sync.py": "prints env.resources() (the same fleet-python 0.2.133 bug as example.py)",
    "example_action_log.py": "prints env.resources() (the same fleet-python 0.2.133 bug as example.py)",
    "example_client.py": "assigns `fleet` inside main(), so `fleet.AsyncFleet()` raises UnboundLocalError",
    "exampleResume.py": (
        "interactive (input()), and uses env.session_id / browser.cdp_page_url(), which 0.2.133 lacks"
    ),
    "test_cdp_logging.py": (
        "interactive (input()), and uses env.session_id / browser.get_connection_info(), which 0.2.133 lacks"
    ),
    "export_tasks_filtered.py": "reads Fleet's own Supabase database (the supabase package, its credentials)",
    "gemini_example.py": "drives Gemini (google-genai and a Google API key over the network)",
    "openai_example.py": "drives OpenAI's computer-use model (an OpenAI key over the network)",
    "openai_simple_example.py": "drives OpenAI's computer-use model (an OpenAI key over the network)",
    "example_mcp_openai.py": "OpenAI's servers call the MCP URL (an OpenAI key, and a URL they can reach)",
    "example_mcp_anthropic.py": "drives Claude (the anthropic package and a key over the network)",
    "nova_act_example.py": "drives Amazon Nova Act (the nova_act package and its service)",
    "json_tasks_example.py": "drives Amazon Nova Act (the nova_act package and its service)",
}

RUN = {
    "example_account.py",
    "example_tasks.py",
    "quickstart.py",
    "export_tasks.py",
    "fetch_tasks.py",
    "iterate_verifiers.py",
    "import_tasks.py",
    "task_bundle_editing/download_task.py",
    "task_bundle_editing/validate_task.py",
    "task_bundle_editing/upload_task.py",
    "task_bundle_editing/launch_job.py",
    "task_bundle_editing/get_job.py",
}


@pytest.fixture(scope="module")
def server() -> Iterator[LocalFleet]:
    # Of its own: quickstart.py connects to any running instance and deletes it.
    with LocalFleet(api_key=f"sk-examples-{uuid.uuid4().hex[:8]}") as local:
        yield local


@pytest.fixture()
def workdir(tmp_path: Path) -> Path:
    """A copy of the examples (they import each other by path) to run them from."""
    shutil.copytree(EXAMPLES, tmp_path / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def run(server: LocalFleet, workdir: Path, example: str, *args: str, check: bool = True) -> str:
    """Run one example with its environment keys changed; returns its output (stdout and stderr).

    With ``check``, fails the test when it exits with an error or prints a traceback.
    """
    script = workdir / "examples" / example
    source = script.read_text()
    for theirs, ours in THEIR_ENVS.items():  # "fira", "fira:v1.3.1" -> "orderdesk"
        source = re.sub(rf'"{theirs}(:v?[0-9.]+)?"', f'"{ours}"', source)
    script.write_text(source)
    env = {**os.environ, "FLEET_BASE_URL": server.base_url, "FLEET_API_KEY": server.api_key or ""}
    finished = subprocess.run(
        [sys.executable, str(script), *args],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
        check=False,
    )
    output = finished.stdout + finished.stderr
    failed = finished.returncode != 0 or "Traceback" in output
    assert not (check and failed), f"{example} {args}:\n{output[-4000:]}"
    return output


def expect(output: str, *lines: str) -> None:
    missing = [line for line in lines if line not in output]
    assert not missing, f"missing {missing} in:\n{output[-4000:]}"


def test_every_example_is_run_or_explained() -> None:
    installed = {
        str(path.relative_to(EXAMPLES)) for path in EXAMPLES.rglob("*.py") if "__pycache__" not in path.parts
    }
    assert installed == RUN | set(CANNOT_RUN), "classify each example: run it here, or say why it cannot run"
    assert not RUN & set(CANNOT_RUN)


def test_account_tasks_and_quickstart(server: LocalFleet, workdir: Path) -> None:
    account = run(server, workdir, "example_account.py")
    expect(account, "Team ID: local", "Team Name: Local team", "Instance Limit: 1000")
    # It asks for the tasks of a team of Fleet's own: another team's, so none here.
    expect(run(server, workdir, "example_tasks.py"), "team_id='local'", "Loaded 0 tasks")
    quickstart = run(server, workdir, "quickstart.py")
    expect(
        quickstart,
        f"  - {ENV_KEY}: OrderDesk",
        "✅ Environment created with instance ID: inst_",
        "✅ Environment closed",
        "🎉 Quickstart complete!",
    )
    assert "❌" not in quickstart


def test_task_export_fetch_edit_and_import_check(server: LocalFleet, workdir: Path) -> None:
    with httpx.Client(
        base_url=server.base_url, headers={"Authorization": f"Bearer {server.api_key}"}
    ) as http:
        ours = http.get("/v1/tasks", params={"env_key": ENV_KEY}).json()["tasks"]
    count = len(ours)
    exported = run(server, workdir, "export_tasks.py", "--env-key", ENV_KEY, "--output", "tasks.json")
    expect(exported, f"Found {count} task(s)", "✓ All tasks have verifier_func")
    tasks = json.loads((workdir / "tasks.json").read_text())
    by_key = {t["key"]: t for t in ours}
    assert {t["key"] for t in tasks} == set(by_key)
    assert all(t["verifier_sha"] == by_key[t["key"]]["verifier"]["sha256"] for t in tasks)

    fetched = run(server, workdir, "fetch_tasks.py", "tasks.json", "--output", "fetched.json")
    expect(fetched, f"Successfully fetched: {count}", f"Updated in file: {count}", "Failed to fetch: 0")
    refetched = {t["key"]: t for t in json.loads((workdir / "fetched.json").read_text())}
    assert {key: t["verifier_sha"] for key, t in refetched.items()} == {
        t["key"]: t["verifier_sha"] for t in tasks
    }

    extracted = run(server, workdir, "iterate_verifiers.py", "extract", "tasks.json", "verifiers.py")
    expect(extracted, f"✓ Extracted {count} verifier(s)")
    expect(
        run(server, workdir, "iterate_verifiers.py", "validate", "verifiers.py"),
        f"✓ All {count} verifier(s) are valid!",
    )
    expect(
        run(server, workdir, "iterate_verifiers.py", "apply", "tasks.json", "verifiers.py"),
        "in 'tasks.json'",
    )

    # Each task's verifier on a fresh instance must run and score 0.0 (nothing was done yet).
    checked = run(server, workdir, "import_tasks.py", "fetched.json", "--sanity-check-only", check=False)
    expect(checked, f"✓ Loaded {count} tasks", "✓ Sanity check complete!")


def test_task_bundle_round_trip(server: LocalFleet, workdir: Path) -> None:
    tools = "task_bundle_editing"
    downloaded = run(
        server, workdir, f"{tools}/download_task.py", "--task-key", TASK_KEY, "--output-dir", "bundle"
    )
    expect(
        downloaded, "Verifier:    yes", "No seed tar found via API", "No file-set found.", "Download complete"
    )
    bundle = json.loads((workdir / "bundle" / "task.json").read_text())
    assert bundle["key"] == TASK_KEY and bundle["verifier"]["code"]
    expect(run(server, workdir, f"{tools}/validate_task.py", "bundle"), "RESULT: PASS")

    # With a data file: it goes up as a seed archive and comes back with the task.
    (workdir / "bundle" / "files").mkdir()
    (workdir / "bundle" / "files" / "orders.csv").write_text("id,status\n1012,pending\n")
    copy = f"copied-{uuid.uuid4().hex[:8]}"
    uploaded = run(
        server,
        workdir,
        f"{tools}/upload_task.py",
        "--dir",
        "bundle",
        "--key",
        copy,
        "--env-version",
        "v1.0.0",
        "--models",
        "local/scripted",
    )
    expect(
        uploaded, "Uploaded successfully", f"Created task: {copy}", "data_version: v1", "Job launched: job_"
    )
    again = run(server, workdir, f"{tools}/download_task.py", "--task-key", copy, "--output-dir", "again")
    expect(again, f"data_id:      {copy}", "version:      v1", "Extracted 1 files")
    assert (workdir / "again" / "files" / "orders.csv").read_text() == "id,status\n1012,pending\n"
    assert json.loads((workdir / "again" / "task.json").read_text())["verifier"] == bundle["verifier"]

    launched = run(
        server, workdir, f"{tools}/launch_job.py", "--task-key", copy, "--models", "local/scripted"
    )
    match = re.search(r"Job launched: (job_\w+)", launched)
    assert match is not None, launched
    job_id = match.group(1)
    deadline = time.monotonic() + RUN_SECONDS
    while True:  # the scripted policy plays the task; get_job then shows the finished job
        report = run(server, workdir, f"{tools}/get_job.py", "--job-id", job_id)
        if "Status:     completed" in report or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    expect(report, f"ID:         {job_id}", "Status:     completed", "(1 total across 1 task(s))")
