"""Evaluation reports: the version-1 envelope, pass@k with Wilson intervals, and its renderings.

Build an envelope with :func:`build_report` (or from a run with ``fleet_sdk.evaluation``), then
render it with :func:`to_json`, :func:`to_markdown` or :func:`to_html`, name its file with
:func:`filename`, and compare two runs with :func:`compare`. Nothing here touches the network.
"""

from .._public import publish
from ._compare import Change, Comparison, compare
from ._model import (
    REPORT_VERSION,
    FailureGroup,
    Interval,
    ModelSummary,
    Outcome,
    Report,
    ReportEnvelope,
    Source,
    Status,
    Suite,
    TaskSummary,
    Verdict,
    VerdictEntry,
    build_report,
    canonical_json,
    classify,
    digest,
)
from ._render import MARKDOWN_PARTS, UnknownPartError, filename, render, to_html, to_json, to_markdown
from ._stats import CONFIDENCE, pass_at_k, wilson_interval

__all__ = [
    "CONFIDENCE",
    "MARKDOWN_PARTS",
    "REPORT_VERSION",
    "Change",
    "Comparison",
    "FailureGroup",
    "Interval",
    "ModelSummary",
    "Outcome",
    "Report",
    "ReportEnvelope",
    "Source",
    "Status",
    "Suite",
    "TaskSummary",
    "UnknownPartError",
    "Verdict",
    "VerdictEntry",
    "build_report",
    "canonical_json",
    "classify",
    "compare",
    "digest",
    "filename",
    "pass_at_k",
    "render",
    "to_html",
    "to_json",
    "to_markdown",
    "wilson_interval",
]

publish(__name__, globals(), __all__)
