"""The HTML report as a person sees it: rendered by a real headless Chromium (the Debian package).

Playwright drives ``/usr/bin/chromium`` (never a downloaded browser). The page must load with no
console errors, show the model names and their pass rates, and show a task name holding
``<script>`` as text, never run it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from playwright import sync_api

from fleet_sdk.reports import Outcome, Source, build_report, to_html

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
