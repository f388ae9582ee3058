"""One report, three renderings: canonical JSON, GitHub-flavoured Markdown and a self-contained HTML page.

Every rendering is a pure function of the envelope (no clock, no environment), so rendering the
same run twice gives the same bytes. User strings (task keys, model names, errors) are escaped
for the format they land in: Markdown table syntax and inline HTML are neutralised, and the HTML
page escapes every string and carries a Content-Security-Policy that forbids scripts and any
fetch, so the page can be opened from anywhere.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable, Sequence
from typing import Literal

from .._exceptions import FleetError
from ._model import ModelSummary, Outcome, ReportEnvelope

__all__ = [
    "MARKDOWN_PARTS",
    "UnknownPartError",
    "filename",
    "render",
    "to_html",
    "to_json",
    "to_markdown",
]

Format = Literal["json", "md", "html"]
Part = Literal["verdict", "fix_items", "scenario"]
MARKDOWN_PARTS: tuple[Part, ...] = ("verdict", "fix_items", "scenario")


class UnknownPartError(FleetError, ValueError):
    """A Markdown part, model or scenario the report does not have."""


def to_json(envelope: ReportEnvelope) -> str:
    """The envelope as JSON: sorted keys, two-space indent, a final newline."""
    data = envelope.to_dict()
    return json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def filename(run_id: str, fmt: Format, part: str | None = None) -> str:
    """The download name: ``<run>.json``, ``<run>.html``, ``<run>.md`` or ``<run>-<part>.md``.

    Args:
        run_id: The run.
        fmt: ``json``, ``md`` or ``html``.
        part: A Markdown part (``fix_items`` becomes ``fix-items``).
    """
    if part and fmt == "md":
        return f"{run_id}-{part.replace('_', '-')}.md"
    return f"{run_id}.{fmt}"


# --- shared text -------------------------------------------------------------------------------


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def _num(value: float | None, digits: int = 2) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _duration(ms: float | None) -> str:
    return "n/a" if ms is None else f"{ms / 1000:.1f}s"


def _rate_with_interval(summary: ModelSummary) -> str:
    interval = summary.pass_rate_interval
    if summary.pass_rate is None or interval is None:
        return "n/a"
    return f"{_pct(summary.pass_rate)} [{_pct(interval.low)}, {_pct(interval.high)}]"


def _method_note(envelope: ReportEnvelope) -> str:
    report = envelope.report
    return (
        f"Pass rates count graded sessions only (errored ones are left out); intervals are "
        f"{round(100 * report.confidence)}% Wilson score intervals. pass@{report.k} is the unbiased "
        f"estimator averaged over tasks with at least {report.k} graded samples. A session passes "
        f"at score >= {report.pass_threshold:g}."
    )


def _cell(envelope: ReportEnvelope, task_key: str, model: str) -> str:
    for row in envelope.report.tasks:
        if row.task_key == task_key and row.model == model:
            text = f"{row.passed}/{row.graded}"
            if row.samples != row.graded:
                text += f" ({row.samples - row.graded} not graded)"
            if row.pass_at_k is not None:
                text += f", pass@{envelope.report.k} {_num(row.pass_at_k)}"
            return text
    return "-"


def _verdict_text(envelope: ReportEnvelope) -> str:
    verdict = envelope.report.verdict
    if verdict is None:
        return "No verdict: a single model has nothing to be ranked against."
    if verdict.winner is None:
        return f"No single best model by {verdict.basis}: the top models tie."
    return f"Best by {verdict.basis}: {verdict.winner}."


def _failures(envelope: ReportEnvelope, model: str | None) -> list[Outcome]:
    return [
        r
        for r in envelope.report.results
        if r.status in ("failed", "errored") and (model is None or r.model == model)
    ]


def _check_model(envelope: ReportEnvelope, model: str | None) -> None:
    if model is not None and model not in envelope.suite.models:
        raise UnknownPartError(f"model {model!r} is not in this report (models: {envelope.suite.models})")


def _check_scenario(envelope: ReportEnvelope, scenario: str | None) -> str:
    if not scenario:
        raise UnknownPartError("the scenario part needs scenario= (a task key)")
    if scenario not in envelope.suite.task_keys:
        raise UnknownPartError(f"scenario {scenario!r} is not a task of this report")
    return scenario


# --- Markdown ----------------------------------------------------------------------------------

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|#])")


def _md(text: object) -> str:
    """Inline Markdown text: table and emphasis syntax escaped, inline HTML made inert, one line."""
    value = " ".join(str(text).split())
    value = _MD_SPECIAL.sub(r"\\\1", value)
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _md_verdict(envelope: ReportEnvelope) -> list[str]:
    lines = ["## Verdict", "", _md(_verdict_text(envelope))]
    verdict = envelope.report.verdict
    if verdict is not None:
        lines.append("")
        lines += _md_table(
            ["rank", "model", "pass rate", "mean score"],
            [
                [str(i), _md(e.model), _pct(e.pass_rate), _num(e.avg_score)]
                for i, e in enumerate(verdict.ranking, 1)
            ],
        )
    return lines


def _md_models(envelope: ReportEnvelope) -> list[str]:
    k = envelope.report.k
    rows = [
        [
            _md(s.model),
            str(s.sessions),
            str(s.passed),
            str(s.failed),
            str(s.errored),
            str(s.pending),
            _rate_with_interval(s),
            _num(s.pass_at_k),
            _num(s.avg_score),
            _duration(s.avg_duration_ms),
        ]
        for s in envelope.report.models
    ]
    headers = ["model", "sessions", "passed", "failed", "errored", "pending", "pass rate (CI)"]
    headers += [f"pass@{k}", "mean score", "mean duration"]
    return ["## Models", "", *_md_table(headers, rows), "", _md(_method_note(envelope))]


def _md_matrix(envelope: ReportEnvelope, task_keys: Sequence[str]) -> list[str]:
    models = envelope.suite.models
    rows = [[_md(key), *(_md(_cell(envelope, key, m)) for m in models)] for key in task_keys]
    return _md_table(["task", *(_md(m) for m in models)], rows)


def _md_fix_items(envelope: ReportEnvelope, model: str | None) -> list[str]:
    title = "## Fix items" + (f" for {_md(model)}" if model else "")
    failures = _failures(envelope, model)
    if not failures:
        return [title, "", "Nothing to fix: every graded session passed."]
    lines = [title, ""]
    for r in failures:
        reason = r.error or ("not graded" if r.status == "errored" else f"score {_num(r.score)}")
        lines.append(f"- {_md(r.task_key)} / {_md(r.model)} #{r.sample}: {r.status}: {_md(reason)}")
    return lines


def _md_failure_groups(envelope: ReportEnvelope) -> list[str]:
    groups = envelope.report.failure_groups
    if not groups:
        return ["## Failures", "", "No failures."]
    rows = [
        [_md(g.reason), g.status, str(g.count), _md(", ".join(g.models)), _md(", ".join(g.task_keys))]
        for g in groups
    ]
    return ["## Failures", "", *_md_table(["reason", "status", "count", "models", "tasks"], rows)]


def _md_scenario(envelope: ReportEnvelope, scenario: str) -> list[str]:
    lines = [f"## Scenario {_md(scenario)}", ""]
    rows = [
        [_md(r.model), str(r.sample), r.status, _num(r.score), _md(r.session_id or "-"), _md(r.error or "")]
        for r in envelope.report.results
        if r.task_key == scenario
    ]
    return lines + _md_table(["model", "sample", "status", "score", "session", "error"], rows)


def to_markdown(
    envelope: ReportEnvelope,
    *,
    part: str | None = None,
    model: str | None = None,
    scenario: str | None = None,
) -> str:
    """The report as Markdown: the whole of it, or one part.

    Args:
        envelope: The report.
        part: None for the whole report, or ``verdict``, ``fix_items`` (narrowed by ``model``) or
            ``scenario`` (the task named by ``scenario``).
        model: With ``fix_items``, only this model's failures.
        scenario: With ``scenario``, the task key.

    Raises:
        UnknownPartError: An unknown part, or a model or scenario the report does not have.
    """
    if part == "verdict":
        lines = _md_verdict(envelope)
    elif part == "fix_items":
        _check_model(envelope, model)
        lines = _md_fix_items(envelope, model)
    elif part == "scenario":
        lines = _md_scenario(envelope, _check_scenario(envelope, scenario))
    elif part is None:
        report = envelope.report
        lines = [
            f"# Evaluation report: {_md(envelope.suite.name)}",
            "",
            f"Run {_md(envelope.run_id)} ({envelope.source.kind}"
            + (f", job {_md(envelope.source.job_id)}" if envelope.source.job_id else "")
            + f"), k={report.k}, {len(envelope.suite.task_keys)} tasks, "
            + f"{len(envelope.suite.models)} models"
            + ("" if report.complete else ", INCOMPLETE (pending sessions)")
            + (f", started {_md(report.created_at)}" if report.created_at else "")
            + ".",
            "",
            *_md_verdict(envelope),
            "",
            *_md_models(envelope),
            "",
            "## Tasks",
            "",
            *_md_matrix(envelope, envelope.suite.task_keys),
            "",
            *_md_failure_groups(envelope),
            "",
            *_md_fix_items(envelope, None),
        ]
    else:
        raise UnknownPartError(f"part must be one of {', '.join(MARKDOWN_PARTS)}, got {part!r}")
    return "\n".join(lines) + "\n"


# --- HTML --------------------------------------------------------------------------------------

_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; base-uri 'none'; form-action 'none'"
_STYLE = """
:root { color-scheme: light dark; --fg: #1d1d1f; --bg: #ffffff; --muted: #666; --line: #ddd;
  --head: #f3f3f5; --pass: #1a7f37; --fail: #cf222e; --err: #9a6700; --bar: #d0e8d5; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e8e8e8; --bg: #161618; --muted: #aaa; --line: #333; --head: #222226;
    --pass: #3fb950; --fail: #f85149; --err: #d29922; --bar: #1f3d27; }
}
body { font-family: system-ui, sans-serif; color: var(--fg); background: var(--bg); margin: 2rem; }
h1 { margin-bottom: .2rem; } .meta, .note { color: var(--muted); }
table { border-collapse: collapse; margin: .5rem 0 1.5rem; font-size: .9rem; }
th, td { border: 1px solid var(--line); padding: .3rem .6rem; text-align: left; vertical-align: top; }
th { background: var(--head); } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.passed { color: var(--pass); } .failed { color: var(--fail); } .errored, .pending { color: var(--err); }
.verdict { font-size: 1.1rem; font-weight: 600; }
"""


def _h(text: object) -> str:
    return html.escape(str(text), quote=True)


def _html_table(headers: Sequence[str], rows: Sequence[Sequence[str]], numeric: frozenset[int]) -> str:
    head = "".join(f"<th>{_h(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>" for i, c in enumerate(row))
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def to_html(envelope: ReportEnvelope) -> str:
    """The report as one self-contained HTML page (inline CSS, no scripts, no external fetches).

    Args:
        envelope: The report.
    """
    report = envelope.report
    k = report.k
    models_rows = [
        [
            _h(s.model),
            str(s.sessions),
            str(s.passed),
            str(s.failed),
            str(s.errored),
            str(s.pending),
            _h(_rate_with_interval(s)),
            _num(s.pass_at_k),
            _num(s.avg_score),
            _duration(s.avg_duration_ms),
        ]
        for s in report.models
    ]
    headers = ["model", "sessions", "passed", "failed", "errored", "pending", "pass rate (CI)"]
    models_table = _html_table(
        [*headers, f"pass@{k}", "mean score", "mean duration"],
        models_rows,
        frozenset(range(1, 10)),
    )
    matrix = _html_table(
        ["task", *envelope.suite.models],
        [
            [_h(key), *(_h(_cell(envelope, key, m)) for m in envelope.suite.models)]
            for key in envelope.suite.task_keys
        ],
        frozenset(),
    )
    verdict_rows = (
        [
            [str(i), _h(e.model), _pct(e.pass_rate), _num(e.avg_score)]
            for i, e in enumerate(report.verdict.ranking, 1)
        ]
        if report.verdict
        else []
    )
    verdict_table = (
        _html_table(["rank", "model", "pass rate", "mean score"], verdict_rows, frozenset({0, 2, 3}))
        if verdict_rows
        else ""
    )
    groups = (
        _html_table(
            ["reason", "status", "count", "models", "tasks"],
            [
                [
                    _h(g.reason),
                    f'<span class="{g.status}">{g.status}</span>',
                    str(g.count),
                    _h(", ".join(g.models)),
                    _h(", ".join(g.task_keys)),
                ]
                for g in report.failure_groups
            ],
            frozenset({2}),
        )
        if report.failure_groups
        else "<p>No failures.</p>"
    )
    results = _html_table(
        ["task", "model", "sample", "status", "score", "session", "error"],
        [
            [
                _h(r.task_key),
                _h(r.model),
                str(r.sample),
                f'<span class="{r.status}">{r.status}</span>',
                _num(r.score),
                _h(r.session_id or "-"),
                _h(r.error or ""),
            ]
            for r in report.results
        ],
        frozenset({2, 4}),
    )
    source = envelope.source.kind + (f", job {envelope.source.job_id}" if envelope.source.job_id else "")
    meta = f"Run {envelope.run_id} ({source}), k={k}, {len(envelope.suite.task_keys)} tasks"
    if not report.complete:
        meta += ", INCOMPLETE (pending sessions)"
    if report.created_at:
        meta += f", started {report.created_at}"
    title = f"Evaluation report: {envelope.suite.name}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="color-scheme" content="light dark">',
        f"<title>{_h(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{_h(title)}</h1>",
        f'<p class="meta">{_h(meta)}</p>',
        f'<h2>Verdict</h2><p class="verdict">{_h(_verdict_text(envelope))}</p>{verdict_table}',
        f'<h2>Models</h2>{models_table}<p class="note">{_h(_method_note(envelope))}</p>',
        f"<h2>Tasks</h2>{matrix}",
        f"<h2>Failures</h2>{groups}",
        f"<h2>Sessions</h2>{results}",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


_RENDERERS: dict[str, Callable[[ReportEnvelope], str]] = {"json": to_json, "md": to_markdown, "html": to_html}


def render(envelope: ReportEnvelope, fmt: str) -> str:
    """The report in ``fmt`` (``json``, ``md`` or ``html``).

    Raises:
        ValueError: An unknown format.
    """
    renderer = _RENDERERS.get(fmt)
    if renderer is None:
        raise ValueError(f"format must be one of json, md, html, got {fmt!r}")
    return renderer(envelope)
