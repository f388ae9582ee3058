"""``fleet-sdk eval`` refuses what cannot work before it starts anything: exit 2, one line per problem.

Each case is a real subprocess. None of them may start the embedded server or create the run
directory, and none may print a traceback: a sweep script reads the exit code, a person the lines,
each naming the flag to change (and, for a misspelt task, environment or local policy, the name it
was probably meant to be).
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _cli import run_cli
from _fake_model import ModelHandler, serve_model, text_reply

from fleet_sdk.evaluation import RunDir, RunManifest

STARTED = "Starting the embedded local Fleet server"


def _refused(result: subprocess.CompletedProcess[str]) -> list[str]:
    """The error lines of a refused run, after checking it was refused cleanly and early."""
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert STARTED not in result.stdout  # refused before any server started
    lines = [line for line in result.stderr.splitlines() if line.startswith("fleet-sdk eval: error: ")]
    return [line.removeprefix("fleet-sdk eval: error: ") for line in lines]


def test_flags_tasks_and_models_are_checked_before_the_server_starts(tmp_path: Path) -> None:
    """Regression: unknown task keys were found only after the server started (about 12 s), with no
    suggestion, and a model with no endpoint errored every episode and exited 0."""
    result = run_cli(
        *("eval", "--task-key", "orderdesk-count-pending", "--env", "orderdsk", "-k", "0"),
        *("--model", "gpt-4o", "--model", "local/randon", "--out-dir", str(tmp_path / "run")),
        cwd=tmp_path,
    )
    lines = _refused(result)
    assert sorted(lines) == sorted(
        [
            "-k: must be at least 1, got 0",
            "--model local/randon: no such local policy; did you mean 'local/random'?",
            "--model gpt-4o: needs --model-base-url (an OpenAI-compatible chat-completions URL; key in "
            "FLEET_EVAL_MODEL_API_KEY), or use local/scripted or local/random",
            "--env orderdsk: no such environment; did you mean 'orderdesk'?",
            "--task-key orderdesk-count-pending: no such task; "
            "did you mean 'orderdesk-count-pending-orders'?",
        ]
    )
    assert not (tmp_path / "run").exists()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class _Refusing(ModelHandler):
    """An endpoint that refuses the key."""

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return 401, {"error": {"message": "invalid api key"}}


class _Answering(ModelHandler):
    """An endpoint that answers every request with text."""

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return 200, text_reply("OK")


@pytest.fixture
def refusing() -> Iterator[str]:
    with serve_model(_Refusing) as url:
        yield url


def test_every_endpoint_model_must_answer_one_small_request_first(tmp_path: Path, refusing: str) -> None:
    dead = f"http://127.0.0.1:{_closed_port()}/v1"
    result = run_cli(
        *("eval", "--task-key", "orderdesk-count-pending-orders", "--out-dir", str(tmp_path / "run")),
        *("--model", "up", "--model", "down", "--model-base-url", f"up={refusing}", "--model-base-url", dead),
        cwd=tmp_path,
    )
    lines = _refused(result)
    assert len(lines) == 2
    assert any(
        line.startswith(f"--model-base-url {refusing}: model up: ") and "answered 401" in line
        for line in lines
    )
    assert any(
        line.startswith(f"--model-base-url {dead}: model down: ") and "failed" in line for line in lines
    )
    (probe,) = _Refusing.requests  # one request, no retry
    assert probe["body"]["model"] == "up" and probe["body"]["max_tokens"] == 1
    assert not (tmp_path / "run").exists()


def test_sampling_flags_are_checked_and_named(tmp_path: Path) -> None:
    with serve_model(_Answering) as url:
        result = run_cli(
            *("eval", "--model", "m", "--model-base-url", url, "--out-dir", str(tmp_path / "run")),
            *("--temperature", "hot", "--top-p", "2", "--max-tokens", "0"),
            *("--extra-body", '{"seed": 3}', "--seed", "4"),
            cwd=tmp_path,
        )
        assert _Answering.requests == []  # the flags are wrong: nothing is asked
    lines = _refused(result)
    assert sorted(lines) == sorted(
        [
            "--temperature: 'hot' is not a number",
            "--top-p: top_p must be in (0, 1], got 2.0",
            "--max-tokens: max_tokens must be at least 1, got 0",
            "--extra-body: extra_body may not set 'seed': it is set elsewhere",
        ]
    )
    local_only = run_cli("eval", "--model", "local/scripted", "--temperature", "0.5", cwd=tmp_path)
    assert _refused(local_only) == [
        "--temperature: every --model is a local policy, which no endpoint or sampling applies to"
    ]


def test_task_files_and_jobs_model_ids_are_checked(tmp_path: Path) -> None:
    broken = tmp_path / "tasks.json"
    broken.write_text("{not json", encoding="utf-8")
    result = run_cli("eval", "--tasks-file", str(broken), "--jobs", "--model", "gpt-4o", cwd=tmp_path)
    lines = _refused(result)
    assert len(lines) == 3
    assert any(line.startswith(f"--tasks-file: {broken}: not valid JSON") for line in lines)
    assert "--model gpt-4o: --jobs takes provider/model ids (e.g. openai/gpt-4o)" in lines
    assert any(line.startswith("--model gpt-4o: needs --model-base-url") for line in lines)


def _stored_run(path: Path) -> None:
    """A run directory as ``eval`` leaves it (no episode played), written without a server."""
    with RunDir(path) as store:
        store.start(
            RunManifest(
                run_id="stored",
                suite_name="orderdesk",
                tasks=[{"task_key": "orderdesk-count-pending-orders"}],
                models=["fake-gpt"],
                k=3,
                created_at="2026-01-01T00:00:00Z",
                max_steps=30,
                endpoints={
                    "fake-gpt": {"base_url": "http://127.0.0.1:1/v1", "sampling": {"temperature": 0.7}}
                },
                server={"kind": "embedded"},
                extra={"selection": {"env": ["orderdesk"]}},
            )
        )


def test_the_run_directory_decides_between_a_new_run_and_a_resume(tmp_path: Path) -> None:
    missing = run_cli("eval", "--out-dir", str(tmp_path / "none"), "--resume", cwd=tmp_path)
    assert _refused(missing) == [
        f"--resume: there is no run in {tmp_path / 'none'} (start one without --resume)"
    ]
    _stored_run(tmp_path / "run")
    again = run_cli("eval", "--out-dir", str(tmp_path / "run"), cwd=tmp_path)
    assert _refused(again) == [
        f"--out-dir: {tmp_path / 'run'} already holds run 'stored'; continue it with --resume, "
        "or choose another --out-dir"
    ]
    contradicting = run_cli(
        *("eval", "--out-dir", str(tmp_path / "run"), "--resume", "-k", "2", "--env", "calendar"),
        *("--model-base-url", "http://127.0.0.1:2/v1", "--temperature", "0.2", "--remote"),
        cwd=tmp_path,
    )
    assert sorted(_refused(contradicting)) == sorted(
        [
            "-k 2 contradicts the run's 3 (a resumed run keeps its settings)",
            "--env calendar contradicts the run's --env orderdesk (a resumed run keeps its settings)",
            "--remote contradicts the run, which ran on its embedded local server",
            "--model-base-url http://127.0.0.1:2/v1 contradicts the run's http://127.0.0.1:1/v1 for fake-gpt "
            "(a resumed run keeps its settings)",
            "--temperature 0.2 contradicts the run's 0.7 for fake-gpt (a resumed run keeps its settings)",
        ]
    )
    with RunDir(tmp_path / "run") as store:  # refused: the run is as it was
        manifest = store.require_manifest()
    assert (manifest.k, manifest.endpoints["fake-gpt"]["sampling"]) == (3, {"temperature": 0.7})
    # the stored endpoint is down: a resume given nothing else is still checked before it starts
    down = run_cli("eval", "--out-dir", str(tmp_path / "run"), "--resume", cwd=tmp_path)
    (line,) = _refused(down)
    assert line.startswith("--model-base-url http://127.0.0.1:1/v1: model fake-gpt: ")
