"""The phases every run goes through (``RunPhases``: check, open, settle, retry, play, finish), on
a real run directory, with a run that plays its episodes by writing their rows; and the progress
count both ways of playing share (``ProgressTally``). No server: this run uploads nothing."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from fleet_sdk._exceptions import EvaluationError
from fleet_sdk.evaluation import Progress, RunManifest
from fleet_sdk.evaluation._run import ProgressTally, RunPhases, new_run_stamp
from fleet_sdk.reports import Outcome, classify

TASKS = ["t1", "t2"]


def _row(task_key: str, score: float | None) -> Outcome:
    return Outcome(task_key=task_key, model="m", sample=0, status=classify(score), score=score)


class _Recorded(RunPhases):
    """A run whose episodes score ``scores`` (task key -> score), noting each phase it goes through."""

    def __init__(self, run_dir: Path, scores: dict[str, float | None], **options: Any) -> None:
        super().__init__(None, run_dir, on_progress=None, **options)  # type: ignore[arg-type]
        self.scores = scores
        self.phases: list[str] = []
        self.played: list[str] = []
        self.refuse = False

    @property
    def upload(self) -> bool:
        return False

    async def check(self) -> None:
        self.phases.append("check")
        if self.refuse:
            raise EvaluationError("k must be at least 1, got 0")

    async def open(self) -> None:
        self.phases.append("open")
        if not self.resume:
            run_id, created_at = new_run_stamp(None)
            self.store.start(
                RunManifest(
                    run_id=run_id,
                    suite_name="s",
                    tasks=[{"task_key": t} for t in TASKS],
                    models=["m"],
                    k=1,
                    created_at=created_at,
                )
            )

    async def settle(self) -> None:
        self.phases.append("settle")

    async def retry(self) -> None:
        self.phases.append("retry")
        await super().retry()

    async def play(self) -> None:
        self.phases.append("play")
        finished = self.store.finished()
        for task_key in TASKS:
            if (task_key, "m", 0) not in finished:
                self.played.append(task_key)
                self.store.record(_row(task_key, self.scores[task_key]))


async def test_a_run_goes_through_its_phases_in_order_and_reads_its_report(tmp_path: Path) -> None:
    run = _Recorded(tmp_path / "run", {"t1": 1.0, "t2": None}, resume=False, retry_errored=False)
    envelope = await run.drive()
    assert run.phases == ["check", "open", "settle", "play"]  # no retry unless asked
    assert run.played == TASKS
    rows = sorted((r.task_key, r.status) for r in envelope.report.results)
    assert rows == [("t1", "passed"), ("t2", "errored")]
    with pytest.raises(RuntimeError):
        run.store  # noqa: B018  # the run directory is closed once the run is driven


async def test_retry_forgets_the_errored_episodes_so_play_plays_them_again(tmp_path: Path) -> None:
    first = _Recorded(tmp_path / "run", {"t1": 1.0, "t2": None}, resume=False, retry_errored=False)
    await first.drive()
    again = _Recorded(tmp_path / "run", {"t1": 0.0, "t2": 1.0}, resume=True, retry_errored=True)
    envelope = await again.drive()
    assert again.phases == ["check", "open", "settle", "retry", "play"]
    assert again.played == ["t2"]  # the graded t1 is kept
    rows = sorted((r.task_key, r.status) for r in envelope.report.results)
    assert rows == [("t1", "passed"), ("t2", "passed")]
    assert envelope.report.retried == 1


async def test_a_refused_check_leaves_no_run_directory(tmp_path: Path) -> None:
    run = _Recorded(tmp_path / "run", {}, resume=False, retry_errored=False)
    run.refuse = True
    with pytest.raises(EvaluationError):
        await run.drive()
    assert run.phases == ["check"]
    assert not (tmp_path / "run").exists()


def test_the_tally_counts_this_attempts_pace_over_what_is_left() -> None:
    told: list[Progress] = []
    tally = ProgressTally(told.append, total=6, done_before=2)
    tally.grades([_row("a", 1.0), _row("b", 0.0)])
    tally.report()
    assert (told[-1].done, told[-1].passed, told[-1].graded, told[-1].eta) == (2, 1, 2, None)
    tally.add(_row("c", 1.0))
    tally.add(_row("d", None))
    tally.report()
    last = told[-1]
    assert (last.done, last.total, last.passed, last.graded) == (4, 6, 2, 3)
    assert last.eta == last.elapsed / 2 * 2  # two done this attempt, two left
    assert last.pass_rate == pytest.approx(2 / 3)


def test_a_new_run_is_stamped_with_an_id_and_its_start() -> None:
    run_id, created_at = new_run_stamp(None)
    assert re.fullmatch(r"run-\d{8}T\d{6}Z-[0-9a-f]{6}", run_id)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", created_at)
    assert new_run_stamp("mine")[0] == "mine"
