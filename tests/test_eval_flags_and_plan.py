"""``fleet-sdk eval``'s flags as a typed value (``EvalFlags``) and the plan made from them against a
run directory (``make_plan``): every problem names the flag at fault. The flags are parsed by the
command's own parser; run directories are real ones (SQLite). No server is started."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

from fleet_sdk._cli_eval_flags import EvalFlags, UsageError
from fleet_sdk._cli_eval_plan import make_plan
from fleet_sdk.cli import build_parser
from fleet_sdk.evaluation import RunDir, RunManifest

TASK = "orderdesk-count-pending-orders"


def _flags(tmp_path: Path, *argv: str) -> EvalFlags:
    args = build_parser(command_sets=[]).parse_args(["eval", "--out-dir", str(tmp_path / "run"), *argv])
    return EvalFlags.from_namespace(args)


def _stored_run(run_dir: Path, **fields: object) -> None:
    manifest = RunManifest(
        run_id="stored",
        suite_name="s",
        tasks=[{"task_key": TASK}],
        models=["local/scripted"],
        k=2,
        created_at="2026-01-01T00:00:00Z",
        max_steps=10,
        **fields,  # type: ignore[arg-type]
    )
    with RunDir(run_dir) as store:
        store.start(manifest)


def test_flags_are_typed_and_frozen(tmp_path: Path) -> None:
    flags = _flags(
        tmp_path,
        "--model",
        "local/random",
        "--model",
        "local/random",
        "-k",
        "3",
        "--tasks-file",
        "tasks.json",
        "--temperature",
        "0.5",
    )
    assert flags.models == ("local/random",)  # a repeat is dropped, the order kept
    assert flags.k == 3
    assert flags.out_dir == tmp_path / "run"
    assert flags.sampling == {"temperature": ("0.5",)}
    assert flags.selection() == {"tasks_file": [str(Path("tasks.json").resolve())]}
    assert flags.problems() == []
    with pytest.raises(dataclasses.FrozenInstanceError):
        flags.k = 4  # type: ignore[misc]


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["-k", "0"], "-k: must be at least 1, got 0"),
        (["--concurrency", "-1"], "--concurrency: must be at least 1, got -1"),
        (["--max-steps", "0"], "--max-steps: must be at least 1, got 0"),
        (["--max-errored", "1.5"], "--max-errored: must be a fraction from 0 to 1, got 1.5"),
        (["--deadline", "0"], "--deadline: must be positive, got 0.0"),
    ],
)
def test_a_flag_out_of_bounds_is_named(tmp_path: Path, argv: list[str], problem: str) -> None:
    assert _flags(tmp_path, *argv).problems() == [problem]


def test_sampling_values_are_read_per_model_and_refused_by_flag(tmp_path: Path) -> None:
    flags = _flags(tmp_path, "--temperature", "0.2", "--temperature", "m2=0.9", "--top-p", "m1=lots")
    models = ["m1", "m2"]
    problems: list[str] = []
    assert flags.sampling_for("m2", models, problems).temperature == 0.9
    assert problems == []
    first = flags.sampling_for("m1", models, problems)
    assert first.temperature == 0.2  # the shared value
    assert first.top_p is None
    assert problems == ["--top-p: 'lots' is not a number"]


def test_a_plan_tells_every_problem_at_once_each_naming_its_flag(tmp_path: Path) -> None:
    """The flags' own problems and the run's come together, so one try shows them all."""
    flags = _flags(tmp_path, "-k", "0", "--model", "gpt-4o", "--deadline", "5", "--task-key", TASK)
    with pytest.raises(UsageError) as caught:
        make_plan(flags)
    assert caught.value.lines == [
        "-k: must be at least 1, got 0",
        "--model gpt-4o: needs --model-base-url (an OpenAI-compatible chat-completions URL; key in "
        "FLEET_EVAL_MODEL_API_KEY), or use local/scripted or local/random",
        "--deadline: bounds the wait for --jobs only; add --jobs or drop it",
    ]
    assert not (tmp_path / "run").exists()


def test_a_new_plan_holds_what_the_flags_say(tmp_path: Path) -> None:
    plan = make_plan(_flags(tmp_path, "--task-key", TASK, "-k", "2", "--concurrency", "3"))
    assert (plan.resume, plan.k, plan.concurrency) == (False, 2, 3)
    assert plan.models == ["local/scripted", "local/random"]
    assert plan.selection == {"task_key": [TASK]}
    assert plan.server == {"kind": "embedded"}
    assert plan.endpoints == {}


def test_a_run_directory_holding_a_run_is_refused_without_resume_before_the_flags(tmp_path: Path) -> None:
    """What the run directory holds decides everything else, so it is told alone."""
    _stored_run(tmp_path / "run")
    with pytest.raises(UsageError) as caught:
        make_plan(_flags(tmp_path, "-k", "0"))
    assert caught.value.lines == [
        f"--out-dir: {tmp_path / 'run'} already holds run 'stored'; continue it with --resume, "
        "or choose another --out-dir"
    ]


def test_a_resume_takes_the_stored_run_and_refuses_a_contradicting_flag(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("FLEET_API_KEY", raising=False)
    _stored_run(tmp_path / "run", concurrency=5)
    plan = make_plan(_flags(tmp_path, "--resume"))
    assert plan.resume
    assert plan.models == ["local/scripted"]
    assert plan.concurrency == 5
    assert plan.manifest is not None and plan.manifest.run_id == "stored"
    with pytest.raises(UsageError) as caught:
        make_plan(_flags(tmp_path, "--retry-errored", "-k", "3", "--max-steps", "10"))
    assert caught.value.lines == ["-k 3 contradicts the run's 2 (a resumed run keeps its settings)"]


def test_a_resume_with_nothing_to_resume_names_the_flag(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as caught:
        make_plan(_flags(tmp_path, "--resume"))
    expected = f"--resume: there is no run in {tmp_path / 'run'} (start one without --resume)"
    assert caught.value.lines == [expected]
    assert os.listdir(tmp_path) == []
