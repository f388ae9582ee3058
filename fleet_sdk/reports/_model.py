"""The version-1 evaluation report envelope, and how it is built from episode outcomes.

An envelope is ``{version: 1, run_id, source, suite, report}``; ``report`` holds per-model
summaries, per task-and-model aggregates, one result per episode (``passed``, ``failed``,
``errored`` or ``pending``), the verdict and the failure groups. The same object renders to
JSON, Markdown and HTML (``._render``) and is what the report service stores
(``schemas/evaluation-reports.yaml`` mirrors these models field for field).

Scoring rules: an episode whose reward is None (the verifier could not grade it, or the episode
crashed) is ``errored`` and left out of every rate; a graded one passes when its score reaches
``pass_threshold``.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ._stats import CONFIDENCE, pass_at_k, wilson_interval

__all__ = [
    "REPORT_VERSION",
    "RUN_ID_PATTERN",
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
    "Verdict",
    "VerdictEntry",
    "build_report",
    "canonical_json",
    "classify",
    "digest",
]

REPORT_VERSION = 1
RUN_ID_PATTERN = r"^[A-Za-z0-9._-]{1,128}$"
"""Run ids name files (``<run>-<part>.md``), so they are restricted to filename-safe characters."""

Status = Literal["passed", "failed", "errored", "pending"]
_MAX_ERROR = 500


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Outcome(_Model):
    """One episode (client-side run) or session (platform job): the per-task result of a report.

    Attributes:
        task_key: The task.
        model: The model id as the run was given it (``provider/model`` or a bare name).
        sample: Which of the ``k`` samples of this task and model (0-based).
        status: ``passed``, ``failed``, ``errored`` (never graded) or ``pending`` (not finished).
        score: The reward; None when errored or pending.
        session_id: The session the episode is stored as, if any.
        verifier_execution_id: The verifier run that graded it, if any.
        error: What went wrong (errored) or why it failed, if known.
        duration_ms: Wall-clock milliseconds of the episode, if known.
    """

    task_key: str = Field(min_length=1)
    model: str = Field(min_length=1)
    sample: int = Field(default=0, ge=0)
    status: Status
    score: float | None = None
    session_id: str | None = None
    verifier_execution_id: str | None = None
    error: str | None = None
    duration_ms: int | None = Field(default=None, ge=0)


class Interval(_Model):
    """A confidence interval of a proportion."""

    low: float = Field(ge=0.0, le=1.0)
    high: float = Field(ge=0.0, le=1.0)


class ModelSummary(_Model):
    """One model over the whole run.

    Attributes:
        pass_rate: ``passed / graded`` (graded = passed + failed); None when nothing was graded.
        pass_rate_interval: Wilson interval of ``pass_rate`` at ``Report.confidence``.
        pass_at_k: Mean over tasks of the unbiased pass@k, over tasks with at least ``k`` graded
            samples; None when no task has.
    """

    model: str
    sessions: int = Field(ge=0)
    passed: int = Field(ge=0)
    failed: int = Field(ge=0)
    errored: int = Field(ge=0)
    pending: int = Field(ge=0)
    pass_rate: float | None = Field(ge=0.0, le=1.0)
    pass_rate_interval: Interval | None
    pass_at_k: float | None = Field(ge=0.0, le=1.0)
    avg_score: float | None
    avg_duration_ms: float | None


class TaskSummary(_Model):
    """One task under one model: its samples, pass rate, interval and pass@k."""

    task_key: str
    model: str
    samples: int = Field(ge=0)
    graded: int = Field(ge=0)
    passed: int = Field(ge=0)
    pass_rate: float | None = Field(ge=0.0, le=1.0)
    interval: Interval | None
    pass_at_k: float | None = Field(ge=0.0, le=1.0)


class VerdictEntry(_Model):
    """One model's place in the verdict."""

    model: str
    pass_rate: float | None
    avg_score: float | None


class Verdict(_Model):
    """Models ranked by pass rate, then mean score; ``basis`` names what ranked them."""

    basis: Literal["pass rate"] = "pass rate"
    ranking: list[VerdictEntry]
    winner: str | None


