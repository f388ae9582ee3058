"""The HTML report as a person sees it: rendered by a real headless Chromium (the Debian package).

Playwright drives ``/usr/bin/chromium`` (never a downloaded browser). The page must load with no
console errors, show the model names and their pass rates, and show a task name holding
``<script>`` as text, never run it. Its SVG charts must draw (no blank chart, bars as wide as
the pass rates), in the light and the dark theme, and its failure groups must list what the
verifier said, with links that open the transcripts beside the page.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from playwright import sync_api

from fleet_sdk._png import is_blank_png
from fleet_sdk.reports import Outcome, ReportEnvelope, Sampling, Source, build_report, to_html

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
EVIL_TASK = '<script>document.title="pwned"; console.error("ran")</script>'


def test_report_page_renders_in_chromium(tmp_path: Path) -> None:
    assert Path(CHROMIUM).exists(), "install the Debian chromium package (.ci/run does)"
    outcomes = [
        Outcome(task_key=task, model=model, sample=i, status=status, score=score)
        for task in ("orders-refund", EVIL_TASK)
        for model, status, score in (("local/scripted", "passed", 1.0), ("local/random", "failed", 0.0))
        for i in range(2)
    ]
    envelope = build_report(
        run_id="chromium-1",
        source=Source(kind="client"),
        suite_name="browser check",
        task_keys=["orders-refund", EVIL_TASK],
        models=["local/scripted", "local/random"],
        k=2,
        outcomes=outcomes,
        created_at="2026-01-01T00:00:00Z",
    )
    page_path = tmp_path / "report.html"
    page_path.write_text(to_html(envelope), encoding="utf-8")

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            page = browser.new_page()
            console: list[str] = []
            page.on("console", lambda message: console.append(f"{message.type}: {message.text}"))
            page.on("pageerror", lambda error: console.append(f"pageerror: {error}"))
            requests: list[str] = []
            page.on("request", lambda request: requests.append(request.url))
            response = page.goto(page_path.as_uri())
            assert response is not None and response.ok
            page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
            text = page.inner_text("body")
            title = page.title()
        finally:
            browser.close()

    assert (tmp_path / "report.png").stat().st_size > 10_000
    assert console == []  # no console errors (nor any message: the page has no scripts)
    assert requests == [page_path.as_uri()]  # nothing fetched but the page itself
    assert title == "Evaluation report: browser check"  # the task's script never ran
    for model in ("local/scripted", "local/random"):
        assert model in text
    assert "100.0% [" in text and "0.0% [" in text  # pass rates with their intervals
    assert EVIL_TASK in text  # shown as text


FEEDBACK = "expected 6 pending orders, answer was None"


def _report_with_failures() -> ReportEnvelope:
    """Two models, k=3: one passes 5 of 6, the other fails with the verifier's feedback."""
    outcomes = []
    for task in ("orderdesk-count-pending-orders", "calendar-count-tuesday-meetings"):
        for sample in range(3):
            ok = not (task.startswith("calendar") and sample == 2)
            outcomes.append(
                Outcome(
                    task_key=task,
                    model="fake-gpt",
                    sample=sample,
                    status="passed" if ok else "failed",
                    score=1.0 if ok else 0.0,
                    session_id=f"sess_a{sample}{task[0]}",
                    feedback=None if ok else "expected 4 meetings, answer was 3",
                )
            )
            outcomes.append(
                Outcome(
                    task_key=task,
                    model="local/random",
                    sample=sample,
                    status="failed",
                    score=0.0,
                    session_id=f"sess_b{sample}{task[0]}",
                    feedback=FEEDBACK if task.startswith("order") else None,
                    done_reason=None if task.startswith("order") else "max_steps",
                    last_action='list_orders({"status": "pending"})',
                    transcript=f"transcripts/sess_b{sample}{task[0]}.json",
                )
            )
    return build_report(
        run_id="charts-1",
        source=Source(kind="client"),
        suite_name="charts",
        task_keys=["orderdesk-count-pending-orders", "calendar-count-tuesday-meetings"],
        models=["fake-gpt", "local/random"],
        k=3,
        outcomes=outcomes,
        created_at="2026-01-01T00:00:00Z",
        endpoints={"fake-gpt": "http://127.0.0.1:8000/v1"},
        sampling={"fake-gpt": Sampling(temperature=0.7, seed=7)},
    )


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_report_charts_render_and_failures_show_the_verifier_feedback(tmp_path: Path, theme: str) -> None:
    envelope = _report_with_failures()
    page_path = tmp_path / "charts-1.html"
    page_path.write_text(to_html(envelope, theme=theme, transcript_base=""), encoding="utf-8")  # type: ignore[arg-type]
    (tmp_path / "transcripts").mkdir()
    for result in envelope.report.results:
        if result.transcript:
            (tmp_path / result.transcript).write_text('{"transcript": []}', encoding="utf-8")

    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            errors: list[str] = []
            page.on("console", lambda message: errors.append(f"{message.type}: {message.text}"))
            page.on("pageerror", lambda error: errors.append(f"pageerror: {error}"))
            response = page.goto(page_path.as_uri())
            assert response is not None and response.ok
            page.screenshot(path=str(tmp_path / f"report-{theme}.png"), full_page=True)
            charts = {}
            for name in ("pass-rate", "pass-at-k", "grid"):
                chart = page.locator(f'svg[data-chart="{name}"]')
                box = chart.bounding_box()
                assert box is not None and box["width"] > 200 and box["height"] > 40, (name, box)
                charts[name] = chart.screenshot()
            bars = page.locator('svg[data-chart="pass-rate"] rect.bar')
            bar_widths = [bars.nth(i).bounding_box()["width"] for i in range(bars.count())]  # type: ignore[index]
            track = page.locator('svg[data-chart="pass-rate"] rect.track').first.bounding_box()
            lines = page.locator('svg[data-chart="pass-at-k"] polyline').count()
            cells = page.locator('svg[data-chart="grid"] rect.cell').count()
            failures = page.inner_text("#failures + table")
            fix_items = page.inner_text("#fix-items + table")
            link = page.locator("#failures + table a").first
            href = link.get_attribute("href")
            link.click()
            page.wait_for_load_state()
            landed = page.url
        finally:
            browser.close()

    assert errors == []
    for name, png in charts.items():
        assert not is_blank_png(png), f"the {name} chart rendered blank"
    # bars in proportion to the pass rates: 5/6 for fake-gpt; local/random passed nothing (no width)
    assert track is not None and len(bar_widths) == 2
    assert bar_widths[0] == pytest.approx(track["width"] * 5 / 6, abs=2) and bar_widths[1] == 0
    assert lines == 2 and cells == 4  # a pass@k line per model, a cell per task and model
    assert (
        FEEDBACK in failures and "step budget" in failures and "expected 4 meetings, answer was 3" in failures
    )
    assert FEEDBACK in fix_items and 'list_orders({"status": "pending"})' in fix_items
    assert href is not None and href.startswith("transcripts/") and landed == (tmp_path / href).as_uri()
