"""``fleet-sdk eval`` and ``fleet-sdk report``: evaluate tasks across models, then render the report.

``eval`` runs on an embedded local server by default (its state kept in ``<run dir>/server-data``
so a resumed run and the stored sessions live on), or against the platform with ``--remote``
(``FLEET_API_KEY``, ``FLEET_BASE_URL``...). Episodes are played here (the client-side runner) or,
with ``--jobs``, by the server as one job. ``report`` renders a run directory as JSON, Markdown
or HTML, or compares it with another run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from ._client import AsyncFleet
    from .evaluation import Progress

__all__ = ["add_commands"]

DEFAULT_MODELS = ("local/scripted", "local/random")
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
        else:
            decile = 10 * progress.done // max(progress.total, 1)
            if decile == self._last_decile and progress.done != progress.total:
                return
            self._last_decile = decile
            self.out.write(line + "\n")
        self.out.flush()

    def close(self) -> None:
        """End the bar's line."""
        if self._tty:
            self.out.write("\n")
            self.out.flush()


async def _select_tasks(fleet: AsyncFleet, args: argparse.Namespace) -> tuple[list[Any], str]:
    from .tasks import load_tasks

    tasks: list[Any] = []
    names: list[str] = []
    for path in args.tasks_file or []:
        tasks += load_tasks(path)
        names.append(Path(path).stem)
    for env_key in args.env or []:
        listed = (await fleet.api.control_plane.list_tasks(env_key=env_key)).tasks
        if not listed:
            raise SystemExit(f"fleet-sdk eval: --env {env_key}: the server has no tasks for it")
        tasks += [t.model_dump() for t in listed]
        names.append(env_key)
    if args.task_key:
        wanted = set(args.task_key)
        listed = (await fleet.api.control_plane.list_tasks()).tasks
        found = [t.model_dump() for t in listed if t.task_key in wanted]
        missing = wanted - {t["task_key"] for t in found}
        if missing:
            raise SystemExit(f"fleet-sdk eval: --task-key: unknown task(s) {sorted(missing)}")
        tasks += found
        names.append("tasks")
    if not tasks and not (args.env or args.tasks_file or args.task_key):
        tasks = [t.model_dump() for t in (await fleet.api.control_plane.list_tasks()).tasks]
        names.append("all")
    unique = {str(t["task_key"] if isinstance(t, dict) else t.task_key): t for t in tasks}
    return list(unique.values()), "+".join(names)


def _ray_executor(args: argparse.Namespace, client_options: dict[str, Any]) -> Any:
    """The ``RayExecutor`` of ``--ray [ADDRESS]``: join ADDRESS, or start a local Ray without one."""
    try:
        from .integrations.ray import RayExecutor
    except ImportError:
        raise SystemExit(
            "fleet-sdk eval --ray: install the 'ray' extra (pip install 'fleet-sdk[ray]')"
        ) from None
    return RayExecutor(
        client_options,
        address=args.ray or None,
        concurrency_per_actor=args.concurrency,
        init_options={} if args.ray else {"include_dashboard": False},
    )


async def _eval_with(
    fleet: AsyncFleet, args: argparse.Namespace, out: TextIO, client_options: dict[str, Any] | None = None
) -> int:
    from .evaluation import ModelEndpoint, RunDir, evaluate_job, run_evaluation
    from .evaluation._rundir import RunManifest
    from .reports import to_markdown

    run_dir = Path(args.out_dir)
    bar = ProgressBar(out)
    if args.jobs:
        if RunDir.exists(run_dir):  # refuse before the server spends a job on it
            raise SystemExit(f"fleet-sdk eval: {run_dir} already holds a run")
        tasks, suite = await _select_tasks(fleet, args)
        keys = [str(t["task_key"] if isinstance(t, dict) else t.task_key) for t in tasks]
        envelope = await evaluate_job(
            fleet,
            models=args.model or list(DEFAULT_MODELS),
            task_keys=keys,
            pass_k=args.k,
            max_steps=args.max_steps,
            name=suite,
            run_id=args.run_id,
            deadline=args.deadline,
            on_progress=bar,
        )
        with RunDir(run_dir) as store:
            store.start(
                RunManifest(
                    run_id=envelope.run_id,
                    suite_name=envelope.suite.name,
                    tasks=[{"task_key": key} for key in envelope.suite.task_keys],
                    models=envelope.suite.models,
                    k=envelope.report.k,
                    created_at=envelope.report.created_at or "",
                    source="platform",
                    job_id=envelope.source.job_id,
                )
            )
            for outcome in envelope.report.results:
                if outcome.status != "pending":
                    store.record(outcome)
    else:
        tasks, suite = ([], "") if args.resume else await _select_tasks(fleet, args)
        endpoint = (
            ModelEndpoint(args.model_base_url, os.environ.get("FLEET_EVAL_MODEL_API_KEY") or None)
            if args.model_base_url
            else None
        )
        executor = _ray_executor(args, client_options or {}) if args.ray is not None else None
        try:
            envelope = await run_evaluation(
                fleet,
                run_dir,
                tasks=tasks or None,
                models=None if args.resume and not args.model else (args.model or list(DEFAULT_MODELS)),
                k=args.k,
                concurrency=args.concurrency,
                max_steps=args.max_steps,
                suite_name=suite or "tasks",
                run_id=args.run_id,
                resume=args.resume,
                model_endpoint=endpoint,
                on_progress=bar,
                executor=executor,
            )
        finally:
            if executor is not None:
                executor.shutdown()
    bar.close()
    out.write("\n" + to_markdown(envelope, part="verdict"))
    for summary in envelope.report.models:
        rate = "n/a" if summary.pass_rate is None else f"{100 * summary.pass_rate:.1f}%"
        out.write(
            f"{summary.model}: {summary.passed}/{summary.passed + summary.failed} graded passed ({rate}),"
            f" {summary.errored} errored\n"
        )
    out.write(f"\nRun directory: {run_dir}\nReport: fleet-sdk report {run_dir} --format html\n")
    return 0


