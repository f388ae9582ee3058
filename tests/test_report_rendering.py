"""The report's JSON, Markdown and HTML renderings, file names and the comparison of two runs."""

from __future__ import annotations

import json

import pytest

from fleet_sdk.reports import (
    Outcome,
    ReportEnvelope,
    Sampling,
    Source,
    UnknownPartError,
    build_report,
    canonical_json,
    compare,
    digest,
    filename,
    to_html,
    to_json,
    to_markdown,
)

EVIL = "<script>alert(1)</script>|*x*"


def _envelope(scores: dict[tuple[str, str], list[float | None]], run_id: str = "run-1") -> ReportEnvelope:
    outcomes = [
        Outcome(
            task_key=task,
            model=model,
            sample=i,
            status="errored" if s is None else ("passed" if s >= 1 else "failed"),
            score=s,
            error=None if s is not None else f"boom {EVIL}",
        )
        for (task, model), values in scores.items()
        for i, s in enumerate(values)
    ]
    tasks = list(dict.fromkeys(t for t, _ in scores))
    models = list(dict.fromkeys(m for _, m in scores))
    return build_report(
        run_id=run_id,
        source=Source(kind="client"),
        suite_name="bundled",
        task_keys=tasks,
        models=models,
        k=2,
        outcomes=outcomes,
        created_at="2026-01-01T00:00:00Z",
    )


SCORES: dict[tuple[str, str], list[float | None]] = {
    ("orders", "local/scripted"): [1.0, 1.0],
    ("orders", "local/random"): [0.0, None],
    (EVIL, "local/scripted"): [1.0, 0.0],
    (EVIL, "local/random"): [0.0, 0.0],
}


def test_json_is_sorted_stable_and_round_trips() -> None:
    env = _envelope(SCORES)
    text = to_json(env)
    assert text == to_json(_envelope(SCORES))  # same input, same bytes
    data = json.loads(text)
    assert list(data) == sorted(data)
    assert data["version"] == 1 and data["run_id"] == "run-1"
    assert ReportEnvelope.model_validate(data) == env
    assert digest(env) == digest(data) == digest(ReportEnvelope.model_validate(data))
    assert canonical_json(data) == canonical_json(json.loads(canonical_json(data)))


def test_digest_changes_with_any_result() -> None:
    changed = dict(SCORES)
    changed[("orders", "local/random")] = [1.0, None]
    assert digest(_envelope(SCORES)) != digest(_envelope(changed))


def test_markdown_whole_report_escapes_user_strings() -> None:
    md = to_markdown(_envelope(SCORES))
    assert md.startswith("# Evaluation report: bundled\n")
    assert "<script>" not in md
    assert "&lt;script&gt;" in md
    assert "\\|\\*x\\*" in md  # a pipe cannot break the table
    assert "| local/scripted |" in md and "75.0%" in md  # 3 of 4 graded passed
    assert "Wilson" in md


def test_markdown_parts() -> None:
    env = _envelope(SCORES)
    verdict = to_markdown(env, part="verdict")
    assert verdict.startswith("## Verdict") and "Best by pass rate: local/scripted." in verdict
    fixes = to_markdown(env, part="fix_items", model="local/scripted")
    assert "local/random" not in fixes and "#1: failed" in fixes
    scenario = to_markdown(env, part="scenario", scenario="orders")
    assert scenario.startswith("## Scenario orders") and scenario.count("\n| local/") == 4
    with pytest.raises(UnknownPartError, match="part must be one of"):
        to_markdown(env, part="everything")
    with pytest.raises(UnknownPartError, match="model 'gpt'"):
        to_markdown(env, part="fix_items", model="gpt")
    with pytest.raises(UnknownPartError, match="scenario 'nope'"):
        to_markdown(env, part="scenario", scenario="nope")


def test_filenames_follow_run_and_part() -> None:
    assert filename("run-1", "md", "fix_items") == "run-1-fix-items.md"
    assert filename("run-1", "md", "verdict") == "run-1-verdict.md"
    assert filename("run-1", "md") == "run-1.md"
    assert filename("run-1", "html") == "run-1.html"
    assert filename("run-1", "json") == "run-1.json"


