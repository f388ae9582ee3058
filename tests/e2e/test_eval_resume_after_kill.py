"""``fleet-sdk eval`` killed half way (SIGKILL, a real subprocess) resumes without repeating an episode.

Then ``fleet-sdk report`` renders the run in all three formats, byte for byte the same twice, and
every number of the report agrees with the sessions the embedded server stored.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from _cli import run_cli
from _procs import processes

from fleet_local import LocalFleet
from fleet_sdk.evaluation import RunDir, session_score
from fleet_sdk.reports import ReportEnvelope
from fleet_sdk.tasks import Task

K = 3
MODELS = ("local/scripted", "local/random")


def _children(pid: int) -> list[int]:
    return [p.pid for p in processes() if p.ppid == pid]


def _finished(run_dir: Path) -> int:
    path = run_dir / "run.sqlite3"
    if not path.exists():
        return 0
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1)) as db:
            return int(db.execute("SELECT count(*) FROM episodes").fetchone()[0])
    except sqlite3.OperationalError:  # the table is not created yet
        return 0


def _wait_gone(pid: int, deadline: float) -> None:
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.1)


def test_eval_killed_half_way_resumes_and_reports(tmp_path: Path, bundled_tasks: list[Task]) -> None:
    by_env: dict[str, list[str]] = {}
    for task in bundled_tasks:
        by_env.setdefault(task.env_key, []).append(task.task_key)
    assert set(by_env) == {"orderdesk", "calendar"}
    keys = [key for env in sorted(by_env) for key in by_env[env][:2]]
    total = len(keys) * len(MODELS) * K
    run_dir = tmp_path / "run"
    argv = [sys.executable, "-m", "fleet_sdk.cli", "eval", "-k", str(K), "--concurrency", "2"]
    argv += ["--out-dir", str(run_dir), "--run-id", "kill-test"]
    for key in keys:
        argv += ["--task-key", key]
    for model in MODELS:
        argv += ["--model", model]

    # stderr to a file: a pipe nobody reads would block the run once its buffer fills.
    first_stderr = (tmp_path / "first.stderr").open("wb")
    first = subprocess.Popen(
        argv, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=first_stderr, start_new_session=True
    )
    deadline = time.monotonic() + 240
    servers: list[int] = []
    try:
        while _finished(run_dir) < total // 2 and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert first.poll() is None, "the run ended before it could be killed half way"
        servers += _children(first.pid)
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(timeout=30)
        # the embedded server runs in its own session: stop the one this run started
        for pid in servers:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            _wait_gone(pid, time.monotonic() + 30)
        first_stderr.close()
    assert first.returncode == -signal.SIGKILL, (tmp_path / "first.stderr").read_text(errors="replace")

    with RunDir(run_dir) as store:
        before = {(o.task_key, o.model, o.sample): o for o in store.outcomes()}
    assert total // 2 <= len(before) < total

    second = subprocess.run(
        [*argv[:4], "--out-dir", str(run_dir), "--resume", "--concurrency", "2"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert second.returncode == 0, second.stdout + second.stderr
    # the resumed bar starts where the killed run stopped
    assert f"{len(before)}/{total} episodes" in second.stdout
    assert f"{total}/{total} episodes" in second.stdout

    with RunDir(run_dir) as store:
        after = {(o.task_key, o.model, o.sample): o for o in store.outcomes()}
        manifest = store.require_manifest()
    assert len(after) == total
    assert all(after[slot] == outcome for slot, outcome in before.items())  # nothing replayed

    # fleet-sdk report: all three formats, the same bytes twice
    rendered: dict[str, str] = {}
    for fmt in ("json", "md", "html"):
        outputs = [
            run_cli("report", str(run_dir), "--format", fmt, timeout=120, check=True).stdout for _ in range(2)
        ]
        assert outputs[0] == outputs[1]
        rendered[fmt] = outputs[0]
    envelope = ReportEnvelope.model_validate(json.loads(rendered["json"]))
    assert envelope.run_id == "kill-test" and envelope.report.complete
    assert "local/scripted" in rendered["md"] and "local/scripted" in rendered["html"]

    # the numbers agree with the sessions stored on the server
    with LocalFleet(run_dir / "server-data") as local, local.fleet() as fleet:
        assert manifest.trace_job_id is not None
        listing = fleet.api.sessions.get_job_sessions(manifest.trace_job_id)
    stored = {s.session_id: s for t in listing.tasks for s in t.sessions}
    passed: Counter[str] = Counter()
    for outcome in envelope.report.results:
        assert outcome.session_id in stored, outcome
        session = stored[outcome.session_id]
        verifier = session.verifier_execution.model_dump() if session.verifier_execution else None
        assert session_score(verifier) == outcome.score
        assert session.model == outcome.model.rsplit("/", 1)[-1]
        passed[outcome.model] += outcome.status == "passed"
    for summary in envelope.report.models:
        assert summary.sessions == len(keys) * K
        assert summary.passed == passed[summary.model]
    scripted = next(s for s in envelope.report.models if s.model == "local/scripted")
    assert scripted.passed == len(keys) * K  # the reference solutions pass every task
    # an episode in flight at the kill may have uploaded a session the run never recorded
    assert len(stored) - total <= 2
