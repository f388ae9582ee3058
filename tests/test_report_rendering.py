"""The report's JSON, Markdown and HTML renderings, file names and the comparison of two runs."""

from __future__ import annotations

import json

import pytest

from fleet_sdk.reports import (
    Outcome,
    ReportEnvelope,
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