class FailureGroup(_Model):
    """Failed or errored results sharing one reason."""

    reason: str
    status: Literal["failed", "errored"]
    count: int = Field(ge=1)
    models: list[str]
    task_keys: list[str]


class Report(_Model):
    """The body of the envelope."""

    k: int = Field(ge=1)
    pass_threshold: float
    interval_method: Literal["wilson"] = "wilson"
    confidence: float = Field(ge=0.5, le=0.999)
    complete: bool
    created_at: str | None = None
    models: list[ModelSummary]
    tasks: list[TaskSummary]
    results: list[Outcome]
    verdict: Verdict | None
    failure_groups: list[FailureGroup]


class Source(_Model):
    """Where the results came from (the client-side runner or a platform job) and the job of its sessions."""

    kind: Literal["client", "platform"]
    job_id: str | None = None


class Suite(_Model):
    """What was evaluated."""

    name: str = Field(min_length=1)
    task_keys: list[str]
    models: list[str] = Field(min_length=1)
    k: int = Field(ge=1)


class ReportEnvelope(_Model):
    """The version-1 envelope: what is exported, imported and rendered."""

    version: Literal[1] = 1
    run_id: str = Field(pattern=RUN_ID_PATTERN)
    source: Source
    suite: Suite
    report: Report

    def to_dict(self) -> dict[str, Any]:
        """The envelope as plain JSON data."""
        return self.model_dump(mode="json")


def canonical_json(data: Any) -> str:
    """Compact JSON with sorted keys: the bytes a digest is taken over."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def digest(envelope: ReportEnvelope | dict[str, Any]) -> str:
    """SHA-256 (hex) of the envelope's canonical JSON: equal reports have equal digests."""
    data = envelope.to_dict() if isinstance(envelope, ReportEnvelope) else envelope
    return hashlib.sha256(canonical_json(data).encode("utf-8")).hexdigest()


def classify(score: float | None, threshold: float = 1.0) -> Status:
    """``errored`` for an ungraded episode (None), else ``passed`` or ``failed`` against ``threshold``."""
    if score is None:
        return "errored"
    return "passed" if score >= threshold else "failed"


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _interval(passed: int, graded: int) -> Interval | None:
    if graded == 0:
        return None
    low, high = wilson_interval(passed, graded, CONFIDENCE)
    return Interval(low=low, high=high)


def _reason(outcome: Outcome, threshold: float) -> str:
    if outcome.error:
        first = outcome.error.strip().splitlines()[0] if outcome.error.strip() else outcome.error
        return first[:_MAX_ERROR]
    if outcome.status == "errored":
        return "not graded (no verifier result)"
    return f"score below {threshold:g}"


def _task_summary(task_key: str, model: str, rows: Sequence[Outcome], k: int) -> TaskSummary:
    graded = [r for r in rows if r.status in ("passed", "failed")]
    passed = sum(1 for r in graded if r.status == "passed")
    return TaskSummary(
        task_key=task_key,
        model=model,
        samples=len(rows),
        graded=len(graded),
        passed=passed,
        pass_rate=passed / len(graded) if graded else None,
        interval=_interval(passed, len(graded)),
        pass_at_k=pass_at_k(len(graded), passed, k) if len(graded) >= k else None,
    )


def _model_summary(model: str, rows: Sequence[Outcome], tasks: Sequence[TaskSummary]) -> ModelSummary:
    counts = {s: sum(1 for r in rows if r.status == s) for s in ("passed", "failed", "errored")}
    graded = counts["passed"] + counts["failed"]
    scores = [r.score for r in rows if r.status in ("passed", "failed") and r.score is not None]
    durations = [float(r.duration_ms) for r in rows if r.duration_ms is not None and r.status != "pending"]
    per_task = [t.pass_at_k for t in tasks if t.pass_at_k is not None]
    return ModelSummary(
        model=model,
        sessions=len(rows),
        passed=counts["passed"],
        failed=counts["failed"],
        errored=counts["errored"],
        pending=sum(1 for r in rows if r.status == "pending"),
        pass_rate=counts["passed"] / graded if graded else None,
        pass_rate_interval=_interval(counts["passed"], graded),
        pass_at_k=_mean(per_task),
        avg_score=_mean(scores),
        avg_duration_ms=_mean(durations),
    )


