"""One report, three renderings: canonical JSON, GitHub-flavoured Markdown and a self-contained HTML page.

Every rendering is a pure function of the envelope and its options (no clock, no environment),
so rendering the same run twice gives the same bytes. User strings (task keys, model names,
errors, verifier feedback) are escaped for the format they land in: Markdown table syntax and
inline HTML are neutralised, and the HTML page escapes every string and carries a
Content-Security-Policy that forbids scripts and any fetch, so the page can be opened from
anywhere. Its charts are inline SVG (``._charts``), coloured by the page's theme: ``light``,
``dark`` or ``auto`` (the viewer's preference).

Transcript links: a result's ``transcript`` is a path inside the run directory; given
``transcript_base`` (the run directory as seen from where the page is saved: ``""`` beside it),
the failure groups and fix items link to those files. Without it they name the session instead.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping, Sequence
from typing import Literal

from .._exceptions import FleetError
from ._charts import SERIES, grid_chart, pass_at_k_chart, pass_rate_chart
from ._model import FailureExample, ModelSummary, Outcome, ReportEnvelope, Sampling, TaskSummary

__all__ = [
    "MARKDOWN_PARTS",
    "THEMES",
    "Theme",
    "UnknownPartError",
    "filename",
    "render",
    "to_html",
    "to_json",
    "to_markdown",
]

Format = Literal["json", "md", "html"]
Part = Literal["verdict", "fix_items", "scenario"]
Theme = Literal["light", "dark", "auto"]
MARKDOWN_PARTS: tuple[Part, ...] = ("verdict", "fix_items", "scenario")
THEMES: tuple[Theme, ...] = ("light", "dark", "auto")


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


def _curve_text(summary: ModelSummary) -> str:
    return " / ".join(_num(v) for v in summary.pass_at_k_curve) or "n/a"


def _sampling_text(sampling: Sampling | None) -> str:
    if sampling is None:
        return ""
    fields = sampling.model_dump(exclude_none=True)
    extra = fields.pop("extra_body", None)
    parts = [f"{name} {value}" for name, value in fields.items()]
    if extra:
        parts.append("extra body " + json.dumps(extra, sort_keys=True))
    return ", ".join(parts) or "endpoint defaults"


def _settings_text(summary: ModelSummary) -> str:
    """Where and how a model was asked: ``local policy``, or its endpoint and sampling."""
    if summary.endpoint is None and summary.sampling is None:
        return "local policy"
    return "; ".join(t for t in (summary.endpoint or "", _sampling_text(summary.sampling)) if t)


def _method_note(envelope: ReportEnvelope) -> str:
    report = envelope.report
    return (
        f"Pass rates count graded sessions only (errored ones are left out); intervals are "
        f"{round(100 * report.confidence)}% Wilson score intervals. pass@{report.k} is the unbiased "
        f"estimator averaged over tasks with at least {report.k} graded samples (pass@j likewise "
        f"for each j). A session passes at score >= {report.pass_threshold:g}."
    )


def _meta(envelope: ReportEnvelope) -> str:
    report = envelope.report
    source = envelope.source.kind + (f", job {envelope.source.job_id}" if envelope.source.job_id else "")
    text = (
        f"Run {envelope.run_id} ({source}), k={report.k}, {len(envelope.suite.task_keys)} tasks, "
        f"{len(envelope.suite.models)} models"
    )
    if not report.complete:
        text += ", INCOMPLETE (pending sessions)"
    if report.retried:
        text += f", {report.retried} errored episodes retried"
    if report.created_at:
        text += f", started {report.created_at}"
    return text + "."


def _matrix(envelope: ReportEnvelope) -> list[tuple[str, list[str]]]:
    """The tasks x models table: each task key with its cell text per model.

    The task rows are indexed once, so the table costs one pass over them (looking each cell up
    among all rows made a 1000-task, 5-model report take seconds).
    """
    rows = {(row.task_key, row.model): row for row in envelope.report.tasks}
    k = envelope.report.k
    return [
        (key, [_cell(rows.get((key, m)), k) for m in envelope.suite.models])
        for key in envelope.suite.task_keys
    ]


def _cell(row: TaskSummary | None, k: int) -> str:
    if row is None:
        return "-"
    text = f"{row.passed}/{row.graded}"
    if row.samples != row.graded:
        text += f" ({row.samples - row.graded} not graded)"
    if row.pass_at_k is not None:
        text += f", pass@{k} {_num(row.pass_at_k)}"
    return text


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


def _why(result: Outcome) -> str:
    """What went wrong with one result, for a person: why an errored one was not graded (what the
    verifier said of the half-played episode is beside the point), else the verifier's feedback."""
    if result.status == "errored":
        return result.error or "not graded"
    if result.feedback:
        return result.feedback
    if result.error:
        return result.error
    if result.last_tool_error:
        return f"tool error: {result.last_tool_error}"
    return f"score {_num(result.score)}"


