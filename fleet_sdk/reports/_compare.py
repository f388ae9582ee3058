"""Two reports side by side: which tasks regressed or improved under each model.

A task-and-model pair present in both reports with a pass@k in each is compared. Its change is
``head - base``; it is *significant* when the two Wilson intervals of the pair's pass rate do not
overlap (a cautious test: overlapping intervals can still differ, but disjoint ones do).

Runs of different ``k`` are compared on the common one, the smaller: pass@j of a task is computed
again from its graded and passed counts (the unbiased estimator works for any j up to the graded
count), and the comparison says so in ``note``.
"""

from __future__ import annotations

import html
import json
from typing import Literal

from pydantic import BaseModel, ConfigDict

from ._model import ReportEnvelope, TaskSummary
from ._render import _md, _md_table, _num
from ._stats import pass_at_k

__all__ = ["Change", "Comparison", "compare"]


class Change(BaseModel):
    """One task under one model, in both reports."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task_key: str
    model: str
    direction: Literal["regressed", "improved", "unchanged"]
    base_pass_at_k: float
    head_pass_at_k: float
    delta: float
    outside_intervals: bool


class Comparison(BaseModel):
    """The changes between a base run and a head run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_run_id: str
    head_run_id: str
    k: int
    changes: list[Change]
    base_k: int | None = None
    head_k: int | None = None
    note: str | None = None
    only_base_models: list[str] = []
    only_head_models: list[str] = []

    @property
    def regressed(self) -> list[Change]:
        """Pairs whose pass@k went down."""
        return [c for c in self.changes if c.direction == "regressed"]

    @property
    def improved(self) -> list[Change]:
        """Pairs whose pass@k went up."""
        return [c for c in self.changes if c.direction == "improved"]

    def to_json(self) -> str:
        """Sorted-key JSON with a final newline."""
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, indent=2) + "\n"

    def _headers(self) -> list[str]:
        return [
            "model",
            "task",
            "change",
            f"base pass@{self.k}",
            f"head pass@{self.k}",
            "delta",
            "outside intervals",
        ]

    def _moved(self) -> list[list[str]]:
        """The regressed and improved pairs as rows of plain text."""
        return [
            [
                c.model,
                c.task_key,
                c.direction,
                _num(c.base_pass_at_k),
                _num(c.head_pass_at_k),
                f"{c.delta:+.2f}",
                "yes" if c.outside_intervals else "no",
            ]
            for c in self.changes
            if c.direction != "unchanged"
        ]

    def _models_note(self) -> str | None:
        """Which models only one run has (they are not compared)."""
        parts = []
        if self.only_base_models:
            parts.append(f"only in the base run: {', '.join(self.only_base_models)}")
        if self.only_head_models:
            parts.append(f"only in the head run: {', '.join(self.only_head_models)}")
        return f"Models not compared, {'; '.join(parts)}." if parts else None

    def _unchanged(self) -> str:
        if self.only_base_models or self.only_head_models:
            shared = sorted({c.model for c in self.changes})
            among = ", ".join(shared) if shared else "none"
            return f"No task changed its pass@k under the models both runs have ({among})."
        return "No task changed its pass@k."

    def to_markdown(self) -> str:
        """A Markdown table of the regressed and improved pairs."""
        lines = [f"# Comparison: {_md(self.base_run_id)} -> {_md(self.head_run_id)}", ""]
        for note in (self.note, self._models_note()):
            if note:
                lines += [_md(note), ""]
        moved = self._moved()
        if not moved:
            return "\n".join([*lines, _md(self._unchanged())]) + "\n"
        rows = [[_md(row[0]), _md(row[1]), *row[2:]] for row in moved]
        return "\n".join([*lines, *_md_table(self._headers(), rows)]) + "\n"

    def to_html(self) -> str:
        """The Markdown table as a small self-contained HTML page."""
        head = "".join(f"<th>{html.escape(h)}</th>" for h in self._headers())
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row) + "</tr>" for row in self._moved()
        )
        title = html.escape(f"Comparison: {self.base_run_id} -> {self.head_run_id}")
        note = "".join(f"<p>{html.escape(n)}</p>" for n in (self.note, self._models_note()) if n)
        if not self._moved():
            note += f"<p>{html.escape(self._unchanged())}</p>"
        return (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
            "style-src 'unsafe-inline'\">"
            f"<title>{title}</title><style>:root{{color-scheme:light dark}}"
            "body{font-family:system-ui,sans-serif;margin:2rem}td,th{border:1px solid #8888;"
            "padding:.3rem .6rem}table{border-collapse:collapse}</style></head><body>"
            f"<h1>{title}</h1>{note}<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
            "</body></html>\n"
        )


def _disjoint(a: TaskSummary, b: TaskSummary) -> bool:
    if a.interval is None or b.interval is None:
        return False
    return a.interval.high < b.interval.low or b.interval.high < a.interval.low


def _pass_at(row: TaskSummary, k: int) -> float | None:
    return pass_at_k(row.graded, row.passed, k) if row.graded >= k else None


def compare(base: ReportEnvelope, head: ReportEnvelope) -> Comparison:
    """Compare ``head`` against ``base``, per task and model, on pass@k of the smaller ``k``.

    Args:
        base: The earlier (reference) report.
        head: The later report.
    """
    k = min(base.report.k, head.report.k)
    note = None
    if base.report.k != head.report.k:
        note = (
            f"The runs have different k (base k={base.report.k}, head k={head.report.k}): "
            f"they are compared on pass@{k}, the k they share."
        )
    before = {(t.task_key, t.model): t for t in base.report.tasks}
    changes: list[Change] = []
    for after in head.report.tasks:
        prior = before.get((after.task_key, after.model))
        base_value = None if prior is None else _pass_at(prior, k)
        head_value = _pass_at(after, k)
        if prior is None or base_value is None or head_value is None:
            continue
        delta = head_value - base_value
        direction: Literal["regressed", "improved", "unchanged"] = (
            "regressed" if delta < -1e-12 else "improved" if delta > 1e-12 else "unchanged"
        )
        changes.append(
            Change(
                task_key=after.task_key,
                model=after.model,
                direction=direction,
                base_pass_at_k=base_value,
                head_pass_at_k=head_value,
                delta=delta,
                outside_intervals=_disjoint(prior, after),
            )
        )
    changes.sort(key=lambda c: (c.model, c.direction, c.task_key))
    return Comparison(
        base_run_id=base.run_id,
        head_run_id=head.run_id,
        k=k,
        changes=changes,
        base_k=base.report.k,
        head_k=head.report.k,
        note=note,
        only_base_models=[m for m in base.suite.models if m not in head.suite.models],
        only_head_models=[m for m in head.suite.models if m not in base.suite.models],
    )
