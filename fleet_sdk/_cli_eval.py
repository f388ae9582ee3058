"""``fleet-sdk eval`` and ``fleet-sdk report``: evaluate tasks across models, then render the report.

``eval`` runs on an embedded local server by default (its state kept in ``<run dir>/server-data``
so a resumed run and the stored sessions live on), or against the platform with ``--remote``
(``FLEET_API_KEY``, ``FLEET_BASE_URL``...). Episodes are played here (the client-side runner) or,
with ``--jobs``, by the server as jobs; either way each is stored in the run directory as it ends,
so Ctrl-C and SIGTERM keep what finished and ``--resume`` plays only the rest. ``report``
(``_cli_report``) renders a run directory as JSON, Markdown or HTML, or compares it with another.

A run is meant to be left running, so ``eval`` checks what it can before spending time: every
flag (one line per problem, naming the flag, exit 2), the tasks against the bundled ones before
the embedded server starts, and every model (a local policy, or an endpoint that answers one
small request). The run directory remembers everything but keys, so ``--resume`` needs only
``--out-dir``; a flag given again that contradicts the run is refused. Exit codes:
``EXIT_CODES``.

This module wires the command: the flags become ``EvalFlags`` (``_cli_eval_flags``), then a
``Plan`` against the run directory (``_cli_eval_plan``); the run is played on a server with a
progress bar and closed with a summary (``_cli_eval_progress``).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from ._cli_eval_flags import DEFAULT_DEADLINE, EvalFlags, UsageError, add_eval_arguments
from ._cli_eval_plan import Plan, make_plan, probe, select_tasks
from ._cli_eval_progress import ProgressBar, errored_share, write_stopped, write_summary

if TYPE_CHECKING:
    from ._client import AsyncFleet
    from .reports import ReportEnvelope

__all__ = ["EXIT_CODES", "add_commands"]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_ERRORED = 3
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report a Ctrl-C; ``serve`` exits with it too
EXIT_TERMINATED = 143  # 128 + SIGTERM
EXIT_CODES = {
    EXIT_OK: "every episode was graded (or no more errored than --max-errored allows)",
    EXIT_FAILED: "the run stopped on a server or platform error",
    EXIT_USAGE: "a flag is wrong, a task or model cannot be used, or a resume contradicts the run",
    EXIT_ERRORED: "the run finished, but more episodes errored than --max-errored allows",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C); what finished is kept, resume with --resume",
    EXIT_TERMINATED: "stopped by SIGTERM, as cleanly as by Ctrl-C; what finished is kept",
}
"""What each exit code of ``fleet-sdk eval`` means (the README's table)."""


def _ray_executor(plan: Plan, client_options: dict[str, Any]) -> Any:
    """The ``RayExecutor`` of ``--ray [ADDRESS]``: join ADDRESS, or start a local Ray without one."""
    from .evaluation._runner import DEFAULT_CONCURRENCY

    try:
        from .integrations.ray import RayExecutor
    except ImportError:
        raise UsageError(["--ray: install the 'ray' extra (pip install 'fleet-sdk[ray]')"]) from None
    address = plan.flags.ray
    return RayExecutor(
        client_options,
        address=address or None,
        concurrency_per_actor=plan.concurrency or DEFAULT_CONCURRENCY,
        init_options={} if address else {"include_dashboard": False},
    )


async def _eval_jobs(fleet: AsyncFleet, plan: Plan, bar: ProgressBar) -> ReportEnvelope:
    from .evaluation._jobs_run import run_job_evaluation

    tasks, suite = ([], "") if plan.resume else await select_tasks(fleet, plan.flags)
    return await run_job_evaluation(
        fleet,
        plan.run_dir,
        tasks=tasks,
        models=plan.models,
        k=plan.k,
        max_steps=plan.max_steps,
        suite_name=suite or "tasks",
        run_id=None if plan.resume else plan.flags.run_id,
        resume=plan.resume,
        retry_errored=plan.retry_errored,
        deadline=plan.flags.deadline or DEFAULT_DEADLINE,
        on_progress=bar,
        endpoints={m: e.base_url for m, e in plan.endpoints.items()},
        server=plan.server,
        extra={"selection": plan.selection},
    )


async def _eval_here(
    fleet: AsyncFleet, plan: Plan, bar: ProgressBar, client_options: dict[str, Any]
) -> ReportEnvelope:
    from .evaluation import run_evaluation

    tasks, suite = ([], "") if plan.resume else await select_tasks(fleet, plan.flags)
    executor = _ray_executor(plan, client_options) if plan.flags.ray is not None else None
    try:
        return await run_evaluation(
            fleet,
            plan.run_dir,
            tasks=tasks or None,
            models=None if plan.resume else plan.models,
            k=plan.k,
            concurrency=plan.concurrency,
            max_steps=plan.max_steps,
            suite_name=suite or "tasks",
            run_id=None if plan.resume else plan.flags.run_id,
            resume=plan.resume,
            model_endpoints=plan.endpoints,
            on_progress=bar,
            executor=executor,
            retry_errored=plan.retry_errored,
            preflight=False,  # probe() asked every endpoint before the server started
            server=plan.server,
            extra={"selection": plan.selection},
        )
    finally:
        if executor is not None:
            executor.shutdown()


async def _eval(plan: Plan, out: TextIO) -> ReportEnvelope:
    """Start the server (or connect to the platform), play the run, return its report."""
    from ._cli_logging import warnings_beside

    await probe(plan)
    bar = ProgressBar(out)
    with warnings_beside(bar, prefix="fleet-sdk eval"):
        return await _eval_on_server(plan, bar, out)


async def _eval_on_server(plan: Plan, bar: ProgressBar, out: TextIO) -> ReportEnvelope:
    """Start the server (or connect to the platform) and play the run with ``bar`` drawing."""
    from ._client import AsyncFleet

    try:
        if plan.server.get("kind") == "remote":
            urls = {name: plan.server[name] for name in ("base_url", "platform_url") if plan.server.get(name)}
            async with AsyncFleet(**urls) as fleet:
                server = {
                    "kind": "remote",
                    "base_url": fleet.config.base_url,
                    "platform_url": fleet.config.platform_url,
                }
                plan = dataclasses.replace(plan, server=server)
                return await (_eval_jobs(fleet, plan, bar) if plan.jobs else _eval_here(fleet, plan, bar, {}))
        import anyio

        from ._server_plugin import LocalFleet

        settings: dict[str, Any] = {}
        if plan.jobs and plan.endpoints:  # the embedded server asks the models of its job itself
            endpoint = next(iter(plan.endpoints.values()))
            settings["model_base_url"] = endpoint.base_url
            if endpoint.api_key:
                os.environ.setdefault("FLEET_LOCAL_MODEL_API_KEY", endpoint.api_key)
        out.write("Starting the embedded local Fleet server...\n")
        out.flush()
        local = LocalFleet(plan.run_dir / "server-data", **settings)
        try:
            # Not cancellable: a Ctrl-C during startup lets it finish, then stops it below.
            await anyio.to_thread.run_sync(local.start)
            fleet = local.async_fleet()
            url = local.base_url  # Ray actors build their own clients of this server
            options = {"api_key": local.api_key, "base_url": url, "platform_url": url, "browser_url": url}
            try:
                if plan.jobs:
                    return await _eval_jobs(fleet, plan, bar)
                return await _eval_here(fleet, plan, bar, options)
            finally:
                await fleet.close()
        finally:
            await anyio.to_thread.run_sync(local.stop)
    finally:
        bar.close()


def _finish(envelope: ReportEnvelope, plan: Plan, out: TextIO) -> int:
    """Print the verdict and the counts, write the HTML report; the exit code by errored episodes."""
    write_summary(envelope, plan, out)
    errored, total = errored_share(envelope)
    max_errored = plan.flags.max_errored
    if total and errored / total > max_errored:
        sys.stderr.write(
            f"fleet-sdk eval: {errored} of {total} episodes errored ({100 * errored / total:.0f}%), more "
            f"than --max-errored {max_errored:g} allows (exit {EXIT_ERRORED}); see the report's "
            f"Failures, or play them again: fleet-sdk eval --out-dir {plan.run_dir} --retry-errored\n"
        )
        return EXIT_ERRORED
    return EXIT_OK


def _usage(lines: Sequence[str]) -> int:
    for line in lines:
        sys.stderr.write(f"fleet-sdk eval: error: {line}\n")
    return EXIT_USAGE


@contextlib.contextmanager
def _holding(run_dir: Path) -> Iterator[None]:
    """Hold the run directory while the run plays (a directory made for nothing is removed).

    Raises:
        UsageError: Another process holds it.
    """
    from .evaluation import RUN_FILE
    from .evaluation._runlock import LOCK_FILE, RunBusyError, RunLock

    made = not run_dir.exists()
    try:
        with RunLock(run_dir):
            yield
    except RunBusyError as exc:
        raise UsageError([f"--out-dir: {exc}; wait for it to end, or stop it (Ctrl-C) and resume"]) from None
    finally:
        if made and not (run_dir / RUN_FILE).exists():
            with contextlib.suppress(OSError):
                (run_dir / LOCK_FILE).unlink()
                run_dir.rmdir()


def _run_eval(args: argparse.Namespace) -> int:
    from ._cli_signals import Terminated, run
    from ._exceptions import EvaluationError, EvaluationTimeoutError, FleetError

    started = time.monotonic()
    plan = None
    try:
        plan = make_plan(EvalFlags.from_namespace(args))
        with _holding(plan.run_dir):
            envelope = run(_eval(plan, sys.stdout))
    except KeyboardInterrupt:
        write_stopped(plan, "interrupted")
        return EXIT_INTERRUPTED
    except Terminated as exc:
        write_stopped(plan, "terminated (SIGTERM)")
        return exc.exit_code
    except EvaluationTimeoutError as exc:  # before EvaluationError: the run is kept, not misused
        sys.stderr.write(f"fleet-sdk eval: error: {exc}\n")
        return EXIT_FAILED
    except UsageError as exc:
        return _usage(exc.lines)
    except EvaluationError as exc:  # a check of the runner the plan did not foresee
        return _usage([str(exc)])
    except (FleetError, OSError) as exc:
        sys.stderr.write(f"fleet-sdk eval: error: {type(exc).__name__}: {exc}\n")
        return EXIT_FAILED
    code = _finish(envelope, plan, sys.stdout)
    sys.stdout.write(f"Done in {time.monotonic() - started:.1f}s.\n")
    return code


def add_commands(commands: Any) -> None:
    """Add ``eval`` and ``report`` to the ``fleet-sdk`` subcommands.

    Args:
        commands: The ``add_subparsers()`` object of the main parser.
    """
    from ._cli_args import one_line_errors

    codes = "; ".join(f"{code} {meaning}" for code, meaning in EXIT_CODES.items())
    ev = commands.add_parser(
        "eval",
        help="evaluate tasks across models (pass@k), resumable",
        description="Evaluate tasks across models (pass@k). Flags marked [MODEL=] take a value for "
        "every endpoint model, or MODEL=VALUE for one of them. Keys come from the environment "
        "(FLEET_EVAL_MODEL_API_KEY, FLEET_API_KEY), never from the run directory.",
        epilog=f"exit codes: {codes}",
    )
    add_eval_arguments(ev, errored_exit=EXIT_ERRORED)
    ev.set_defaults(handler=_run_eval)
    one_line_errors(ev)

    from ._cli_report import add_report_command

    add_report_command(commands)
