"""``fleet-sdk report``: render a run directory as JSON, Markdown or HTML, or compare two runs.

Every flag is checked against the others and against the run before anything is written: a flag
that would be ignored (``--part`` with ``--format html``, ``--model`` without ``--part
fix_items``...) is refused, and a model or task the run does not have is named with the closest
one. One line per problem, exit 2; a file that cannot be written is one line, exit 1.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from .reports import ReportEnvelope

Format = Literal["json", "md", "html"]

__all__ = ["add_report_command"]

_OK, _FAILED, _USAGE = 0, 1, 2
_DEFAULT_FORMAT: Literal["md"] = "md"
_DEFAULT_THEME: Literal["auto"] = "auto"


def _close(word: str, choices: Sequence[str]) -> str:
    found = difflib.get_close_matches(word, list(choices), n=1)
    return f"; did you mean {found[0]!r}?" if found else f" (it has {', '.join(choices)})"


def _flag_problems(args: argparse.Namespace) -> list[str]:
    """Flags that contradict each other (nothing read yet), one line each."""
    problems: list[str] = []
    fmt = args.format or _DEFAULT_FORMAT
    if args.compare is not None:
        for flag, value in (("--part", args.part), ("--model", args.model), ("--scenario", args.scenario)):
            if value is not None:
                problems.append(f"{flag}: not with --compare, which compares whole runs")
    if args.part is not None and fmt != "md":
        problems.append(f"--part: parts are Markdown; drop --format {fmt} or --part {args.part}")
    if args.model is not None and args.compare is None and args.part != "fix_items":
        problems.append("--model: narrows --part fix_items only; add --part fix_items")
    if args.scenario is not None and args.compare is None and args.part != "scenario":
        problems.append("--scenario: names the task of --part scenario only; add --part scenario")
    if args.part == "scenario" and args.scenario is None:
        problems.append("--part scenario: needs --scenario TASK_KEY, the task to show")
    if args.theme is not None and fmt != "html":
        problems.append(f"--theme: colours the HTML report only; drop it or use --format html (not {fmt})")
    return problems


def _run_problems(args: argparse.Namespace, envelope: ReportEnvelope) -> list[str]:
    """A model or task named that the run does not have (with the closest one)."""
    problems: list[str] = []
    if args.model is not None and args.model not in envelope.suite.models:
        problems.append(
            f"--model {args.model}: not a model of this run{_close(args.model, envelope.suite.models)}"
        )
    if args.scenario is not None and args.scenario not in envelope.suite.task_keys:
        hint = _close(args.scenario, envelope.suite.task_keys)
        problems.append(f"--scenario {args.scenario}: not a task of this run{hint}")
    return problems


def _transcript_base(run_dir: Path, output: Path | None) -> str:
    """The run directory as seen from where the report is written (a ``file:`` URL for stdout)."""
    if output is None:
        return run_dir.resolve().as_uri() + "/"
    relative = os.path.relpath(run_dir.resolve(), output.resolve().parent)
    return "" if relative == "." else relative.replace(os.sep, "/") + "/"


def _fail(code: int, lines: Sequence[str]) -> int:
    for line in lines:
        sys.stderr.write(f"fleet-sdk report: error: {line}\n")
    return code


def _render(args: argparse.Namespace, fmt: Format, target: Path | None) -> tuple[str, str] | list[str]:
    """The report's text and default file name, or the problems found."""
    from .evaluation import RunDir
    from .reports import compare, filename, render, to_markdown

    for path in (args.run_dir, args.compare):
        if path is not None and not RunDir.exists(path):
            return [f"{path} is not a run directory"]
    with RunDir(args.run_dir) as store:
        envelope = store.envelope()
    problems = _run_problems(args, envelope)
    if problems:
        return problems
    if args.compare is not None:
        with RunDir(args.compare) as other:
            base = other.envelope()
        comparison = compare(base, envelope)
        text = {"json": comparison.to_json, "md": comparison.to_markdown, "html": comparison.to_html}[fmt]()
        return text, f"{base.run_id}-vs-{envelope.run_id}.{fmt}"
    name = filename(envelope.run_id, fmt, args.part)
    links = _transcript_base(Path(args.run_dir), None if target is None else _file_in(target, name))
    if args.part is not None:
        text = to_markdown(
            envelope, part=args.part, model=args.model, scenario=args.scenario, transcript_base=links
        )
    else:
        text = render(envelope, fmt, theme=args.theme or _DEFAULT_THEME, transcript_base=links)
    return text, name


def _file_in(target: Path, name: str) -> Path:
    return target / name if target.is_dir() else target


def _run_report(args: argparse.Namespace) -> int:
    from ._exceptions import FleetError

    problems = _flag_problems(args)
    if problems:
        return _fail(_USAGE, problems)
    fmt: Format = args.format or _DEFAULT_FORMAT
    target = None if args.output is None else Path(args.output)
    try:
        rendered = _render(args, fmt, target)
    except (FleetError, OSError, ValueError) as exc:  # an unreadable run directory
        return _fail(_FAILED, [f"{args.run_dir}: {type(exc).__name__}: {exc}"])
    if isinstance(rendered, list):
        return _fail(_USAGE, rendered)
    text, name = rendered
    if target is None:
        sys.stdout.write(text)
        return _OK
    path = _file_in(target, name)
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        return _fail(_FAILED, [f"--output {args.output}: {exc.strerror or exc}"])
    sys.stderr.write(f"wrote {path}\n")
    return _OK


def add_report_command(commands: Any) -> None:
    """Add ``report`` to the ``fleet-sdk`` subcommands.

    Args:
        commands: The ``add_subparsers()`` object of the main parser.
    """
    from ._cli_args import choice, one_line_errors

    rp = commands.add_parser(
        "report",
        help="render a run directory as JSON, Markdown or HTML",
        description="Render the report of a run directory (fleet-sdk eval --out-dir) as JSON, Markdown "
        "or HTML, one Markdown part of it, or its comparison with another run. Writes to stdout, "
        "or to --output.",
    )
    rp.add_argument("run_dir", help="the run directory (fleet-sdk eval --out-dir)")
    rp.add_argument(
        "--format",
        type=choice(("json", "md", "html")),
        metavar="{json,md,html}",
        default=None,
        help=f"output format (default: {_DEFAULT_FORMAT})",
    )
    rp.add_argument(
        "--part",
        type=choice(("verdict", "fix_items", "scenario")),
        metavar="{verdict,fix_items,scenario}",
        help="only this part of the Markdown report (default: the whole report)",
    )
    rp.add_argument(
        "--model", default=None, help="with --part fix_items: only this model's (default: every model's)"
    )
    rp.add_argument(
        "--scenario", default=None, metavar="TASK_KEY", help="with --part scenario: the task to show"
    )
    rp.add_argument(
        "--compare",
        default=None,
        metavar="OTHER",
        help="compare against this base run directory (default: none)",
    )
    rp.add_argument(
        "--theme",
        type=choice(("light", "dark", "auto")),
        metavar="{light,dark,auto}",
        default=None,
        help=f"colours of --format html (default: {_DEFAULT_THEME}, the viewer's)",
    )
    rp.add_argument(
        "--output", "-o", default=None, help="a file, or a directory to write it in (default: stdout)"
    )
    rp.set_defaults(handler=_run_report)
    one_line_errors(rp)