def _slot(task_key: str, model: str, sample: int) -> str:
    return f"{task_key} / {model} #{sample}"


def _link(transcript: str | None, transcript_base: str | None) -> str | None:
    if transcript is None or transcript_base is None:
        return None
    return transcript_base + transcript


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


def _md_link(text: str, target: str | None) -> str:
    if target is None:
        return _md(text)
    return f"[{_md(text)}](<{target.replace('>', '%3E').replace(' ', '%20')}>)"


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
            _curve_text(s),
            _num(s.avg_score),
            _duration(s.avg_duration_ms),
            _md(_settings_text(s)),
        ]
        for s in envelope.report.models
    ]
    headers = ["model", "sessions", "passed", "failed", "errored", "pending", "pass rate (CI)"]
    headers += [f"pass@{k}", f"pass@1..{k}", "mean score", "mean duration", "endpoint and sampling"]
    return ["## Models", "", *_md_table(headers, rows), "", _md(_method_note(envelope))]


def _md_matrix(envelope: ReportEnvelope) -> list[str]:
    rows = [[_md(key), *(_md(cell) for cell in cells)] for key, cells in _matrix(envelope)]
    return _md_table(["task", *(_md(m) for m in envelope.suite.models)], rows)


def _md_fix_items(envelope: ReportEnvelope, model: str | None, transcript_base: str | None) -> list[str]:
    title = "## Fix items" + (f" for {_md(model)}" if model else "")
    failures = _failures(envelope, model)
    if not failures:
        return [title, "", "Nothing to fix: every graded session passed."]
    lines = [title, ""]
    for r in failures:
        line = f"- {_md(_slot(r.task_key, r.model, r.sample))}: {r.status}: {_md(_why(r))}"
        if r.last_action:
            line += f"; last action: {_md(r.last_action)}"
        link = _link(r.transcript, transcript_base)
        if link is not None:
            line += f" ({_md_link('transcript', link)})"
        lines.append(line)
    return lines


def _md_example(example: FailureExample, transcript_base: str | None) -> str:
    text = _slot(example.task_key, example.model, example.sample)
    return _md_link(text, _link(example.transcript, transcript_base))


