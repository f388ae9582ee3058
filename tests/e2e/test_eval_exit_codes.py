"""The exit codes of ``fleet-sdk eval`` a sweep script relies on, ``--retry-errored``, and Ctrl-C.

0: every episode graded (or no more errored than ``--max-errored``); 1: a server or platform
error; 2: usage (``test_eval_fails_fast.py``); 3: more episodes errored than tolerated; 130:
interrupted, after a clean stop that prints the resume command. Every run is a real subprocess
against a fake chat-completions endpoint on loopback, and none may print a traceback.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from _cli import CLI, run_cli
from _fake_model import reference_model, serve_model
from _procs import processes

from fleet_local import LocalFleet
from fleet_sdk.evaluation import RunDir
from fleet_sdk.tasks import Task

ENV = {**os.environ, "FLEET_EVAL_MODEL_API_KEY": "sk-exit-codes"}


def _tool_tasks(bundled: list[Task], n: int) -> list[Task]:
    return [t for t in bundled if t.env_key == "orderdesk" and t.task_modality == "tool_use"][:n]


def _clean(result: subprocess.CompletedProcess[str] | tuple[str, str]) -> str:
    text = (
        result.stdout + result.stderr if isinstance(result, subprocess.CompletedProcess) else "".join(result)
    )
    assert "Traceback" not in text and "ValidationError" not in text, text
    return text


def test_errored_episodes_exit_3_unless_tolerated_and_retry_errored_replays_only_them(
    tmp_path: Path, bundled_tasks: list[Task]
) -> None:
    """Regression: a run whose every episode errored printed `0/0 graded passed (n/a)` and exited 0."""
    tasks = _tool_tasks(bundled_tasks, 2)
    handler = reference_model(tasks, failing=[tasks[1].task_key])
    run_dir = tmp_path / "run"
    with serve_model(handler) as url:
        flags = ["--model", "fake-gpt", "--model-base-url", url, "--out-dir", str(run_dir)]
        for task in tasks:
            flags += ["--task-key", task.task_key]
        first = run_cli("eval", *flags, cwd=tmp_path, env=ENV)
        assert first.returncode == 3, _clean(first)
        assert "fake-gpt: 1/1 graded passed (100.0%), 1 errored" in first.stdout
        assert "1 of 2 episodes errored (50%), more than --max-errored 0 allows (exit 3)" in first.stderr
        assert f"fleet-sdk eval --out-dir {run_dir} --retry-errored" in first.stderr
        with RunDir(run_dir) as store:
            before = store.envelope()
        graded = next(r for r in before.report.results if r.status == "passed")
        errored = next(r for r in before.report.results if r.status == "errored")
        assert errored.error_kind == "model"
        assert [g.kind for g in before.report.failure_groups] == ["model_error"]

        tolerated = run_cli("eval", "--out-dir", str(run_dir), "--resume", "--max-errored", "0.5", env=ENV)
        assert tolerated.returncode == 0, _clean(tolerated)

        handler.failing.clear()  # the endpoint is fixed
        handler.requests.clear()
        retried = run_cli("eval", "--out-dir", str(run_dir), "--retry-errored", cwd=tmp_path, env=ENV)
        assert retried.returncode == 0, _clean(retried)
    assert "fake-gpt: 2/2 graded passed (100.0%), 0 errored" in retried.stdout
    assert "Retried 1 errored episode." in retried.stdout
    played = {str(r["body"]["messages"][0]["content"]) for r in handler.requests if r["body"].get("tools")}
    assert played == {tasks[1].prompt}  # only the errored episode was played again
    with RunDir(run_dir) as store:
        after = store.envelope()
    assert after.report.retried == 1 and after.report.failure_groups == []
    assert next(r for r in after.report.results if r.task_key == graded.task_key) == graded
    page = (run_dir / f"{after.run_id}.html").read_text(encoding="utf-8")
    assert "1 errored episodes retried" in page


def test_a_platform_that_cannot_be_reached_exits_1_in_one_line(tmp_path: Path) -> None:
    env = {
        **ENV,
        "FLEET_API_KEY": "sk-test",
        "FLEET_BASE_URL": "http://127.0.0.1:9",
        "FLEET_PLATFORM_URL": "http://127.0.0.1:9",
    }
    result = run_cli(
        "eval", "--remote", "--model", "local/scripted", "--out-dir", str(tmp_path / "r"), env=env
    )
    assert result.returncode == 1, _clean(result)
    errors = [line for line in result.stderr.splitlines() if line.startswith("fleet-sdk eval: error:")]
    assert len(errors) == 1 and "APIConnectionError" in errors[0]
    assert not (tmp_path / "r").exists()


def _stored(run_dir: Path) -> int:
    if not RunDir.exists(run_dir):
        return 0
    with RunDir(run_dir) as store:
        return len(store.finished())


def test_ctrl_c_stops_cleanly_prints_the_resume_command_and_exits_130(
    tmp_path: Path, bundled_tasks: list[Task]
) -> None:
    """Regression: Ctrl-C printed a 25-30 line CancelledError/KeyboardInterrupt traceback, no resume
    hint, and once logged a ValidationError uploading the trace of the episode it cancelled."""
    tasks = _tool_tasks(bundled_tasks, 3)
    handler = reference_model(tasks)
    run_dir = tmp_path / "run"
    total = len(tasks) * 2
    with serve_model(handler) as url:
        argv = [*CLI, "eval", "--model", "fake-gpt", "--model-base-url", url, "-k", "2", "--concurrency", "2"]
        argv += ["--out-dir", str(run_dir)] + [arg for t in tasks for arg in ("--task-key", t.task_key)]
        out, err = tmp_path / "eval.stdout", tmp_path / "eval.stderr"
        with out.open("wb") as stdout, err.open("wb") as stderr:
            run = subprocess.Popen(argv, cwd=tmp_path, env=ENV, stdout=stdout, stderr=stderr)
            try:
                deadline = time.monotonic() + 180
                while _stored(run_dir) < 1 and run.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.1)
                handler.gate.clear()  # the episodes in flight wait on the model: Ctrl-C lands mid-run
                assert run.poll() is None, "the run ended before Ctrl-C"
                server = [p.pid for p in processes() if p.ppid == run.pid and b"serve" in p.cmdline()]
                assert len(server) == 1, "the embedded server is not running"
                run.send_signal(signal.SIGINT)
                code = run.wait(timeout=120)
            finally:
                handler.gate.set()
                if run.poll() is None:
                    run.kill()
                    run.wait(timeout=30)
        text = _clean((out.read_text(), err.read_text()))
        assert code == 130, text
        stored = _stored(run_dir)
        assert 1 <= stored < total
        assert f"interrupted; {stored} of {total} episodes are stored in {run_dir}." in text
        assert f"Resume with: fleet-sdk eval --out-dir {run_dir} --resume" in text
        assert all(not Path(f"/proc/{pid}").exists() for pid in server), (
            "the embedded server outlived the run"
        )

        resumed = run_cli("eval", "--out-dir", str(run_dir), "--resume", cwd=tmp_path, env=ENV)
        assert resumed.returncode == 0, _clean(resumed)
    with RunDir(run_dir) as store:
        manifest = store.require_manifest()
        assert len(store.finished()) == total
    # The episodes Ctrl-C stopped were not uploaded. One that had just finished (uploaded, its row
    # not yet committed) is played again on resume, so the trace job may hold one more session for
    # each episode that was in flight, never more.
    with LocalFleet(run_dir / "server-data") as local, local.fleet() as fleet:
        assert manifest.trace_job_id is not None
        listing = fleet.api.sessions.get_job_sessions(manifest.trace_job_id)
    assert total <= sum(len(t.sessions) for t in listing.tasks) <= total + 2  # --concurrency 2
