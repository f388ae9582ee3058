"""Evaluation reports: the version-1 envelope, pass@k with Wilson intervals, and its renderings.

Build an envelope with :func:`build_report` (or from a run with ``fleet_sdk.evaluation``), then
render it with :func:`to_json`, :func:`to_markdown` or :func:`to_html` (inline SVG charts, a
light, dark or automatic theme), name its file with :func:`filename`, and compare two runs with
:func:`compare` (on the k they share); :func:`inconsistency` finds where a report says what its
own results do not give. Nothing here touches the network.
"""

from .._public import publish
from ._compare import Change, Comparison, compare
from ._model import (
    EXAMPLES_PER_GROUP,
    REPORT_VERSION,
    ErrorKind,
    FailureExample,
    FailureGroup,
    FailureKind,
    Inconsistency,
    Interval,
    ModelSummary,
    Outcome,
    Report,
    ReportEnvelope,
    Sampling,
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
    inconsistency,
)
from ._render import (
    MARKDOWN_PARTS,
    THEMES,
    Theme,
    UnknownPartError,
    filename,
    render,
    to_html,
    to_json,
    to_markdown,
)
from ._stats import CONFIDENCE, pass_at_k, wilson_interval

__all__ = [
    "CONFIDENCE",
    "EXAMPLES_PER_GROUP",
    "MARKDOWN_PARTS",
    "REPORT_VERSION",
    "THEMES",
    "Change",
    "Comparison",
    "ErrorKind",
    "FailureExample",
    "FailureGroup",
    "FailureKind",
    "Inconsistency",
    "Interval",
    "ModelSummary",
    "Outcome",
    "Report",
    "ReportEnvelope",
    "Sampling",
    "Source",
    "Status",
    "Suite",
    "TaskSummary",
    "Theme",
    "UnknownPartError",
    "Verdict",
    "VerdictEntry",
    "build_report",
    "canonical_json",
    "classify",
    "compare",
    "digest",
    "filename",
    "inconsistency",
    "pass_at_k",
    "render",
    "to_html",
    "to_json",
    "to_markdown",
    "wilson_interval",
]

publish(__name__, globals(), __all__)
