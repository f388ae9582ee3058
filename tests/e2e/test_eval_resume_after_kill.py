"""``fleet-sdk eval`` killed half way (SIGKILL, a real subprocess) resumes without repeating an episode.

With the local policies, ``fleet-sdk report`` then renders the run in all three formats, byte for
byte the same twice, and every number of the report agrees with the sessions the embedded server
stored. Against a chat-completions endpoint, the resume is given ``--out-dir`` alone: the endpoint,
its sampling parameters and the rest come from the run directory (the key from the environment),
and the report's totals equal those of the same run left uninterrupted.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from _cli import CLI, run_cli
from _fake_model import reference_model, serve_model
from _procs import processes

from fleet_local import LocalFleet
from fleet_sdk.evaluation import RunDir, session_score
from fleet_sdk.reports import Outcome, ReportEnvelope
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


def _same(played: Outcome, stored: Outcome) -> bool:
    """The same episode, though the run has since copied its transcript into the run directory,
    and sent its trace upload if the kill came between storing the episode and uploading it (the
    stored row then has no session id yet; the resumed run sends the pending upload)."""
    exclude = {"transcript"} if stored.session_id is not None else {"transcript", "session_id"}
    return played.model_dump(exclude=exclude) == stored.model_dump(exclude=exclude)


def _kill_half_way(
    argv: list[str],
    run_dir: Path,
    total: int,
    tmp_path: Path,
    *,
    env: dict[str, str] | None = None,
    before_kill: Callable[[], None] = lambda: None,
) -> None:
    """Run ``argv`` until half of its ``total`` episodes are stored, then SIGKILL it (and its server)."""
    # stderr to a file: a pipe nobody reads would block the run once its buffer fills.
    stderr_path = tmp_path / f"{run_dir.name}-killed.stderr"
    with stderr_path.open("wb") as stderr:
        first = subprocess.Popen(
            argv, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=stderr, start_new_session=True, env=env
        )
        deadline = time.monotonic() + 240
        servers: list[int] = []
        try:
            while _finished(run_dir) < total // 2 and first.poll() is None and time.monotonic() < deadline:
                time.sleep(0.02)
            assert first.poll() is None, "the run ended before it could be killed half way"
            before_kill()
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
    assert first.returncode == -signal.SIGKILL, stderr_path.read_text(errors="replace")


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
    _kill_half_way(argv, run_dir, total, tmp_path)

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
    assert all(_same(after[slot], outcome) for slot, outcome in before.items())  # nothing replayed

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


def test_eval_against_a_chat_endpoint_killed_half_way_resumes_with_out_dir_alone(
    tmp_path: Path, bundled_tasks: list[Task]
) -> None:
    """Regression: a resume used to forget the endpoint, error every remaining episode and exit 0."""
    chosen = [
        t
        for env in ("orderdesk", "calendar")
        for t in [t for t in bundled_tasks if t.env_key == env and t.task_modality == "tool_use"][:3]
    ]
    give_up = [chosen[1].task_key, chosen[4].task_key]  # graded and failed, in both runs alike
    handler = reference_model(chosen, give_up=give_up)
    k = 2
    total = len(chosen) * k
    env = {**os.environ, "FLEET_EVAL_MODEL_API_KEY": "sk-resume-secret"}
    with serve_model(handler) as url:
        flags = ["--model", "fake-gpt", "--model-base-url", url, "--temperature", "0", "--seed", "7"]
        flags += ["--max-tokens", "512", "--extra-body", '{"top_k": 1}', "-k", str(k), "--concurrency", "2"]
        for task in chosen:
            flags += ["--task-key", task.task_key]
        run_dir = tmp_path / "run"
        # At most total - 2 episodes may start: the killed run cannot have finished them all,
        # however fast its episodes are (it once did, between two polls of the run dir).
        handler.admitted, handler.released = threading.Semaphore(total - 2), threading.Event()
        try:
            _kill_half_way(
                [*CLI, "eval", *flags, "--out-dir", str(run_dir)],
                run_dir,
                total,
                tmp_path,
                env=env,
                before_kill=handler.gate.clear,  # hold the episodes in flight: the run cannot end first
            )
        finally:
            handler.gate.set()
            handler.admitted = None
            handler.released.set()
        with RunDir(run_dir) as store:
            before = {(o.task_key, o.model, o.sample): o for o in store.outcomes()}
        assert total // 2 <= len(before) < total
        handler.requests.clear()

        resumed = run_cli("eval", "--out-dir", str(run_dir), "--resume", cwd=tmp_path, env=env)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert f"{len(before)}/{total} episodes" in resumed.stdout
        played = [r for r in handler.requests if r["body"].get("tools")]
        assert played, "the resumed run asked the model nothing"
        for request in handler.requests:  # the endpoint, key and sampling came from the run directory
            assert request["auth"] == "Bearer sk-resume-secret"
            body = request["body"]
            assert (body["model"], body["temperature"], body["seed"], body["top_k"]) == (
                "fake-gpt",
                0.0,
                7,
                1,
            )
        assert all(r["body"]["max_tokens"] == 512 for r in played)

        uninterrupted = run_cli("eval", *flags, "--out-dir", str(tmp_path / "whole"), cwd=tmp_path, env=env)
        assert uninterrupted.returncode == 0, uninterrupted.stdout + uninterrupted.stderr

    with RunDir(run_dir) as store:
        after = {(o.task_key, o.model, o.sample): o for o in store.outcomes()}
        resumed_report = store.envelope()
    assert all(_same(after[slot], outcome) for slot, outcome in before.items())  # nothing replayed
    assert "sk-resume-secret" not in (run_dir / "run.sqlite3").read_bytes().decode("latin-1")
    with RunDir(tmp_path / "whole") as store:
        whole_report = store.envelope()
    assert resumed_report.report.complete and whole_report.report.complete
    assert [r.status for r in resumed_report.report.results] == [
        r.status for r in whole_report.report.results
    ]
    assert not any(r.status == "errored" for r in resumed_report.report.results)

    def totals(envelope: ReportEnvelope) -> list[tuple[object, ...]]:
        fields = ("model", "sessions", "passed", "failed", "errored", "pending", "pass_rate")
        fields += ("pass_rate_interval", "pass_at_k", "pass_at_k_curve", "endpoint", "sampling")
        return [tuple(getattr(m, name) for name in fields) for m in envelope.report.models]

    assert totals(resumed_report) == totals(whole_report)
    (summary,) = resumed_report.report.models
    assert (summary.passed, summary.failed) == (len(chosen) * k - len(give_up) * k, len(give_up) * k)
    assert summary.sampling is not None and summary.sampling.temperature == 0.0
    assert summary.sampling.extra_body == {"top_k": 1}