def test_html_is_self_contained_and_escaped() -> None:
    page = to_html(_envelope(SCORES))
    assert page.startswith("<!DOCTYPE html>")
    assert "<script" not in page.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "prefers-color-scheme: dark" in page
    assert "http://" not in page and "https://" not in page
    assert "default-src 'none'" in page
    assert "local/scripted" in page and "75.0%" in page


def test_run_id_must_be_filename_safe() -> None:
    with pytest.raises(ValueError, match="run_id"):
        _envelope(SCORES, run_id="../etc/passwd")


def test_comparison_lists_regressions_and_improvements() -> None:
    base = _envelope({("t", "m"): [1.0] * 2, ("u", "m"): [0.0] * 2, ("v", "m"): [1.0, 0.0]}, "base")
    head = _envelope({("t", "m"): [0.0] * 2, ("u", "m"): [1.0, 0.0], ("v", "m"): [1.0, 0.0]}, "head")
    result = compare(base, head)
    assert [(c.task_key, c.delta) for c in result.regressed] == [("t", -1.0)]
    assert [(c.task_key, c.delta) for c in result.improved] == [("u", 1.0)]
    # 2/2 vs 0/2: Wilson intervals [0.34, 1] and [0, 0.66] overlap, so not called significant
    assert result.regressed[0].outside_intervals is False
    md = result.to_markdown()
    assert "| m | t | regressed | 1.00 | 0.00 | -1.00 | no |" in md
    assert "| v |" not in md


def test_comparison_outside_intervals_with_many_samples() -> None:
    base = _envelope({("t", "m"): [1.0] * 20}, "base")
    head = _envelope({("t", "m"): [0.0] * 20}, "head")
    (change,) = compare(base, head).changes
    assert change.outside_intervals is True and change.direction == "regressed"


def _run_with_k(run_id: str, k: int, passes: dict[str, list[bool]]) -> ReportEnvelope:
    outcomes = [
        Outcome(
            task_key=task, model="m", sample=i, status="passed" if ok else "failed", score=1.0 if ok else 0.0
        )
        for task, results in passes.items()
        for i, ok in enumerate(results)
    ]
    return build_report(
        run_id=run_id,
        source=Source(kind="client"),
        suite_name="s",
        task_keys=list(passes),
        models=["m"],
        k=k,
        outcomes=outcomes,
    )


def test_comparison_across_different_k_uses_the_common_k_and_says_so() -> None:
    """Regression: runs of different k raised `ValueError: k differs` (a traceback in the CLI)."""
    base = _run_with_k("base", 3, {"t": [True, False, False], "u": [False, False, False]})
    head = _run_with_k("head", 2, {"t": [False, False], "u": [True, False]})
    result = compare(base, head)
    assert (result.k, result.base_k, result.head_k) == (2, 3, 2)
    assert result.note is not None and "compared on pass@2" in result.note
    t = next(c for c in result.changes if c.task_key == "t")
    assert t.base_pass_at_k == pytest.approx(2 / 3)  # pass@2 of 1 in 3: 1 - C(2,2)/C(3,2)
    assert (t.head_pass_at_k, t.direction) == (0.0, "regressed")
    u = next(c for c in result.changes if c.task_key == "u")
    assert (u.base_pass_at_k, u.head_pass_at_k, u.direction) == (0.0, 1.0, "improved")
    assert "compared on pass@2" in result.to_markdown() and "| base pass@2 |" in result.to_markdown()
    assert "compared on pass@2" in result.to_html()
    same = compare(head, head)
    assert same.note is None and same.k == 2


def test_model_summaries_carry_the_pass_at_k_curve_and_sampling() -> None:
    envelope = build_report(
        run_id="curve",
        source=Source(kind="client"),
        suite_name="s",
        task_keys=["t", "u"],
        models=["m"],
        k=3,
        outcomes=[
            Outcome(task_key="t", model="m", sample=i, status=s, score=1.0 if s == "passed" else 0.0)
            for i, s in enumerate(["passed", "failed", "failed"])
        ]
        + [Outcome(task_key="u", model="m", sample=0, status="passed", score=1.0)],
        endpoints={"m": "http://127.0.0.1:8000/v1"},
        sampling={"m": Sampling(temperature=0.7, extra_body={"top_k": 20})},
    )
    (summary,) = envelope.report.models
    # pass@1 over both tasks (t: 1/3, u: 1/1); pass@2 and pass@3 only over t, which has 3 graded
    assert summary.pass_at_k_curve == pytest.approx([(1 / 3 + 1) / 2, 2 / 3, 1.0])
    assert summary.pass_at_k == summary.pass_at_k_curve[-1]
    assert summary.endpoint == "http://127.0.0.1:8000/v1"
    md = to_markdown(envelope)
    assert "0.67 / 0.67 / 1.00" in md
    assert 'http://127.0.0.1:8000/v1; temperature 0.7, extra body {"top\\_k": 20}' in md


