"""The HTML report's charts: inline SVG, drawn from the envelope alone, coloured by CSS classes.

Three pictures: each model's pass rate with its Wilson interval, pass@j for j = 1..k per model,
and a task x model grid shaded by pass rate. They are plain SVG markup in the page (no script,
no fetch, so the page's Content-Security-Policy still forbids both) whose colours come from the
page's stylesheet (``.s0``...``.s5`` per model, ``.g0``...``.g4`` per grid shade, ``.ge`` for a
cell with samples not graded), so a theme recolours them. Coordinates are rounded to one decimal,
so the same report draws the same bytes.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Sequence

from ._model import ReportEnvelope, TaskSummary

__all__ = ["SERIES", "grid_chart", "pass_at_k_chart", "pass_rate_chart"]

SERIES = 6
"""Distinct model colours (``.s0``...``.s5``); later models reuse them in turn."""

_WIDTH = 720
_LABEL = 200  # width of the label column


def _h(text: object) -> str:
    return html.escape(str(text), quote=True)


def _n(value: float) -> str:
    """A coordinate: one decimal, no trailing ``.0``."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"


def _svg(name: str, width: float, height: float, title: str, body: Sequence[str]) -> str:
    return (
        f'<svg class="chart" data-chart="{name}" role="img" aria-label="{_h(title)}" '
        f'width="{_n(width)}" height="{_n(height)}" viewBox="0 0 {_n(width)} {_n(height)}">'
        f"<title>{_h(title)}</title>{''.join(body)}</svg>"
    )


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def pass_rate_chart(envelope: ReportEnvelope) -> str:
    """Each model's pass rate as a bar, its Wilson interval as a whisker, the numbers beside it.

    Args:
        envelope: The report.
    """
    row, top, plot = 30, 10, 300.0
    left = _LABEL + 10
    models = envelope.report.models
    height = top + row * len(models) + 24
    body: list[str] = []
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        x = left + plot * tick
        body.append(f'<line class="grid" x1="{_n(x)}" y1="{top}" x2="{_n(x)}" y2="{_n(height - 20)}"/>')
        body.append(
            f'<text class="axis" x="{_n(x)}" y="{_n(height - 6)}" text-anchor="middle">'
            f"{int(100 * tick)}%</text>"
        )
    for index, summary in enumerate(models):
        y = top + row * index
        middle = y + row / 2
        series = f"s{index % SERIES}"
        body.append(
            f'<text class="label" x="{_LABEL}" y="{_n(middle + 4)}" text-anchor="end">'
            f"<title>{_h(summary.model)}</title>{_h(_short(summary.model, 28))}</text>"
        )
        body.append(
            f'<rect class="track" x="{left}" y="{_n(y + 6)}" width="{_n(plot)}" height="{row - 12}"/>'
        )
        interval = summary.pass_rate_interval
        if summary.pass_rate is None or interval is None:
            body.append(f'<text class="value" x="{_n(left + plot + 10)}" y="{_n(middle + 4)}">n/a</text>')
            continue
        body.append(
            f'<rect class="bar {series}" x="{left}" y="{_n(y + 6)}" '
            f'width="{_n(plot * summary.pass_rate)}" height="{row - 12}">'
            f"<title>{_h(summary.model)}: {_pct(summary.pass_rate)}</title></rect>"
        )
        low, high = left + plot * interval.low, left + plot * interval.high
        body.append(
            f'<line class="whisker" x1="{_n(low)}" y1="{_n(middle)}" x2="{_n(high)}" y2="{_n(middle)}"/>'
        )
        for x in (low, high):
            body.append(
                f'<line class="whisker" x1="{_n(x)}" y1="{_n(y + 3)}" x2="{_n(x)}" y2="{_n(y + row - 3)}"/>'
            )
        text = f"{_pct(summary.pass_rate)} [{_pct(interval.low)}, {_pct(interval.high)}]"
        body.append(f'<text class="value" x="{_n(left + plot + 10)}" y="{_n(middle + 4)}">{text}</text>')
    return _svg("pass-rate", _WIDTH, height, "Pass rate per model, with its 95% interval", body)


