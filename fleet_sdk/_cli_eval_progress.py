"""What ``fleet-sdk eval`` tells its user while and after it plays: the progress bar, the closing
verdict and counts, and, when stopped, what is kept and how to go on."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from ._cli_eval_plan import Plan
    from .evaluation import Progress
    from .reports import ReportEnvelope

__all__ = ["ProgressBar", "errored_share", "retried_line", "write_stopped", "write_summary"]

_BAR = 30


class ProgressBar:
    """A one-line progress bar on a terminal; a line every 10% otherwise (a log stays short).

    Args:
        out: Where to draw.
    """

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._tty = out.isatty()
        self._last_decile = -1
        self._drawn = False

    def __call__(self, progress: Progress) -> None:
        filled = int(_BAR * progress.done / max(progress.total, 1))
        rate = "n/a" if progress.pass_rate is None else f"{100 * progress.pass_rate:.1f}%"
        eta = "--" if progress.eta is None else f"{progress.eta:.0f}s"
        line = (
            f"[{'#' * filled}{'.' * (_BAR - filled)}] {progress.done}/{progress.total} episodes"
            f"  pass rate {rate}  ETA {eta}"
        )
        if self._tty:
            self.out.write("\r" + line)
            self._drawn = True
        else:
            decile = 10 * progress.done // max(progress.total, 1)
            if decile == self._last_decile and progress.done != progress.total:
                return
            self._last_decile = decile
            self.out.write(line + "\n")
        self.out.flush()

    def break_line(self) -> None:
        """End the bar's line, so that what is written next starts a line of its own."""
        if self._tty and self._drawn:
            self.out.write("\n")
            self.out.flush()
            self._drawn = False

    def close(self) -> None:
        """End the bar's line."""
        self.break_line()


def _write_html(envelope: ReportEnvelope, run_dir: Path) -> Path:
    """The HTML report, written into the run directory (its transcript links relative to it)."""
    from .reports import filename, to_html

    path = run_dir / filename(envelope.run_id, "html")
    path.write_text(to_html(envelope, transcript_base=""), encoding="utf-8")
    return path


def retried_line(retried: int, before: int) -> str:
    """What ``--retry-errored`` did this time (the report counts every retry of the run)."""
    now = retried - before
    if now == 0:
        return "No errored episodes to retry: none were played again.\n"
    line = f"Retried {now} errored {'episode' if now == 1 else 'episodes'}"
    return line + (f" ({retried} over every retry of this run).\n" if before else ".\n")


def write_summary(envelope: ReportEnvelope, plan: Plan, out: TextIO) -> None:
    """Print the verdict and the counts, write the HTML report and say where it is.

    Args:
        envelope: The run's report.
        plan: The run's plan.
        out: Where to write.
    """
    from .reports import to_markdown

    out.write("\n" + to_markdown(envelope, part="verdict"))
    for summary in envelope.report.models:
        rate = "n/a" if summary.pass_rate is None else f"{100 * summary.pass_rate:.1f}%"
        out.write(
            f"{summary.model}: {summary.passed}/{summary.passed + summary.failed} graded passed ({rate}),"
            f" {summary.errored} errored\n"
        )
    if plan.retry_errored:
        out.write(retried_line(envelope.report.retried, plan.manifest.retried if plan.manifest else 0))
    page = _write_html(envelope, plan.run_dir)
    out.write(f"\nRun directory: {plan.run_dir}\nReport: {page}\n")


def errored_share(envelope: ReportEnvelope) -> tuple[int, int]:
    """``(errored, total)`` episodes of the report (a pending one counts as errored)."""
    total = len(envelope.report.results)
    errored = sum(1 for r in envelope.report.results if r.status in ("errored", "pending"))
    return errored, total


def write_stopped(plan: Plan | None, how: str) -> None:
    """After Ctrl-C or SIGTERM: say on stderr what is kept and how to go on.

    Args:
        plan: The run's plan (None: stopped before the flags were checked).
        how: What stopped it, as the message says it.
    """
    from .evaluation import RunDir

    sys.stdout.flush()
    manifest = None
    if plan is not None and RunDir.exists(plan.run_dir):
        with RunDir(plan.run_dir) as store:
            manifest = store.manifest()
            stored = len(store.finished())
    if plan is None or manifest is None:
        sys.stderr.write(f"\nfleet-sdk eval: {how} before the run started; nothing was stored.\n")
    else:
        total = len(manifest.tasks) * len(manifest.models) * manifest.k
        sys.stderr.write(
            f"\nfleet-sdk eval: {how}; {stored} of {total} episodes are stored in {plan.run_dir}.\n"
            f"Resume with: fleet-sdk eval --out-dir {plan.run_dir} --resume\n"
        )
