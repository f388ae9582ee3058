"""pass@k and the Wilson interval against values worked out by hand."""

from __future__ import annotations

import math

import pytest

from fleet_sdk.reports import Outcome, Source, build_report, pass_at_k, wilson_interval


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (3, 1, 1, 1 / 3),  # pass@1 is the plain pass rate
        (3, 1, 2, 2 / 3),  # 1 - C(2,2)/C(3,2) = 1 - 1/3
        (3, 1, 3, 1.0),  # fewer failures than draws: some draw must pass
        (5, 2, 3, 0.9),  # 1 - C(3,3)/C(5,3) = 1 - 1/10
        (10, 3, 5, 11 / 12),  # 1 - C(7,5)/C(10,5) = 1 - 21/252
        (4, 0, 2, 0.0),
        (4, 4, 4, 1.0),
    ],
)
def test_pass_at_k_matches_the_binomial_formula(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)
    assert pass_at_k(n, c, k) == pytest.approx(1 - math.comb(n - c, k) / math.comb(n, k), abs=1e-12)


@pytest.mark.parametrize(
    ("args", "field"),
    [((0, 0, 1), "n"), ((3, 4, 1), "c"), ((3, 1, 4), "k"), ((3, 1, 0), "k")],
)
def test_pass_at_k_names_the_bad_count(args: tuple[int, int, int], field: str) -> None:
    with pytest.raises(ValueError, match=rf"^{field} must"):
        pass_at_k(*args)


@pytest.mark.parametrize(
    ("successes", "n", "low", "high"),
    [
        # four-digit values from the closed forms (z = 1.95996), as published Wilson tables give them
        (1, 2, 0.0945, 0.9055),  # centre stays at 1/2 by symmetry
        (0, 3, 0.0, 0.5615),  # upper = (z^2/3) / (1 + z^2/3)
        (10, 10, 0.7225, 1.0),  # lower = 1 / (1 + z^2/10)
        (3, 10, 0.1078, 0.6032),
    ],
)
def test_wilson_interval_matches_hand_values(successes: int, n: int, low: float, high: float) -> None:
    got_low, got_high = wilson_interval(successes, n)
    assert got_low == pytest.approx(low, abs=6e-5)
    assert got_high == pytest.approx(high, abs=6e-5)


def test_wilson_interval_of_nothing_is_uninformative() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError, match="successes"):
        wilson_interval(3, 2)


def _outcome(task: str, model: str, sample: int, score: float | None, **extra: object) -> Outcome:
    status = "errored" if score is None else ("passed" if score >= 1.0 else "failed")
    return Outcome(task_key=task, model=model, sample=sample, status=status, score=score, **extra)  # type: ignore[arg-type]


def test_report_summaries_pending_and_errored_by_hand() -> None:
    outcomes = [
        _outcome("t1", "a", 0, 1.0, duration_ms=1000),
        _outcome("t1", "a", 1, 0.0, duration_ms=3000),
        _outcome("t2", "a", 0, None, error="verifier crashed\ntraceback..."),
        _outcome("t2", "a", 1, 1.0, duration_ms=2000),
        _outcome("t1", "b", 0, 0.5),
        _outcome("t1", "b", 1, 0.0),
        _outcome("t2", "b", 0, 1.0),
        # (t2, b, 1) never finished: pending
    ]
    env = build_report(
        run_id="r1",
        source=Source(kind="client"),
        suite_name="suite",
        task_keys=["t1", "t2"],
        models=["a", "b"],
        k=2,
        outcomes=outcomes,
    )
    a, b = env.report.models
    assert (a.sessions, a.passed, a.failed, a.errored, a.pending) == (4, 2, 1, 1, 0)
    assert a.pass_rate == pytest.approx(2 / 3)  # the errored session is left out
    assert a.pass_rate_interval is not None
    assert (a.pass_rate_interval.low, a.pass_rate_interval.high) == pytest.approx(wilson_interval(2, 3))
    # t1: n=2 c=1 k=2 -> 1.0; t2 has one graded sample < k -> left out of the mean
    assert a.pass_at_k == pytest.approx(1.0)
    assert a.avg_score == pytest.approx(2 / 3)
    assert a.avg_duration_ms == pytest.approx(2000.0)
    assert (b.passed, b.failed, b.errored, b.pending) == (1, 2, 0, 1)
    assert b.pass_at_k == pytest.approx(0.0)  # t1: n=2 c=0
    assert env.report.complete is False
    pending = [r for r in env.report.results if r.status == "pending"]
    assert [(r.task_key, r.model, r.sample) for r in pending] == [("t2", "b", 1)]
    assert env.report.verdict is not None
    assert [e.model for e in env.report.verdict.ranking] == ["a", "b"]
    assert env.report.verdict.winner == "a"
    reasons = {(g.status, g.reason): g.count for g in env.report.failure_groups}
    assert reasons == {("errored", "verifier crashed"): 1, ("failed", "score below 1"): 3}


def test_single_model_has_no_verdict_and_ties_have_no_winner() -> None:
    one = build_report(
        run_id="r",
        source=Source(kind="client"),
        suite_name="s",
        task_keys=["t"],
        models=["a"],
        k=1,
        outcomes=[_outcome("t", "a", 0, 1.0)],
    )
    assert one.report.verdict is None
    tie = build_report(
        run_id="r",
        source=Source(kind="client"),
        suite_name="s",
        task_keys=["t"],
        models=["a", "b"],
        k=1,
        outcomes=[_outcome("t", "a", 0, 1.0), _outcome("t", "b", 0, 1.0)],
    )
    assert tie.report.verdict is not None and tie.report.verdict.winner is None