def _md_failure_groups(envelope: ReportEnvelope, transcript_base: str | None) -> list[str]:
    groups = envelope.report.failure_groups
    if not groups:
        return ["## Failures", "", "No failures."]
    rows = [
        [
            _md((g.kind or "").replace("_", " ")),
            _md(g.reason),
            g.status,
            str(g.count),
            _md(", ".join(g.models)),
            _md(", ".join(g.task_keys)),
            ", ".join(_md_example(e, transcript_base) for e in g.examples),
        ]
        for g in groups
    ]
    headers = ["kind", "reason", "status", "count", "models", "tasks", "examples"]
    return ["## Failures", "", *_md_table(headers, rows)]


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
    transcript_base: str | None = None,
) -> str:
    """The report as Markdown: the whole of it, or one part.

    Args:
        envelope: The report.
        part: None for the whole report, or ``verdict``, ``fix_items`` (narrowed by ``model``) or
            ``scenario`` (the task named by ``scenario``).
        model: With ``fix_items``, only this model's failures.
        scenario: With ``scenario``, the task key.
        transcript_base: Prefix of transcript links (the run directory as seen from the file;
            ``""`` when the file is in it); None links nothing.

    Raises:
        UnknownPartError: An unknown part, or a model or scenario the report does not have.
    """
    if part == "verdict":
        lines = _md_verdict(envelope)
    elif part == "fix_items":
        _check_model(envelope, model)
        lines = _md_fix_items(envelope, model, transcript_base)
    elif part == "scenario":
        lines = _md_scenario(envelope, _check_scenario(envelope, scenario))
    elif part is None:
        lines = [
            f"# Evaluation report: {_md(envelope.suite.name)}",
            "",
            _md(_meta(envelope)),
            "",
            *_md_verdict(envelope),
            "",
            *_md_models(envelope),
            "",
            "## Tasks",
            "",
            *_md_matrix(envelope),
            "",
            *_md_failure_groups(envelope, transcript_base),
            "",
            *_md_fix_items(envelope, None, transcript_base),
        ]
    else:
        raise UnknownPartError(f"part must be one of {', '.join(MARKDOWN_PARTS)}, got {part!r}")
    return "\n".join(lines) + "\n"


# --- HTML --------------------------------------------------------------------------------------

_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; base-uri 'none'; form-action 'none'"
_LIGHT = """--fg: #1d1d1f; --bg: #ffffff; --muted: #666; --line: #ddd; --head: #f3f3f5;
  --pass: #1a7f37; --fail: #cf222e; --err: #9a6700; --track: #eef0f3; --grid: #e3e5e8;
  --s0: #0969da; --s1: #bf3989; --s2: #1a7f37; --s3: #9a6700; --s4: #8250df; --s5: #cf222e;
  --g0: #f6c8c8; --g1: #f7dcc0; --g2: #f2ebb4; --g3: #cbe8b5; --g4: #8fd19e; --gn: #e8e8ec;
  --ge: #f5d58a;"""
_DARK = """--fg: #e8e8e8; --bg: #161618; --muted: #aaa; --line: #333; --head: #222226;
  --pass: #3fb950; --fail: #f85149; --err: #d29922; --track: #26262b; --grid: #303036;
  --s0: #58a6ff; --s1: #f778ba; --s2: #3fb950; --s3: #d29922; --s4: #bc8cff; --s5: #ff7b72;
  --g0: #6e2b2b; --g1: #6b4424; --g2: #5f5a22; --g3: #2f5a2f; --g4: #1f7a3a; --gn: #2a2a30;
  --ge: #7a5a12;"""
_STYLE = """
body { font-family: system-ui, sans-serif; color: var(--fg); background: var(--bg); margin: 2rem; }
h1 { margin-bottom: .2rem; } .meta, .note { color: var(--muted); }
a { color: var(--s0); }
table { border-collapse: collapse; margin: .5rem 0 1.5rem; font-size: .9rem; }
th, td { border: 1px solid var(--line); padding: .3rem .6rem; text-align: left; vertical-align: top; }
th { background: var(--head); } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.passed { color: var(--pass); } .failed { color: var(--fail); } .errored, .pending { color: var(--err); }
.verdict { font-size: 1.1rem; font-weight: 600; }
.charts { margin: .5rem 0 1.5rem; } .charts h3 { margin: 1rem 0 .3rem; font-size: 1rem; }
svg.chart { display: block; max-width: 100%; height: auto; font-size: 12px; }
svg.chart text { fill: var(--fg); } svg.chart .axis { fill: var(--muted); font-size: 11px; }
svg.chart .grid { stroke: var(--grid); stroke-width: 1; } svg.chart .track { fill: var(--track); }
svg.chart .whisker { stroke: var(--fg); stroke-width: 1.5; }
svg.chart .line { fill: none; stroke-width: 2.5; } svg.chart .cell-text { font-size: 11px; }
.why { max-width: 40rem; } code { font-size: .85rem; } .small { font-size: .8rem; }
td.examples { white-space: nowrap; font-size: .85rem; }
"""


