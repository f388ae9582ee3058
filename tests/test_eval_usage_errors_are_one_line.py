"""``fleet-sdk eval`` refuses what it cannot do before it starts anything: one line naming the
flag (and what to do), exit 2, no run directory left behind. The command runs in-process
(``fleet_sdk.cli.main``); no server is started by any of these."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from _fake_model import ModelHandler, serve_model

from fleet_sdk.cli import main
from fleet_sdk.evaluation import RunDir, RunManifest
from fleet_sdk.evaluation._runlock import RunLock

TASK = "orderdesk-count-pending-orders"

CASES = [
    (["--remote"], "--remote: FLEET_API_KEY is not set (the platform's API key)"),
    (["--deadline", "5"], "--deadline: bounds the wait for --jobs only; add --jobs or drop it"),
    (
        ["--jobs", "--concurrency", "2"],
        "--concurrency: --jobs plays at the server's job concurrency; drop it",
    ),
    (["--jobs", "--ray"], "--ray: --jobs plays on the server, not on Ray actors; choose one"),
]


@pytest.mark.parametrize(("flags", "message"), CASES, ids=[" ".join(f) for f, _ in CASES])
def test_a_flag_that_cannot_be_used_is_one_line_and_exit_2(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    flags: list[str],
    message: str,
) -> None:
    """Regression: `--remote` without FLEET_API_KEY exited 1 with `ConfigurationError: ...`;
    `--deadline` without `--jobs`, and `--concurrency` or `--ray` with it, were silently ignored."""
    monkeypatch.delenv("FLEET_API_KEY", raising=False)
    out_dir = tmp_path / "run"
    assert main(["eval", "--task-key", TASK, "--out-dir", str(out_dir), *flags]) == 2
    assert capsys.readouterr().err == f"fleet-sdk eval: error: {message}\n"
    assert not out_dir.exists()


def test_a_run_being_run_names_its_pid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Regression: a second eval on a running run's --out-dir failed with the embedded server's
    data-dir error instead of saying who runs it."""
    run_dir = tmp_path / "run"
    with RunDir(run_dir) as store:
        store.start(
            RunManifest(
                run_id="busy",
                suite_name="s",
                tasks=[{"task_key": TASK}],
                models=["local/scripted"],
                k=1,
                created_at="2026-01-01T00:00:00Z",
            )
        )
    expected = (
        f"fleet-sdk eval: error: --out-dir: run 'busy' in {run_dir} is being run by pid {os.getpid()}; "
        "wait for it to end, or stop it (Ctrl-C) and resume\n"
    )
    with RunLock(run_dir):  # as the running eval holds it
        assert main(["eval", "--out-dir", str(run_dir), "--resume"]) == 2
        assert capsys.readouterr().err == expected
        assert main(["eval", "--out-dir", str(run_dir)]) == 2  # not "resume it": it is running
        assert capsys.readouterr().err == expected


class _Unauthorized(ModelHandler):
    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return 401, {"error": {"message": "missing bearer token"}}


def test_a_model_refusing_a_request_without_a_key_names_the_key_variable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: a 401 from the model did not say FLEET_EVAL_MODEL_API_KEY was unset."""
    monkeypatch.delenv("FLEET_EVAL_MODEL_API_KEY", raising=False)
    out_dir = tmp_path / "run"
    with serve_model(_Unauthorized) as url:
        code = main(
            [
                "eval",
                "--model",
                "gpt-x",
                "--model-base-url",
                url,
                "--task-key",
                TASK,
                "--out-dir",
                str(out_dir),
            ]
        )
    assert code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith(f"fleet-sdk eval: error: --model-base-url {url}: model gpt-x: ")
    assert "answered 401" in err
    assert err.endswith("(FLEET_EVAL_MODEL_API_KEY is not set, so no key was sent)\n")
    assert not out_dir.exists()


def test_a_bad_value_is_one_line_without_the_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", "-k", "two"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == "fleet-sdk eval: error: argument -k: invalid int value: 'two'\n"


def test_a_misspelt_flag_is_one_line_naming_the_closest_flag(capsys: pytest.CaptureFixture[str]) -> None:
    """Regression: a misspelt flag got the top-level usage and no hint of the flag meant."""
    with pytest.raises(SystemExit) as exit_info:
        main(["eval", "--out-dri", "x"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == (
        "fleet-sdk eval: error: unrecognized argument '--out-dri'; did you mean --out-dir?\n"
    )
