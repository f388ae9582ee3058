"""``fleet-sdk eval --jobs`` keeps its work as a run played here does: Ctrl-C and SIGTERM keep the
finished episodes, ``--resume`` and ``--retry-errored`` continue the run, and nothing stored is
played again. SIGTERM stops a run played here the same way.

Every run is a real subprocess with its embedded server, the model a fake chat-completions
endpoint on loopback whose gate holds episodes in flight, so the signal lands mid-run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from _cli import CLI, run_cli
from _fake_model import ReferenceModel, reference_model, serve_model
from _waits import wait_until

from fleet_local import LocalFleet
from fleet_sdk.evaluation import RunDir
from fleet_sdk.tasks import Task

ENV = {
    **os.environ,
    "FLEET_EVAL_MODEL_API_KEY": "sk-jobs-resume",
    "FLEET_LOCAL_MODEL_API_KEY": "sk-jobs-resume",
}


def _tool_tasks(bundled: list[Task], n: int) -> list[Task]:
    return [t for t in bundled if t.env_key == "orderdesk" and t.task_modality == "tool_use"][:n]


def _clean(text: str) -> str:
    assert "Traceback" not in text and "ValidationError" not in text, text
    return text


def _stored(run_dir: Path) -> int:
    if not RunDir.exists(run_dir):
        return 0
    with RunDir(run_dir) as store:
        return len(store.finished())


def _job_sessions(run_dir: Path) -> list[dict[str, object]]:
    """Every session of every job the run created, as the run's embedded server stored them."""
    with RunDir(run_dir) as store:
        jobs = [entry["job_id"] for entry in store.require_manifest().extra["jobs"]]
    with LocalFleet(run_dir / "server-data") as local, local.fleet() as fleet:
        return [
            s.model_dump()
            for job in jobs
            for t in fleet.api.sessions.get_job_sessions(job).tasks
            for s in t.sessions
        ]


def _interrupt(
    argv: list[str], run_dir: Path, handler: type[ReferenceModel], tmp_path: Path, signum: int, stored: int
) -> tuple[int, str]:
    """Run ``argv`` with the gate closed (the ungated task's episodes end, the others wait) until
    ``stored`` episodes are stored, then send ``signum``."""
    out, err = tmp_path / "eval.stdout", tmp_path / "eval.stderr"
    handler.gate.clear()
    with out.open("wb") as stdout, err.open("wb") as stderr:
        run = subprocess.Popen(argv, cwd=tmp_path, env=ENV, stdout=stdout, stderr=stderr)
        try:
            wait_until(lambda: _stored(run_dir) >= stored or run.poll() is not None, "episodes stored")
            assert run.poll() is None, "the run ended before the signal"
            run.send_signal(signum)
            code = run.wait(timeout=120)
        finally:
            handler.gate.set()
            if run.poll() is None:
                run.kill()
                run.wait(timeout=30)
    return code, _clean(out.read_text() + err.read_text())


@pytest.mark.parametrize(
    ("signum", "code", "said"),
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated (SIGTERM)")],
)
def test_a_jobs_run_stopped_mid_run_keeps_what_finished_and_resumes_without_replaying_it(
    tmp_path: Path, bundled_tasks: list[Task], signum: int, code: int, said: str
) -> None:
    """Regression: Ctrl-C at 13/18 printed `interrupted before the run started; nothing was stored.`
    (a jobs run wrote its run directory only when the job ended); SIGTERM ended it silently with
    exit 143; and `--resume` of a jobs run crashed with `ValidationError: Task: prompt Field required`."""
    tasks = _tool_tasks(bundled_tasks, 3)
    handler = reference_model(tasks, ungated=[tasks[0].task_key])
    run_dir = tmp_path / "run"
    total = len(tasks) * 2
    with serve_model(handler) as url:
        argv = [*CLI, "eval", "--jobs", "--model", "fake/gpt", "--model-base-url", url, "-k", "2"]
        argv += ["--out-dir", str(run_dir)] + [arg for t in tasks for arg in ("--task-key", t.task_key)]
        exit_code, text = _interrupt(argv, run_dir, handler, tmp_path, signum, stored=2)
        assert exit_code == code, text
        stored = _stored(run_dir)
        assert stored == 2, text  # the ungated task's two episodes; the others were in flight
        assert f"fleet-sdk eval: {said}; {stored} of {total} episodes are stored in {run_dir}." in text
        assert f"Resume with: fleet-sdk eval --out-dir {run_dir} --resume" in text
        with RunDir(run_dir) as store:
            before = {(o.task_key, o.model, o.sample): o for o in store.outcomes()}

        resumed = run_cli("eval", "--out-dir", str(run_dir), "--resume", cwd=tmp_path, env=ENV)
        assert resumed.returncode == 0, _clean(resumed.stdout + resumed.stderr)
        assert f"{stored}/{total} episodes" in resumed.stdout
    with RunDir(run_dir) as store:
        after = {(o.task_key, o.model, o.sample): o for o in store.outcomes()}
    assert len(after) == total and all(o.status == "passed" for o in after.values())
    assert all(after[slot] == outcome for slot, outcome in before.items())  # nothing stored was replayed
    # Every slot was played to its end exactly once; the sessions the stop cut short are marked so.
    sessions = _job_sessions(run_dir)
    ended = [s for s in sessions if s["status"] == "completed"]
    assert len(ended) == total, sessions
    assert all(s["interrupted"] is True for s in sessions if s["status"] != "completed")