async def _eval(args: argparse.Namespace, out: TextIO) -> int:
    from ._client import AsyncFleet
    from ._exceptions import FleetError

    try:
        if args.remote:
            async with AsyncFleet() as fleet:
                return await _eval_with(fleet, args, out)
        from fleet_local import LocalFleet

        server_data = Path(args.out_dir) / "server-data"
        out.write("Starting the embedded local Fleet server...\n")
        async with LocalFleet(server_data) as local:
            fleet = local.async_fleet()
            url = local.base_url  # Ray actors build their own clients of this server
            options = {"api_key": local.api_key, "base_url": url, "platform_url": url, "browser_url": url}
            try:
                return await _eval_with(fleet, args, out, options)
            finally:
                await fleet.close()
    except FleetError as exc:
        sys.stderr.write(f"fleet-sdk eval: {exc}\n")
        return 2


def _run_eval(args: argparse.Namespace) -> int:
    if args.k < 1:
        raise SystemExit("fleet-sdk eval: -k must be at least 1")
    if args.concurrency < 1:
        raise SystemExit("fleet-sdk eval: --concurrency must be at least 1")
    started = time.monotonic()
    code = asyncio.run(_eval(args, sys.stdout))
    sys.stdout.write(f"Done in {time.monotonic() - started:.1f}s.\n")
    return code


def _run_report(args: argparse.Namespace) -> int:
    from .evaluation import RunDir
    from .reports import UnknownPartError, compare, filename, render, to_markdown

    for path in (args.run_dir, args.compare):
        if path is not None and not RunDir.exists(path):
            raise SystemExit(f"fleet-sdk report: {path} is not a run directory")
    with RunDir(args.run_dir) as store:
        envelope = store.envelope()
    if args.compare is not None:
        with RunDir(args.compare) as other:
            base = other.envelope()
        comparison = compare(base, envelope)
        text = {"json": comparison.to_json, "md": comparison.to_markdown, "html": comparison.to_html}[
            args.format
        ]()
        name = f"{base.run_id}-vs-{envelope.run_id}.{args.format}"
    else:
        try:
            if args.format == "md" and (args.part or args.model or args.scenario):
                text = to_markdown(envelope, part=args.part, model=args.model, scenario=args.scenario)
            else:
                text = render(envelope, args.format)
        except UnknownPartError as exc:
            raise SystemExit(f"fleet-sdk report: {exc}") from None
        name = filename(envelope.run_id, args.format, args.part)
    if args.output is None:
        sys.stdout.write(text)
    else:
        target = Path(args.output)
        if target.is_dir():
            target = target / name
        target.write_text(text, encoding="utf-8")
        sys.stderr.write(f"wrote {target}\n")
    return 0


def add_commands(commands: Any) -> None:
    """Add ``eval`` and ``report`` to the ``fleet-sdk`` subcommands.

    Args:
        commands: The ``add_subparsers()`` object of the main parser.
    """
    ev = commands.add_parser(
        "eval",
        help="evaluate tasks across models (pass@k), resumable",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ev.add_argument("--env", action="append", help="run every task of this environment (repeatable)")
    ev.add_argument("--tasks-file", action="append", help="a task file, JSON (repeatable)")
    ev.add_argument("--task-key", action="append", help="run this task (repeatable)")
    ev.add_argument(
        "--model",
        action="append",
        help="model id (repeatable; default: local/scripted and local/random)",
    )
    ev.add_argument("-k", type=int, default=1, help="samples per task and model (the k of pass@k)")
    ev.add_argument("--concurrency", type=int, default=4, help="episodes at once")
    ev.add_argument("--max-steps", type=int, default=30, help="step budget per episode")
    ev.add_argument("--out-dir", default="./fleet-eval", help="the run directory")
    ev.add_argument("--run-id", default=None, help="the run id (default: run-<time>-<random>)")
    ev.add_argument("--resume", action="store_true", help="continue the run in --out-dir")
    ev.add_argument("--jobs", action="store_true", help="let the server run the episodes as a job")
    ev.add_argument("--deadline", type=float, default=3600.0, help="seconds to wait for a job (--jobs)")
    ev.add_argument(
        "--model-base-url",
        default=None,
        help="OpenAI-compatible chat-completions URL for other models (key: FLEET_EVAL_MODEL_API_KEY)",
    )
    ev.add_argument("--remote", action="store_true", help="use the platform (FLEET_API_KEY) instead")
    ev.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="play the episodes on Ray actors: join the cluster at ADDRESS ('auto', 'ray://head:10001'), "
        "or start a local Ray without one; --concurrency is then per actor (one actor per node). "
        "With --remote the actors read FLEET_API_KEY from their own environment",
    )
    ev.set_defaults(handler=_run_eval)

    rp = commands.add_parser("report", help="render a run directory as JSON, Markdown or HTML")
    rp.add_argument("run_dir", help="the run directory (fleet-sdk eval --out-dir)")
    rp.add_argument("--format", choices=("json", "md", "html"), default="md", help="output format")
    rp.add_argument("--part", choices=("verdict", "fix_items", "scenario"), help="one Markdown part")
    rp.add_argument("--model", default=None, help="with --part fix_items: only this model")
    rp.add_argument("--scenario", default=None, help="with --part scenario: the task key")
    rp.add_argument("--compare", default=None, metavar="OTHER", help="compare against this base run")
    rp.add_argument("--output", "-o", default=None, help="a file or directory (default: stdout)")
    rp.set_defaults(handler=_run_report)
