"""``fleet-sdk report`` on run directories written without a server: compare, themes, transcript links."""

from __future__ import annotations

from pathlib import Path

from _cli import run_cli

from fleet_sdk.evaluation import RunDir, RunManifest
from fleet_sdk.reports import Outcome


def _run(path: Path, run_id: str, k: int, passes: list[bool]) -> None:
    """A finished run of one task and one model, its failed episodes with transcripts."""
    with RunDir(path) as store:
        store.start(
            RunManifest(
                run_id=run_id,
                suite_name="suite",
                tasks=[{"task_key": "t"}],
                models=["m"],
                k=k,
                created_at="2026-01-01T00:00:00Z",
            )
        )
        for sample, ok in enumerate(passes):
            store.record(
                Outcome(
                    task_key="t",
                    model="m",
                    sample=sample,
                    status="passed" if ok else "failed",
                    score=1.0 if ok else 0.0,
                    session_id=f"sess_{run_id}_{sample}",
                    feedback=None if ok else "expected 6 pending orders, answer was None",
                    transcript=None if ok else f"transcripts/sess_{run_id}_{sample}.json",
                )
            )


def test_compare_runs_of_different_k_on_the_common_k(tmp_path: Path) -> None:
    """Regression: `report --compare` between runs with k=3 and k=2 raised a ValueError traceback."""
    _run(tmp_path / "base", "base", 3, [True, True, True])
    _run(tmp_path / "head", "head", 2, [False, False])
    for fmt in ("md", "json", "html"):
        result = run_cli(
            "report", str(tmp_path / "head"), "--compare", str(tmp_path / "base"), "--format", fmt
        )
        assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
        assert "compared on pass@2, the k they share" in result.stdout
    md = run_cli("report", str(tmp_path / "head"), "--compare", str(tmp_path / "base")).stdout
    assert "| m | t | regressed | 1.00 | 0.00 | -1.00 |" in md


def test_html_links_transcripts_from_where_it_is_written_and_takes_a_theme(tmp_path: Path) -> None:
    _run(tmp_path / "run", "r1", 1, [False])
    (tmp_path / "out").mkdir()
    written = run_cli(
        "report", str(tmp_path / "run"), "--format", "html", "--theme", "dark", "-o", str(tmp_path / "out")
    )
    assert written.returncode == 0, written.stderr
    page = (tmp_path / "out" / "r1.html").read_text(encoding="utf-8")
    assert 'data-theme="dark"' in page
    assert 'href="../run/transcripts/sess_r1_0.json"' in page  # relative: the two can move together
    assert "expected 6 pending orders, answer was None" in page
    printed = run_cli("report", str(tmp_path / "run"), "--format", "md").stdout
    assert f"(<{(tmp_path / 'run').resolve().as_uri()}/transcripts/sess_r1_0.json>)" in printed


def test_a_missing_run_directory_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = run_cli("report", str(tmp_path / "nothing"))
    assert result.returncode == 2
    assert result.stderr == f"fleet-sdk report: error: {tmp_path / 'nothing'} is not a run directory\n"
