"""The report never hides what was not graded or not compared: the HTML grid marks a task whose
samples errored (never an all-green cell), and ``--compare`` names the models only one run has."""

from __future__ import annotations

import re

from fleet_sdk.reports import Outcome, ReportEnvelope, Source, build_report, compare, to_html


def _report(run_id: str, models: list[str], statuses: dict[str, list[str]], k: int = 2) -> ReportEnvelope:
    outcomes = [
        Outcome(
            task_key="t",
            model=model,
            sample=sample,
            status=status,  # type: ignore[arg-type]
            score={"passed": 1.0, "failed": 0.0}.get(status),
            error="PolicyError: the endpoint answered 500" if status == "errored" else None,
        )
        for model in models
        for sample, status in enumerate(statuses[model])
    ]
    return build_report(
        run_id=run_id,
        source=Source(kind="client"),
        suite_name="suite",
        task_keys=["t"],
        models=models,
        k=k,
        outcomes=outcomes,
    )


def test_the_grid_marks_a_task_with_an_errored_sample_apart_from_a_passing_one() -> None:
    """Regression: a task with one passed and one errored sample of k=2 was a green `1/1` cell."""
    page = to_html(_report("grid", ["m", "ok"], {"m": ["passed", "errored"], "ok": ["passed", "passed"]}))
    cells = re.findall(r'<rect class="cell (\w+)"[^>]*><title>([^<]*)</title>', page)
    by_model = {title.split(":")[0].split(" / ")[1]: (shade, title) for shade, title in cells}
    assert by_model["m"] == ("ge", "t / m: 1/1 passed, 1 errored")
    assert by_model["ok"] == ("g4", "t / ok: 2/2 passed")
    assert ">1/1 +1 err</text>" in page
    assert "svg.chart .cell.ge { fill: var(--ge); }" in page


def test_compare_names_the_models_only_one_run_has() -> None:
    """Regression: comparing runs that share one model said `No task changed` and nothing of the
    models that were not compared."""
    base = _report("base", ["a", "b"], {"a": ["passed", "passed"], "b": ["failed", "failed"]})
    head = _report("head", ["a", "c"], {"a": ["passed", "passed"], "c": ["passed", "passed"]})
    comparison = compare(base, head)
    assert (comparison.only_base_models, comparison.only_head_models) == (["b"], ["c"])
    text = comparison.to_markdown()
    assert "Models not compared, only in the base run: b; only in the head run: c." in text
    assert "No task changed its pass@k under the models both runs have (a)." in text
    page = comparison.to_html()
    assert "only in the base run: b" in page and "No task changed its pass@k under the models" in page
    same = compare(base, base).to_markdown()
    assert "Models not compared" not in same and "No task changed its pass@k." in same