def _series_css() -> str:
    rules = []
    for i in range(SERIES):
        rules.append(
            f"svg.chart .bar.s{i}, svg.chart .dot.s{i}, svg.chart .key.s{i} {{ fill: var(--s{i}); }}"
        )
        rules.append(f"svg.chart .line.s{i} {{ stroke: var(--s{i}); }}")
    shades = ("g0", "g1", "g2", "g3", "g4", "gn", "ge")
    rules += [f"svg.chart .cell.{g} {{ fill: var(--{g}); }}" for g in shades]
    return "\n".join(rules) + "\n"


def _theme_css(theme: Theme) -> str:
    if theme == "light":
        return f":root {{ color-scheme: light; {_LIGHT} }}\n"
    if theme == "dark":
        return f":root {{ color-scheme: dark; {_DARK} }}\n"
    return (
        f":root {{ color-scheme: light dark; {_LIGHT} }}\n"
        f"@media (prefers-color-scheme: dark) {{ :root {{ {_DARK} }} }}\n"
    )


def _h(text: object) -> str:
    return html.escape(str(text), quote=True)


def _a(text: str, target: str | None) -> str:
    return _h(text) if target is None else f'<a href="{_h(target)}">{_h(text)}</a>'


def _html_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    numeric: frozenset[int],
    classes: Mapping[int, str] | None = None,
) -> str:
    """A table of cells already escaped; ``numeric`` columns align right, ``classes`` name others."""
    names = {i: "num" for i in numeric} | dict(classes or {})
    head = "".join(f"<th>{_h(h)}</th>" for h in headers)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="{names[i]}">{c}</td>' if i in names else f"<td>{c}</td>" for i, c in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _status(status: str) -> str:
    return f'<span class="{status}">{status}</span>'


def _html_failure_groups(envelope: ReportEnvelope, transcript_base: str | None) -> str:
    groups = envelope.report.failure_groups
    if not groups:
        return "<p>No failures.</p>"
    rows = [
        [
            _h((g.kind or "").replace("_", " ")),
            f'<span class="why">{_h(g.reason)}</span>',
            _status(g.status),
            str(g.count),
            _h(", ".join(g.models)),
            f'<span class="small">{_h(", ".join(g.task_keys))}</span>',
            "<br>".join(_html_example(e, len(g.models) > 1, transcript_base) for e in g.examples),
        ]
        for g in groups
    ]
    headers = ["kind", "reason", "status", "count", "models", "tasks", "examples"]
    return _html_table(headers, rows, frozenset({3}), {6: "examples"})


def _html_example(example: FailureExample, with_model: bool, transcript_base: str | None) -> str:
    text = f"{example.task_key} #{example.sample}" + (f" ({example.model})" if with_model else "")
    link = _link(example.transcript, transcript_base)
    if link is None and example.session_id:
        text += f", session {example.session_id}"
    return _a(text, link)


def _html_fix_items(envelope: ReportEnvelope, transcript_base: str | None) -> str:
    failures = _failures(envelope, None)
    if not failures:
        return "<p>Nothing to fix: every graded session passed.</p>"
    rows = [
        [
            _h(r.task_key),
            _h(r.model),
            str(r.sample),
            _status(r.status),
            f'<span class="why">{_h(_why(r))}</span>',
            f"<code>{_h(r.last_action)}</code>" if r.last_action else "",
            _a("transcript", _link(r.transcript, transcript_base))
            if r.transcript
            else _h(r.session_id or ""),
        ]
        for r in failures
    ]
    headers = ["task", "model", "sample", "status", "what went wrong", "last action", "transcript"]
    return _html_table(headers, rows, frozenset({2}))