def test_retry_errored_of_a_jobs_run_plays_only_the_errored_episodes(
    tmp_path: Path, bundled_tasks: list[Task]
) -> None:
    """Regression: the command eval prints on exit 3, `fleet-sdk eval --out-dir D --retry-errored`,
    crashed on a jobs run with a pydantic ValidationError traceback."""
    tasks = _tool_tasks(bundled_tasks, 2)
    handler = reference_model(tasks, failing=[tasks[1].task_key])
    run_dir = tmp_path / "run"
    with serve_model(handler) as url:
        flags = ["--jobs", "--model", "fake/gpt", "--model-base-url", url, "--out-dir", str(run_dir)]
        first = run_cli("eval", *flags, *[a for t in tasks for a in ("--task-key", t.task_key)], env=ENV)
        assert first.returncode == 3, _clean(first.stdout + first.stderr)
        assert f"fleet-sdk eval --out-dir {run_dir} --retry-errored" in first.stderr
        with RunDir(run_dir) as store:
            errored = next(o for o in store.outcomes() if o.status == "errored")
        # the errored episode keeps its transcript (the session the server stored) and its cause
        assert errored.transcript is not None and (run_dir / errored.transcript).is_file()
        assert errored.error and "500" in errored.error
        fix_items = run_cli("report", str(run_dir), "--part", "fix_items", check=True).stdout
        (line,) = [line for line in fix_items.splitlines() if errored.task_key in line]
        assert "errored: PolicyError: model endpoint" in line  # the cause, not the verifier's feedback

        handler.failing.clear()
        handler.requests.clear()
        retried = run_cli("eval", "--out-dir", str(run_dir), "--retry-errored", cwd=tmp_path, env=ENV)
        assert retried.returncode == 0, _clean(retried.stdout + retried.stderr)
    assert "fake/gpt: 2/2 graded passed (100.0%), 0 errored" in retried.stdout
    played = {str(r["body"]["messages"][1]["content"]) for r in handler.requests if r["body"].get("tools")}
    assert played == {tasks[1].prompt}  # only the errored episode was played again
    envelope = json.loads(run_cli("report", str(run_dir), "--format", "json", check=True).stdout)
    assert envelope["report"]["retried"] == 1


def test_sigterm_stops_a_run_played_here_like_ctrl_c(tmp_path: Path, bundled_tasks: list[Task]) -> None:
    """Regression: SIGTERM ended `fleet-sdk eval` at once, silently, exit 143, its server left to stop."""
    tasks = _tool_tasks(bundled_tasks, 3)
    handler = reference_model(tasks, ungated=[tasks[0].task_key])
    run_dir = tmp_path / "run"
    total = len(tasks) * 2
    with serve_model(handler) as url:
        argv = [*CLI, "eval", "--model", "fake-gpt", "--model-base-url", url, "-k", "2", "--concurrency", "2"]
        argv += ["--out-dir", str(run_dir)] + [arg for t in tasks for arg in ("--task-key", t.task_key)]
        exit_code, text = _interrupt(argv, run_dir, handler, tmp_path, signal.SIGTERM, stored=2)
        assert exit_code == 143, text
        stored = _stored(run_dir)
        assert f"fleet-sdk eval: terminated (SIGTERM); {stored} of {total} episodes are stored" in text
        resumed = run_cli("eval", "--out-dir", str(run_dir), "--resume", cwd=tmp_path, env=ENV)
        assert resumed.returncode == 0, _clean(resumed.stdout + resumed.stderr)
    assert _stored(run_dir) == total