def pass_at_k_chart(envelope: ReportEnvelope) -> str:
    """pass@j for j = 1..k, one line per model, with a legend.

    Args:
        envelope: The report.
    """
    k = envelope.report.k
    models = envelope.report.models
    left, right, top, plot_h = 50.0, 480.0, 14.0, 200.0
    height = max(top + plot_h + 34, 20.0 + 20 * len(models))
    bottom = top + plot_h
    body: list[str] = []
    for tick in (0.0, 0.25, 0.5, 0.75, 1.0):
        y = bottom - plot_h * tick
        body.append(f'<line class="grid" x1="{_n(left)}" y1="{_n(y)}" x2="{_n(right)}" y2="{_n(y)}"/>')
        body.append(
            f'<text class="axis" x="{_n(left - 6)}" y="{_n(y + 4)}" text-anchor="end">{tick:.2f}</text>'
        )

    def x_of(j: int) -> float:
        return (left + right) / 2 if k == 1 else left + 10 + (right - left - 20) * (j - 1) / (k - 1)

    for j in range(1, k + 1):
        body.append(
            f'<text class="axis" x="{_n(x_of(j))}" y="{_n(bottom + 16)}" text-anchor="middle">{j}</text>'
        )
    body.append(
        f'<text class="axis" x="{_n((left + right) / 2)}" y="{_n(bottom + 30)}" text-anchor="middle">k</text>'
    )
    for index, summary in enumerate(models):
        series = f"s{index % SERIES}"
        points = [(j, value) for j, value in enumerate(summary.pass_at_k_curve, 1) if value is not None]
        coords = [(x_of(j), bottom - plot_h * value) for j, value in points]
        if len(coords) > 1:
            path = " ".join(f"{_n(x)},{_n(y)}" for x, y in coords)
            body.append(f'<polyline class="line {series}" points="{path}"/>')
        for (j, value), (x, y) in zip(points, coords, strict=True):
            body.append(
                f'<circle class="dot {series}" cx="{_n(x)}" cy="{_n(y)}" r="4">'
                f"<title>{_h(summary.model)}: pass@{j} {value:.2f}</title></circle>"
            )
        legend_y = top + 20 * index
        body.append(
            f'<rect class="key {series}" x="{_n(right + 20)}" y="{_n(legend_y)}" width="12" height="12"/>'
        )
        body.append(
            f'<text class="label" x="{_n(right + 38)}" y="{_n(legend_y + 10)}">'
            f"<title>{_h(summary.model)}</title>{_h(_short(summary.model, 26))}</text>"
        )
    return _svg("pass-at-k", _WIDTH, height, f"pass@k for k = 1..{k} per model", body)


def _shade(row: TaskSummary | None, ungraded: int = 0) -> str:
    if ungraded and (row is None or row.pass_rate is None or row.pass_rate >= 1.0):
        return "ge"  # never all green while a sample errored or waits: its own colour
    if row is None or row.pass_rate is None:
        return "gn"
    if row.pass_rate >= 1.0:
        return "g4"
    if row.pass_rate <= 0.0:
        return "g0"
    return "g1" if row.pass_rate < 1 / 3 else "g2" if row.pass_rate < 2 / 3 else "g3"


def grid_chart(envelope: ReportEnvelope) -> str:
    """Tasks down, models across; each cell shaded by pass rate and labelled ``passed/graded``,
    with ``+N err`` (or ``+N pend``) for the samples that were not graded, which shade the cell
    apart so that a task is never shown all green while one of its samples errored.

    Args:
        envelope: The report.
    """
    models = envelope.suite.models
    keys = envelope.suite.task_keys
    rows = {(t.task_key, t.model): t for t in envelope.report.tasks}
    errored: Counter[tuple[str, str]] = Counter()
    pending: Counter[tuple[str, str]] = Counter()
    for result in envelope.report.results:
        if result.status == "errored":
            errored[(result.task_key, result.model)] += 1
        elif result.status == "pending":
            pending[(result.task_key, result.model)] += 1
    label, cell_w, cell_h, head = 260, 90, 20, 24
    width = label + 10 + cell_w * len(models)
    height = head + cell_h * len(keys) + 4
    body: list[str] = []
    for column, model in enumerate(models):
        x = label + 10 + cell_w * column + cell_w / 2
        body.append(
            f'<text class="label" x="{_n(x)}" y="16" text-anchor="middle">'
            f"<title>{_h(model)}</title>{_h(_short(model, 12))}</text>"
        )
    for line, key in enumerate(keys):
        y = head + cell_h * line
        body.append(
            f'<text class="label" x="{label}" y="{_n(y + 14)}" text-anchor="end">'
            f"<title>{_h(key)}</title>{_h(_short(key, 40))}</text>"
        )
        for column, model in enumerate(models):
            row = rows.get((key, model))
            x = label + 10 + cell_w * column
            text = "-" if row is None else f"{row.passed}/{row.graded}"
            tip = f"{key} / {model}: {text} passed"
            err, pend = errored[(key, model)], pending[(key, model)]
            if err:
                text, tip = f"{text} +{err} err", f"{tip}, {err} errored"
            if pend:
                text, tip = (text if err else f"{text} +{pend} pend"), f"{tip}, {pend} pending"
            body.append(
                f'<rect class="cell {_shade(row, err + pend)}" x="{x}" y="{y}" '
                f'width="{cell_w - 2}" height="{cell_h - 2}">'
                f"<title>{_h(tip)}</title></rect>"
                f'<text class="cell-text" x="{_n(x + cell_w / 2 - 1)}" y="{_n(y + 13)}" '
                f'text-anchor="middle">{_h(text)}</text>'
            )
    return _svg("grid", width, height, "Tasks x models, shaded by pass rate", body)