def _verdict(summaries: Sequence[ModelSummary]) -> Verdict | None:
    if len(summaries) < 2:
        return None  # nothing to rank a single model against
    ranked = sorted(
        summaries,
        key=lambda s: (
            -(s.pass_rate if s.pass_rate is not None else -1.0),
            -(s.avg_score if s.avg_score is not None else -1.0),
            s.model,
        ),
    )
    entries = [VerdictEntry(model=s.model, pass_rate=s.pass_rate, avg_score=s.avg_score) for s in ranked]
    best = ranked[0]
    tied = (best.pass_rate, best.avg_score) == (ranked[1].pass_rate, ranked[1].avg_score)
    winner = None if tied or best.pass_rate is None else best.model
    return Verdict(ranking=entries, winner=winner)


def _failure_groups(results: Sequence[Outcome], threshold: float) -> list[FailureGroup]:
    grouped: dict[tuple[str, str], list[Outcome]] = defaultdict(list)
    for r in results:
        if r.status in ("failed", "errored"):
            grouped[(r.status, _reason(r, threshold))].append(r)
    groups = [
        FailureGroup(
            reason=reason,
            status="failed" if status == "failed" else "errored",
            count=len(rows),
            models=sorted({r.model for r in rows}),
            task_keys=sorted({r.task_key for r in rows}),
        )
        for (status, reason), rows in grouped.items()
    ]
    return sorted(groups, key=lambda g: (-g.count, g.status, g.reason))


def build_report(
    *,
    run_id: str,
    source: Source,
    suite_name: str,
    task_keys: Sequence[str],
    models: Sequence[str],
    k: int,
    outcomes: Iterable[Outcome],
    created_at: str | None = None,
    pass_threshold: float = 1.0,
) -> ReportEnvelope:
    """Build the envelope of a run; episodes planned but not in ``outcomes`` are ``pending``.

    Args:
        run_id: The run (filename-safe, see ``RUN_ID_PATTERN``).
        source: Where the outcomes came from.
        suite_name: A name for what was evaluated (an env key, a file name...).
        task_keys: The tasks of the run, in report order.
        models: The models of the run, in report order.
        k: Samples per task and model (the ``k`` of pass@k).
        outcomes: The finished episodes; later duplicates of one (task, model, sample) are ignored.
        created_at: When the run started (kept as given, so a re-render is byte-identical).
        pass_threshold: The score at which a graded episode passes.
    """
    by_slot: dict[tuple[str, str, int], Outcome] = {}
    for outcome in outcomes:
        by_slot.setdefault((outcome.task_key, outcome.model, outcome.sample), outcome)
    keys = list(dict.fromkeys(task_keys))
    model_ids = list(dict.fromkeys(models))
    extra_keys = sorted({key for key, _, _ in by_slot} - set(keys))
    keys += extra_keys  # results outside the plan are still reported
    model_ids += sorted({model for _, model, _ in by_slot} - set(model_ids))
    results: list[Outcome] = []
    for key in keys:
        for model in model_ids:
            samples = max(k, 1 + max((s for t, m, s in by_slot if t == key and m == model), default=-1))
            for sample in range(samples):
                found = by_slot.get((key, model, sample))
                results.append(found or Outcome(task_key=key, model=model, sample=sample, status="pending"))
    task_rows = [
        _task_summary(key, model, [r for r in results if r.task_key == key and r.model == model], k)
        for key in keys
        for model in model_ids
    ]
    summaries = [
        _model_summary(
            model,
            [r for r in results if r.model == model],
            [t for t in task_rows if t.model == model],
        )
        for model in model_ids
    ]
    report = Report(
        k=k,
        pass_threshold=pass_threshold,
        confidence=CONFIDENCE,
        complete=not any(r.status == "pending" for r in results),
        created_at=created_at,
        models=summaries,
        tasks=task_rows,
        results=results,
        verdict=_verdict(summaries),
        failure_groups=_failure_groups(results, pass_threshold),
    )
    return ReportEnvelope(
        run_id=run_id,
        source=source,
        suite=Suite(name=suite_name, task_keys=keys, models=model_ids, k=k),
        report=report,
    )