def test_failures_are_grouped_by_kind_with_feedback_examples_and_last_action() -> None:
    def failed(task: str, sample: int, **fields: object) -> Outcome:
        return Outcome(task_key=task, model="m", sample=sample, status="failed", score=0.0, **fields)  # type: ignore[arg-type]

    outcomes = [
        failed(
            "a",
            0,
            feedback="expected 6 pending orders, answer was None",
            last_action='list_orders({"x": 1})',
            transcript="transcripts/s1.json",
            session_id="s1",
        ),
        failed("b", 0, feedback="expected 6 pending orders, answer was None", session_id="s2"),
        failed("c", 0, done_reason="max_steps", feedback="not done"),
        failed("d", 0, last_tool_error="get_order(): no such order", tool_errors=2),
        failed("e", 0),
        Outcome(
            task_key="f",
            model="m",
            sample=0,
            status="errored",
            error="PolicyError: model endpoint answered 500",
            error_kind="model",
        ),
        Outcome(
            task_key="g",
            model="m",
            sample=0,
            status="errored",
            error="verifier timed out",
            error_kind="verifier",
        ),
        Outcome(
            task_key="h",
            model="m",
            sample=0,
            status="errored",
            error="MCPError: boom",
            error_kind="infrastructure",
        ),
    ]
    envelope = build_report(
        run_id="groups",
        source=Source(kind="client"),
        suite_name="s",
        task_keys=list("abcdefgh"),
        models=["m"],
        k=1,
        outcomes=outcomes,
    )
    groups = {(g.kind, g.reason): g for g in envelope.report.failure_groups}
    feedback = groups[("verifier_feedback", "expected 6 pending orders, answer was None")]
    assert feedback.count == 2 and feedback.task_keys == ["a", "b"]
    assert [e.transcript for e in feedback.examples] == [
        "transcripts/s1.json",
        None,
    ]  # with a transcript first
    assert set(groups) == {
        ("verifier_feedback", "expected 6 pending orders, answer was None"),
        ("step_budget", "used every step of the budget"),
        ("tool_errors", "get_order(): no such order"),
        ("below_threshold", "score below 1"),
        ("model_error", "PolicyError: model endpoint answered 500"),
        ("not_graded", "verifier timed out"),
        ("infrastructure_error", "MCPError: boom"),
    }
    page = to_html(envelope, transcript_base="../run/")
    assert '<a href="../run/transcripts/s1.json">a #0</a>' in page  # the example links its transcript
    assert "<code>list_orders({&quot;x&quot;: 1})</code>" in page  # the fix item's last action
    fix = to_markdown(envelope, part="fix_items", transcript_base="")
    assert (
        "- a / m \\#0: failed: expected 6 pending orders, answer was None; last action: "
        'list\\_orders({"x": 1}) ([transcript](<transcripts/s1.json>))'
    ) in fix
    assert "transcripts/s1.json" not in to_html(envelope)  # no base: no links, the session is named


@pytest.mark.parametrize("theme", ["light", "dark", "auto"])
def test_html_themes_and_charts(theme: str) -> None:
    envelope = _envelope(SCORES)
    page = to_html(envelope, theme=theme)  # type: ignore[arg-type]
    assert f'data-theme="{theme}"' in page
    assert ("@media (prefers-color-scheme: dark)" in page) == (theme == "auto")
    assert page.count('<svg class="chart"') == 3 and "<script" not in page  # the task's script is text
    assert (
        'data-chart="pass-rate"' in page and 'data-chart="pass-at-k"' in page and 'data-chart="grid"' in page
    )
    assert page == to_html(envelope, theme=theme)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="theme"):
        to_html(envelope, theme="sepia")  # type: ignore[arg-type]
