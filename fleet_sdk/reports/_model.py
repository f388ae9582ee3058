"""The version-1 evaluation report envelope, and how it is built from episode outcomes.

An envelope is ``{version: 1, run_id, source, suite, report}``; ``report`` holds per-model
summaries (with the endpoint and sampling parameters of a chat-completions model, and pass@j for
every j up to k), per task-and-model aggregates, one result per episode (``passed``, ``failed``,
``errored`` or ``pending``, with what the verifier said and the last action), the verdict and
the failure groups (by kind and reason, each with example episodes). The same object renders to
JSON, Markdown and HTML (``._render``) and is what the report service stores
(``schemas/evaluation-reports.yaml`` mirrors these models field for field).

Scoring rules: an episode whose reward is None (the verifier could not grade it, or the episode
crashed) is ``errored`` and left out of every rate; a graded one passes when its score reaches
``pass_threshold``.

Failure kinds, the first that applies: an errored episode is a ``model_error`` (the model
endpoint failed), ``not_graded`` (the verifier could not grade it) or an
``infrastructure_error`` (anything else); a failed one is ``step_budget`` (it used every step),
``verifier_feedback`` (grouped by what the verifier said), ``tool_errors`` (grouped by the last
tool error) or ``below_threshold``.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ._stats import CONFIDENCE, pass_at_k_curve, wilson_interval

__all__ = [
    "EXAMPLES_PER_GROUP",
    "REPORT_VERSION",
    "RUN_ID_PATTERN",
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
    "Verdict",
    "VerdictEntry",
    "build_report",
    "canonical_json",
    "classify",
    "digest",
    "inconsistency",
]

REPORT_VERSION = 1
RUN_ID_PATTERN = r"^[A-Za-z0-9._-]{1,128}$"
"""Run ids name files (``<run>-<part>.md``), so they are restricted to filename-safe characters."""

Status = Literal["passed", "failed", "errored", "pending"]
ErrorKind = Literal["model", "verifier", "infrastructure"]
FailureKind = Literal[
    "model_error",
    "not_graded",
    "infrastructure_error",
    "step_budget",
    "verifier_feedback",
    "tool_errors",
    "below_threshold",
]
EXAMPLES_PER_GROUP = 3
"""Example episodes a failure group names."""
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
        error_kind: For an errored episode: ``model`` (the model endpoint failed), ``verifier``
            (it could not grade) or ``infrastructure`` (anything else).
        done_reason: How the episode ended: ``agent``, ``submitted``, ``max_steps`` or ``closed``.
        feedback: What the verifier said was wrong (``fleet_sdk.rewards.verifier_feedback``).
        tool_errors: Tool calls that answered an error.
        last_tool_error: The last of them, as ``tool(): message``.
        last_action: The last tool call, as ``tool({...arguments})``.
        transcript: The episode's transcript file, relative to the run directory.
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
    error_kind: ErrorKind | None = None
    done_reason: str | None = None
    feedback: str | None = Field(default=None, max_length=500)
    tool_errors: int | None = Field(default=None, ge=0)
    last_tool_error: str | None = None
    last_action: str | None = None
    transcript: str | None = None


class Interval(_Model):
    """A confidence interval of a proportion."""

    low: float = Field(ge=0.0, le=1.0)
    high: float = Field(ge=0.0, le=1.0)


class Sampling(_Model):
    """The sampling parameters a chat-completions model was asked with (unset: the endpoint's default)."""

    temperature: float | None = Field(default=None, ge=0)
    max_tokens: int | None = Field(default=None, ge=1)
    top_p: float | None = Field(default=None, gt=0, le=1)
    seed: int | None = None
    extra_body: dict[str, Any] | None = None


class ModelSummary(_Model):
    """One model over the whole run.

    Attributes:
        pass_rate: ``passed / graded`` (graded = passed + failed); None when nothing was graded.
        pass_rate_interval: Wilson interval of ``pass_rate`` at ``Report.confidence``.
        pass_at_k: Mean over tasks of the unbiased pass@k, over tasks with at least ``k`` graded
            samples; None when no task has.
        pass_at_k_curve: pass@1, pass@2 ... pass@k, each the mean over tasks with at least that
            many graded samples (None where no task has).
        endpoint: The chat-completions URL the model was asked at (None: a local policy).
        sampling: Its sampling parameters (None: a local policy).
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
    pass_at_k_curve: list[float | None] = Field(default_factory=list)
    endpoint: str | None = None
    sampling: Sampling | None = None


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


class FailureExample(_Model):
    """One episode of a failure group, to look at."""

    task_key: str
    model: str
    sample: int = Field(ge=0)
    session_id: str | None = None
    transcript: str | None = None


class FailureGroup(_Model):
    """Failed or errored results sharing one kind and reason, with a few example episodes."""

    reason: str
    status: Literal["failed", "errored"]
    count: int = Field(ge=1)
    models: list[str]
    task_keys: list[str]
    kind: FailureKind | None = None
    examples: list[FailureExample] = Field(default_factory=list, max_length=EXAMPLES_PER_GROUP)


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
    retried: int = Field(default=0, ge=0)


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


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or [text])[0][:_MAX_ERROR]


def _failure(outcome: Outcome, threshold: float) -> tuple[FailureKind, str]:
    """The kind and reason of a failed or errored result (see the module docstring)."""
    if outcome.status == "errored":
        reason = _first_line(outcome.error) if outcome.error else "not graded (no verifier result)"
        if outcome.error_kind == "model":
            return "model_error", reason
        if outcome.error_kind == "verifier" or not outcome.error:
            return "not_graded", reason
        return "infrastructure_error", reason
    if outcome.done_reason == "max_steps":
        return "step_budget", "used every step of the budget"
    if outcome.feedback:
        return "verifier_feedback", _first_line(outcome.feedback)
    if outcome.error:  # a failure reason the source gave (a platform job's session)
        return "verifier_feedback", _first_line(outcome.error)
    if outcome.last_tool_error:
        return "tool_errors", _first_line(outcome.last_tool_error)
    return "below_threshold", f"score below {threshold:g}"


def _task_summary(
    task_key: str, model: str, rows: Sequence[Outcome], k: int
) -> tuple[TaskSummary, list[float]]:
    """One task under one model, and its pass@1 ... pass@min(k, graded) curve."""
    graded = [r for r in rows if r.status in ("passed", "failed")]
    passed = sum(1 for r in graded if r.status == "passed")
    curve = pass_at_k_curve(len(graded), passed, min(k, len(graded)))
    summary = TaskSummary(
        task_key=task_key,
        model=model,
        samples=len(rows),
        graded=len(graded),
        passed=passed,
        pass_rate=passed / len(graded) if graded else None,
        interval=_interval(passed, len(graded)),
        pass_at_k=curve[k - 1] if len(curve) >= k else None,
    )
    return summary, curve


def _curve(curves: Sequence[Sequence[float]], k: int) -> list[float | None]:
    """pass@1 ... pass@k of a model: at each j, the mean over its tasks with at least j graded."""
    points: list[list[float]] = [[] for _ in range(k)]
    for curve in curves:
        for j, value in enumerate(curve):
            points[j].append(value)
    return [_mean(values) for values in points]


def _model_summary(
    model: str,
    rows: Sequence[Outcome],
    *,
    tasks: Sequence[TaskSummary],
    curves: Sequence[Sequence[float]],
    k: int,
    endpoint: str | None,
    sampling: Sampling | None,
) -> ModelSummary:
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
        pass_at_k_curve=_curve(curves, k),
        endpoint=endpoint,
        sampling=sampling,
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


def _examples(rows: Sequence[Outcome]) -> list[FailureExample]:
    """A few episodes of a group: those with a transcript or session first, spread over tasks."""
    ranked = sorted(rows, key=lambda r: (r.transcript is None, r.session_id is None))
    picked: list[int] = []  # indexes into ranked: one per task first, then any
    tasks: set[str] = set()
    for index, r in enumerate(ranked):
        if len(picked) == EXAMPLES_PER_GROUP:
            break
        if r.task_key not in tasks:
            tasks.add(r.task_key)
            picked.append(index)
    taken = set(picked)
    picked += [i for i in range(len(ranked)) if i not in taken][: EXAMPLES_PER_GROUP - len(picked)]
    return [
        FailureExample(
            task_key=r.task_key,
            model=r.model,
            sample=r.sample,
            session_id=r.session_id,
            transcript=r.transcript,
        )
        for r in (ranked[i] for i in picked)
    ]


def _failure_groups(results: Sequence[Outcome], threshold: float) -> list[FailureGroup]:
    grouped: dict[tuple[str, FailureKind, str], list[Outcome]] = defaultdict(list)
    for r in results:
        if r.status in ("failed", "errored"):
            grouped[(r.status, *_failure(r, threshold))].append(r)
    groups = [
        FailureGroup(
            reason=reason,
            status="failed" if status == "failed" else "errored",
            count=len(rows),
            models=sorted({r.model for r in rows}),
            task_keys=sorted({r.task_key for r in rows}),
            kind=kind,
            examples=_examples(rows),
        )
        for (status, kind, reason), rows in grouped.items()
    ]
    return sorted(groups, key=lambda g: (-g.count, g.status, g.kind or "", g.reason))


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
    endpoints: Mapping[str, str] | None = None,
    sampling: Mapping[str, Sampling] | None = None,
    retried: int = 0,
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
        endpoints: The chat-completions URL of each model asked at one.
        sampling: The sampling parameters of each such model.
        retried: Errored episodes played again (``--retry-errored``).
    """
    by_slot: dict[tuple[str, str, int], Outcome] = {}
    for outcome in outcomes:
        by_slot.setdefault((outcome.task_key, outcome.model, outcome.sample), outcome)
    keys = list(dict.fromkeys(task_keys))
    model_ids = list(dict.fromkeys(models))
    extra_keys = sorted({key for key, _, _ in by_slot} - set(keys))
    keys += extra_keys  # results outside the plan are still reported
    model_ids += sorted({model for _, model, _ in by_slot} - set(model_ids))
    last_sample: dict[tuple[str, str], int] = {}
    for key, model, sample in by_slot:
        last_sample[(key, model)] = max(sample, last_sample.get((key, model), -1))
    results: list[Outcome] = []
    task_rows: list[TaskSummary] = []
    by_model: dict[str, list[Outcome]] = defaultdict(list)
    tasks_of: dict[str, list[TaskSummary]] = defaultdict(list)
    curves_of: dict[str, list[list[float]]] = defaultdict(list)
    for key in keys:
        for model in model_ids:
            rows = [
                by_slot.get((key, model, sample))
                or Outcome(task_key=key, model=model, sample=sample, status="pending")
                for sample in range(max(k, 1 + last_sample.get((key, model), -1)))
            ]
            row, curve = _task_summary(key, model, rows, k)
            results += rows
            task_rows.append(row)
            by_model[model] += rows
            tasks_of[model].append(row)
            curves_of[model].append(curve)
    summaries = [
        _model_summary(
            model,
            by_model[model],
            tasks=tasks_of[model],
            curves=curves_of[model],
            k=k,
            endpoint=(endpoints or {}).get(model),
            sampling=(sampling or {}).get(model),
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
        retried=retried,
    )
    return ReportEnvelope(
        run_id=run_id,
        source=source,
        suite=Suite(name=suite_name, task_keys=keys, models=model_ids, k=k),
        report=report,
    )


@dataclass(frozen=True)
class Inconsistency:
    """Where a report disagrees with its own results.

    Attributes:
        path: The field, from the envelope down (``("report", "models", 0, "passed")``).
        expected: What the results give there.
        found: What the report says.
    """

    path: tuple[str | int, ...]
    expected: Any
    found: Any


def inconsistency(envelope: ReportEnvelope) -> Inconsistency | None:
    """The first place where ``envelope`` says something its own results do not give, or None.

    Everything but the results (and the run's inputs: ids, names, k, threshold, endpoints and
    sampling, ``created_at``, ``retried``) is what :func:`build_report` computes from them, so the
    envelope is built again from its results and compared field by field (floats within 1e-9).
    Before that, the results must fill exactly the slots of the suite (each task and model, ``k``
    samples or up to the highest sample given): so the rebuild costs what the results do.

    Args:
        envelope: The report, e.g. one uploaded for import.
    """
    report, suite = envelope.report, envelope.suite
    if report.k != suite.k:
        return Inconsistency(("report", "k"), suite.k, report.k)
    k = suite.k
    keys, models = set(suite.task_keys), set(suite.models)
    last: dict[tuple[str, str], int] = {}
    for r in report.results:
        last[(r.task_key, r.model)] = max(r.sample, last.get((r.task_key, r.model), -1))
    pairs = len(keys | {key for key, _ in last}) * len(models | {model for _, model in last})
    slots = (pairs - len(last)) * k + sum(max(k, 1 + sample) for sample in last.values())
    if slots != len(report.results):
        return Inconsistency(("report", "results"), f"{slots} results", f"{len(report.results)} results")
    rebuilt = build_report(
        run_id=envelope.run_id,
        source=envelope.source,
        suite_name=suite.name,
        task_keys=suite.task_keys,
        models=suite.models,
        k=k,
        outcomes=report.results,
        created_at=report.created_at,
        pass_threshold=report.pass_threshold,
        endpoints={m.model: m.endpoint for m in report.models if m.endpoint is not None},
        sampling={m.model: m.sampling for m in report.models if m.sampling is not None},
        retried=report.retried,
    )
    found = _difference(rebuilt, envelope, ())
    return None if found is None else Inconsistency(*found)


def _difference(expected: Any, found: Any, path: tuple[str | int, ...]) -> tuple[Any, ...] | None:
    """(path, expected, found) of the first difference of two values of the same model, or None."""
    if isinstance(expected, BaseModel) and type(found) is type(expected):
        for name in type(expected).model_fields:
            difference = _difference(getattr(expected, name), getattr(found, name), (*path, name))
            if difference is not None:
                return difference
        return None
    if isinstance(expected, list) and isinstance(found, list):
        if len(expected) != len(found):
            return (path, f"{len(expected)} items", f"{len(found)} items")
        for index, (a, b) in enumerate(zip(expected, found, strict=True)):
            difference = _difference(a, b, (*path, index))
            if difference is not None:
                return difference
        return None
    if isinstance(expected, float) and isinstance(found, float):
        return None if math.isclose(expected, found, rel_tol=1e-9, abs_tol=1e-12) else (path, expected, found)
    same = expected == found and type(expected) is type(found)
    return None if same else (path, expected, found)