def to_html(envelope: ReportEnvelope, *, theme: Theme = "auto", transcript_base: str | None = None) -> str:
    """The report as one self-contained HTML page (inline CSS and SVG, no scripts, no fetches).

    Args:
        envelope: The report.
        theme: ``light``, ``dark`` or ``auto`` (follows the viewer's colour-scheme preference).
        transcript_base: Prefix of transcript links (the run directory as seen from the page;
            ``""`` when the page is in it); None links nothing and names sessions instead.

    Raises:
        ValueError: An unknown theme.
    """
    if theme not in THEMES:
        raise ValueError(f"theme must be one of {', '.join(THEMES)}, got {theme!r}")
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
            _h(_curve_text(s)),
            _num(s.avg_score),
            _duration(s.avg_duration_ms),
            _h(_settings_text(s)),
        ]
        for s in report.models
    ]
    headers = ["model", "sessions", "passed", "failed", "errored", "pending", "pass rate (CI)"]
    models_table = _html_table(
        [*headers, f"pass@{k}", f"pass@1..{k}", "mean score", "mean duration", "endpoint and sampling"],
        models_rows,
        frozenset(range(1, 11)),
    )
    matrix = _html_table(
        ["task", *envelope.suite.models],
        [[_h(key), *(_h(cell) for cell in cells)] for key, cells in _matrix(envelope)],
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
    results = _html_table(
        ["task", "model", "sample", "status", "score", "session", "error"],
        [
            [
                _h(r.task_key),
                _h(r.model),
                str(r.sample),
                _status(r.status),
                _num(r.score),
                _h(r.session_id or "-"),
                _h(r.error or ""),
            ]
            for r in report.results
        ],
        frozenset({2, 4}),
    )
    title = f"Evaluation report: {envelope.suite.name}"
    scheme = "light dark" if theme == "auto" else theme
    charts = (
        '<div class="charts">'
        f"<h3>Pass rate</h3>{pass_rate_chart(envelope)}"
        f"<h3>pass@k</h3>{pass_at_k_chart(envelope)}"
        f"<h3>Tasks x models</h3>{grid_chart(envelope)}"
        "</div>"
    )
    parts = [
        "<!DOCTYPE html>",
        f'<html lang="en" data-theme="{theme}"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta name="color-scheme" content="{scheme}">',
        f"<title>{_h(title)}</title><style>{_theme_css(theme)}{_STYLE}{_series_css()}</style></head><body>",
        f"<h1>{_h(title)}</h1>",
        f'<p class="meta">{_h(_meta(envelope))}</p>',
        f'<h2>Verdict</h2><p class="verdict">{_h(_verdict_text(envelope))}</p>{verdict_table}',
        f"<h2>Charts</h2>{charts}",
        f'<h2>Models</h2>{models_table}<p class="note">{_h(_method_note(envelope))}</p>',
        f"<h2>Tasks</h2>{matrix}",
        f'<h2 id="failures">Failures</h2>{_html_failure_groups(envelope, transcript_base)}',
        f'<h2 id="fix-items">Fix items</h2>{_html_fix_items(envelope, transcript_base)}',
        f"<details><summary>Every session ({len(report.results)})</summary>{results}</details>",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def render(
    envelope: ReportEnvelope, fmt: str, *, theme: Theme = "auto", transcript_base: str | None = None
) -> str:
    """The report in ``fmt`` (``json``, ``md`` or ``html``).

    Args:
        envelope: The report.
        fmt: ``json``, ``md`` or ``html``.
        theme: The HTML page's theme (see :func:`to_html`).
        transcript_base: Prefix of transcript links in Markdown and HTML (see :func:`to_html`).

    Raises:
        ValueError: An unknown format or theme.
    """
    if fmt == "json":
        return to_json(envelope)
    if fmt == "md":
        return to_markdown(envelope, transcript_base=transcript_base)
    if fmt == "html":
        return to_html(envelope, theme=theme, transcript_base=transcript_base)
    raise ValueError(f"format must be one of json, md, html, got {fmt!r}")
