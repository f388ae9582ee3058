"""``fleet-sdk report`` refuses a flag it would ignore, and a model or task its run does not have,
in one line with exit 2 (a did-you-mean for a misspelt name); what it cannot write is one line,
exit 1. The command runs in-process (``fleet_sdk.cli.main``) on run directories written here."""

from __future__ import annotations

from pathlib import Path

import pytest

from fleet_sdk.cli import main
from fleet_sdk.evaluation import RunDir, RunManifest
from fleet_sdk.reports import Outcome

TASKS = ("orderdesk-count-pending-orders", "calendar-cancel-vendor-prep")
MODELS = ("local/scripted", "local/random")


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A finished run: two tasks, two models, k=1; the random model failed both."""
    path = tmp_path / "run"
    with RunDir(path) as store:
        store.start(
            RunManifest(
                run_id="flags",
                suite_name="suite",
                tasks=[{"task_key": key} for key in TASKS],
                models=list(MODELS),
                k=1,
                created_at="2026-01-01T00:00:00Z",
            )
        )
        for key in TASKS:
            for model in MODELS:
                ok = model == "local/scripted"
                store.record(
                    Outcome(
                        task_key=key,
                        model=model,
                        sample=0,
                        status="passed" if ok else "failed",
                        score=1.0 if ok else 0.0,
                    )
                )
    return path


CASES = [
    (
        ["--part", "scenario"],
        "--part scenario: needs --scenario TASK_KEY, the task to show",
    ),
    (
        ["--part", "scenario", "--scenario", "orderdesk-count-pending-order"],
        "--scenario orderdesk-count-pending-order: not a task of this run; "
        "did you mean 'orderdesk-count-pending-orders'?",
    ),
    (
        ["--part", "verdict", "--format", "html"],
        "--part: parts are Markdown; drop --format html or --part verdict",
    ),
    (
        ["--part", "fix_items", "--model", "local/randm"],
        "--model local/randm: not a model of this run; did you mean 'local/random'?",
    ),
    (["--model", "local/random"], "--model: narrows --part fix_items only; add --part fix_items"),
    (
        ["--scenario", "calendar-cancel-vendor-prep"],
        "--scenario: names the task of --part scenario only; add --part scenario",
    ),
    (["--theme", "dark"], "--theme: colours the HTML report only; drop it or use --format html (not md)"),
]


@pytest.mark.parametrize(("flags", "message"), CASES, ids=[" ".join(f) for f, _ in CASES])
def test_a_flag_the_report_would_ignore_or_a_name_it_lacks_is_one_line_and_exit_2(
    run_dir: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    """Regression: `--part scenario` alone named the Python kwarg `scenario=`; `--part` with
    `--format html` and `--model nope` were silently ignored."""
    assert main(["report", str(run_dir), *flags]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"fleet-sdk report: error: {message}\n"
    assert captured.out == ""


def test_compare_refuses_the_part_flags(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(run_dir), "--compare", str(run_dir), "--part", "verdict"]) == 2
    assert capsys.readouterr().err == (
        "fleet-sdk report: error: --part: not with --compare, which compares whole runs\n"
    )


def test_an_output_that_cannot_be_written_is_one_line_and_exit_1(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: an --output in a directory that does not exist ended in a traceback."""
    target = tmp_path / "missing" / "report.md"
    assert main(["report", str(run_dir), "-o", str(target)]) == 1
    assert (
        capsys.readouterr().err == f"fleet-sdk report: error: --output {target}: No such file or directory\n"
    )


def test_the_flags_still_render_what_they_name(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(run_dir), "--part", "fix_items", "--model", "local/random"]) == 0
    text = capsys.readouterr().out
    assert "## Fix items for local/random" in text and "local/scripted" not in text
    assert main(["report", str(run_dir), "--part", "scenario", "--scenario", TASKS[1]]) == 0
    assert TASKS[1] in capsys.readouterr().out


def test_a_misspelt_choice_is_one_line_with_the_closest_one(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: a bad value printed the whole usage before the error, and suggested nothing."""
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(run_dir), "--part", "fix-items"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == (
        "fleet-sdk report: error: argument --part: 'fix-items' is not one of verdict, fix_items, "
        "scenario; did you mean 'fix_items'?\n"
    )


def test_a_misspelt_flag_is_one_line_naming_the_closest_flag(
    run_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(run_dir), "--formt", "md"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == (
        "fleet-sdk report: error: unrecognized argument '--formt'; did you mean --format?\n"
    )
