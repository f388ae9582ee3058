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
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import json
import os
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

if TYPE_CHECKING:
    from ._client import AsyncFleet
    from .evaluation import Progress, RunManifest
    from .policies import ModelEndpoint, SamplingParams
    from .reports import ReportEnvelope

__all__ = ["EXIT_CODES", "add_commands"]

DEFAULT_MODELS = ("local/scripted", "local/random")
_BAR = 30

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

_SAMPLING_FLAGS = {
    "temperature": "--temperature",
    "max_tokens": "--max-tokens",
    "top_p": "--top-p",
    "seed": "--seed",
    "extra_body": "--extra-body",
}
DEFAULT_DEADLINE = 3600.0
_SELECTION_FLAGS = {"env": "--env", "task_key": "--task-key", "tasks_file": "--tasks-file"}


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


class _Usage(Exception):
    """Problems with the command line, one line each; nothing was played."""

    def __init__(self, lines: Sequence[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = list(lines)


# --- the plan: flags resolved and checked, before any server starts ------------------------------


@dataclass
class _Plan:
    """What ``eval`` will do, resolved from the flags (and, on resume, the run directory)."""

    run_dir: Path
    resume: bool
    retry_errored: bool
    models: list[str]
    endpoints: dict[str, ModelEndpoint]
    server: dict[str, Any]
    k: int | None = None
    max_steps: int | None = None
    concurrency: int | None = None
    manifest: RunManifest | None = None
    selection: dict[str, list[str]] = field(default_factory=dict)
    jobs: bool = False


_T = TypeVar("_T")


def _per_model(values: Sequence[str] | None, models: Sequence[str]) -> tuple[str | None, dict[str, str]]:
    """Split ``[MODEL=]VALUE`` flag values into the shared value (the last one) and per-model ones."""
    shared: str | None = None
    own: dict[str, str] = {}
    for value in values or ():
        name, sep, rest = value.partition("=")
        if sep and name in models:
            own[name] = rest
        else:
            shared = value
    return shared, own


def _close(word: str, choices: Sequence[str]) -> str:
    found = difflib.get_close_matches(word, list(choices), n=1)
    return f"; did you mean {found[0]!r}?" if found else ""


def _convert(flag: str, text: str, convert: Callable[[str], _T], what: str, problems: list[str]) -> _T | None:
    try:
        return convert(text)
    except ValueError:
        problems.append(f"{flag}: {text!r} is not {what}")
        return None


def _json_object(text: str) -> dict[str, Any]:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(text)
    return value


def _sampling_for(
    model: str, args: argparse.Namespace, models: Sequence[str], problems: list[str]
) -> SamplingParams:
    """The ``SamplingParams`` the flags give ``model`` (problems named by flag)."""
    from .policies import SamplingParams

    converters: dict[str, tuple[Callable[[str], Any], str]] = {
        "temperature": (float, "a number"),
        "max_tokens": (int, "an integer"),
        "top_p": (float, "a number"),
        "seed": (int, "an integer"),
        "extra_body": (_json_object, "a JSON object"),
    }
    values: dict[str, Any] = {}
    for name, (convert, what) in converters.items():
        shared, own = _per_model(getattr(args, name), models)
        text = own.get(model, shared)
        if text is None:
            continue
        value = _convert(_SAMPLING_FLAGS[name], text, convert, what, problems)
        if value is None:
            continue
        try:
            SamplingParams(**{name: value})
        except ValueError as exc:
            problems.append(f"{_SAMPLING_FLAGS[name]}: {exc}")
            continue
        values[name] = value
    try:
        return SamplingParams(**values)
    except ValueError as exc:  # only a clash between the extra body and a named flag is left
        problems.append(f"--extra-body: {exc}")
        return SamplingParams(**{k: v for k, v in values.items() if k != "extra_body"})


def _check_url(url: str, problems: list[str]) -> None:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        problems.append(f"--model-base-url: {url!r} is not an http(s) URL")
    elif parts.username or parts.password:
        problems.append("--model-base-url: put the key in FLEET_EVAL_MODEL_API_KEY, not in the URL")


def _endpoints_from_flags(
    args: argparse.Namespace, models: Sequence[str], problems: list[str]
) -> dict[str, ModelEndpoint]:
    """The endpoint (URL, key from the environment, sampling) of each model that is not a local policy."""
    from .evaluation import MODEL_API_KEY_ENV
    from .policies import LOCAL_MODELS, ModelEndpoint

    key = os.environ.get(MODEL_API_KEY_ENV) or None
    shared_url, own_urls = _per_model(args.model_base_url, models)
    endpoints: dict[str, ModelEndpoint] = {}
    for model in models:
        url = own_urls.get(model, shared_url)
        if model in LOCAL_MODELS or model.startswith("local/"):
            if model in own_urls:
                problems.append(f"--model-base-url: {model} is a local policy, asked at no endpoint")
            continue
        if url is None:
            problems.append(
                f"--model {model}: needs --model-base-url (an OpenAI-compatible chat-completions URL; "
                f"key in {MODEL_API_KEY_ENV}), or use {' or '.join(LOCAL_MODELS)}"
            )
            continue
        _check_url(url, problems)
        endpoints[model] = ModelEndpoint(url, key, _sampling_for(model, args, models, problems))
    if not endpoints:
        given = [_SAMPLING_FLAGS[name] for name in _SAMPLING_FLAGS if getattr(args, name)]
        if args.model_base_url:
            given.append("--model-base-url")
        for flag in given:
            problems.append(
                f"{flag}: every --model is a local policy, which no endpoint or sampling applies to"
            )
    return endpoints


def _check_models_named(models: Sequence[str], jobs: bool, problems: list[str]) -> None:
    from .evaluation import PROVIDER_MODEL
    from .policies import LOCAL_MODELS

    for model in models:
        if model.startswith("local/") and model not in LOCAL_MODELS:
            problems.append(f"--model {model}: no such local policy{_close(model, LOCAL_MODELS)}")
        elif jobs and not PROVIDER_MODEL.match(model):
            problems.append(f"--model {model}: --jobs takes provider/model ids (e.g. openai/{model})")


def _check_bounds(args: argparse.Namespace, problems: list[str]) -> None:
    for flag, value in (("-k", args.k), ("--concurrency", args.concurrency), ("--max-steps", args.max_steps)):
        if value is not None and value < 1:
            problems.append(f"{flag}: must be at least 1, got {value}")
    if not 0.0 <= args.max_errored <= 1.0:
        problems.append(f"--max-errored: must be a fraction from 0 to 1, got {args.max_errored}")
    if args.deadline is not None and args.deadline <= 0:
        problems.append(f"--deadline: must be positive, got {args.deadline}")


def _selection(args: argparse.Namespace) -> dict[str, list[str]]:
    """The task selection flags as given (task files as absolute paths)."""
    chosen: dict[str, list[str]] = {}
    for name in _SELECTION_FLAGS:
        values = getattr(args, name) or []
        if name == "tasks_file":
            values = [str(Path(v).resolve()) for v in values]
        if values:
            chosen[name] = list(values)
    return chosen


def _check_tasks(args: argparse.Namespace, embedded: bool, problems: list[str]) -> None:
    """Task files load; with the embedded server, task keys and envs are bundled ones (did you mean)."""
    from ._exceptions import TaskConfigError
    from .tasks import load_tasks

    for path in args.tasks_file or []:
        try:
            load_tasks(path)
        except TaskConfigError as exc:
            problems.append(f"--tasks-file: {exc}")
    if not embedded or not (args.env or args.task_key):
        return  # the platform's tasks are checked once connected (no server to start first)
    from ._server_plugin import bundled_environments as registry

    environments = registry()
    keys = [str(t["task_key"]) for env in environments.values() for t in env.tasks]
    for env_key in args.env or []:
        if env_key not in environments:
            problems.append(f"--env {env_key}: no such environment{_close(env_key, list(environments))}")
    for key in args.task_key or []:
        if key not in keys:
            problems.append(f"--task-key {key}: no such task{_close(key, keys)}")


def _resume_problems(args: argparse.Namespace, manifest: RunManifest) -> list[str]:
    """Flags given on resume that contradict the stored run, one line each."""
    problems: list[str] = []

    def refuse(flag: str, given: object, stored: object) -> None:
        problems.append(f"{flag} {given} contradicts the run's {stored} (a resumed run keeps its settings)")

    if args.model and list(dict.fromkeys(args.model)) != manifest.models:
        refuse("--model", " ".join(args.model), " ".join(manifest.models))
    for name, expected in (("k", manifest.k), ("max_steps", manifest.max_steps)):
        value = getattr(args, name)
        if value is not None and expected is not None and value != expected:
            refuse("-k" if name == "k" else "--max-steps", value, expected)
    if args.run_id is not None and args.run_id != manifest.run_id:
        refuse("--run-id", args.run_id, manifest.run_id)
    stored_selection = manifest.extra.get("selection") or {}
    for name, values in _selection(args).items():
        if values != stored_selection.get(name):
            before = " ".join(stored_selection.get(name) or []) or "nothing"
            refuse(_SELECTION_FLAGS[name], " ".join(values), f"{_SELECTION_FLAGS[name]} {before}")
    remote = manifest.server.get("kind") == "remote"
    if args.remote and not remote:
        problems.append("--remote contradicts the run, which ran on its embedded local server")
    shared_url, own_urls = _per_model(args.model_base_url, manifest.models)
    for model, record in manifest.endpoints.items():
        url = own_urls.get(model, shared_url)
        if url is not None and url != record.get("base_url"):
            refuse("--model-base-url", url, f"{record.get('base_url')} for {model}")
        given = _sampling_for(model, args, manifest.models, problems).to_dict()
        stored = record.get("sampling") or {}
        for name, flag in _SAMPLING_FLAGS.items():
            if name in given and given[name] != stored.get(name):
                refuse(flag, json.dumps(given[name]), f"{json.dumps(stored.get(name))} for {model}")
    if args.model_base_url and not manifest.endpoints:
        problems.append("--model-base-url: the run has no model asked at an endpoint")
    return problems


def _busy_problems(run_dir: Path, manifest: RunManifest) -> list[str]:
    """The run in ``run_dir`` is being played by another process: one line naming it."""
    from .evaluation._runlock import lock_holder

    holder = lock_holder(run_dir)
    if holder is False:
        return []
    who = "another process" if holder is True else f"pid {holder}"
    return [
        f"--out-dir: run {manifest.run_id!r} in {run_dir} is being run by {who}; wait for it to end, "
        "or stop it (Ctrl-C) and resume"
    ]


def _jobs_resume_problems(args: argparse.Namespace, manifest: RunManifest) -> list[str]:
    """A resume that mixes a jobs run with a run played here, one line each."""
    from .evaluation._jobs_run import is_jobs_run

    if is_jobs_run(manifest) or manifest.source != "platform":
        if args.jobs and not is_jobs_run(manifest):
            return ["--jobs contradicts the run, whose episodes are played here (resume it without --jobs)"]
        if args.ray is not None and is_jobs_run(manifest):
            return ["--ray contradicts the run, whose episodes are played by server jobs (--jobs)"]
        return []
    return [
        f"--resume: run {manifest.run_id!r} was made by an earlier --jobs that stored no slots to resume; "
        "start a new run in another --out-dir"
    ]


def _plan(args: argparse.Namespace) -> _Plan:
    """Resolve and check every flag, without I/O beyond the run directory and the task files.

    Raises:
        _Usage: Every problem found, one line each.
    """
    from .evaluation import RunDir
    from .evaluation._jobs_run import is_jobs_run

    problems: list[str] = []
    run_dir = Path(args.out_dir)
    resume = args.resume or args.retry_errored
    manifest = None
    if RunDir.exists(run_dir):
        with RunDir(run_dir) as store:
            manifest = store.manifest()
    if manifest is not None and (busy := _busy_problems(run_dir, manifest)):
        raise _Usage(busy)  # whatever else is said would not help while it runs
    if resume and manifest is None:
        problems.append(f"--resume: there is no run in {run_dir} (start one without --resume)")
    if not resume and manifest is not None:
        problems.append(
            f"--out-dir: {run_dir} already holds run {manifest.run_id!r}; continue it with --resume, "
            "or choose another --out-dir"
        )
    if problems:
        raise _Usage(problems)  # the rest depends on whether a run is there
    _check_bounds(args, problems)
    # A resume runs where the run ran (a --remote contradicting that is refused on its own).
    remote = manifest.server.get("kind") == "remote" if resume and manifest is not None else args.remote
    if remote and not os.environ.get("FLEET_API_KEY"):
        problems.append("--remote: FLEET_API_KEY is not set (the platform's API key)")
    if resume:
        assert manifest is not None
        problems += _resume_problems(args, manifest)
        problems += _jobs_resume_problems(args, manifest)
        if problems:
            raise _Usage(problems)
        from .evaluation import MODEL_API_KEY_ENV
        from .policies import ModelEndpoint, SamplingParams

        key = os.environ.get(MODEL_API_KEY_ENV) or None
        endpoints = {
            model: ModelEndpoint(str(r["base_url"]), key, SamplingParams.from_dict(r.get("sampling")))
            for model, r in manifest.endpoints.items()
        }
        return _Plan(
            run_dir=run_dir,
            resume=True,
            retry_errored=args.retry_errored,
            models=manifest.models,
            endpoints=endpoints,
            server=manifest.server or {"kind": "embedded"},
            concurrency=args.concurrency or manifest.concurrency,
            manifest=manifest,
            jobs=is_jobs_run(manifest),
        )
    models = list(dict.fromkeys(args.model or DEFAULT_MODELS))
    _check_models_named(models, args.jobs, problems)
    endpoints = _endpoints_from_flags(args, models, problems)
    if not args.jobs and args.deadline is not None:
        problems.append("--deadline: bounds the wait for --jobs only; add --jobs or drop it")
    if args.jobs:
        if args.concurrency is not None:
            problems.append("--concurrency: --jobs plays at the server's job concurrency; drop it")
        if args.ray is not None:
            problems.append("--ray: --jobs plays on the server, not on Ray actors; choose one")
        if any(getattr(args, name) for name in _SAMPLING_FLAGS):
            problems.append(
                "--jobs: the server's job runs its models with their defaults; drop the sampling flags"
            )
        if len({e.base_url for e in endpoints.values()}) > 1:
            problems.append("--jobs: the embedded server asks every model at one --model-base-url")
    _check_tasks(args, not args.remote, problems)
    if problems:
        raise _Usage(problems)
    return _Plan(
        run_dir=run_dir,
        resume=False,
        retry_errored=False,
        models=models,
        endpoints=endpoints,
        server={"kind": "remote"} if args.remote else {"kind": "embedded"},
        k=args.k,
        max_steps=args.max_steps,
        concurrency=args.concurrency,
        selection=_selection(args),
        jobs=args.jobs,
    )


async def _probe(plan: _Plan) -> None:
    """Ask every endpoint model one small request before anything starts.

    Raises:
        _Usage: The models that cannot be asked, one line each.
    """
    from .evaluation import MODEL_API_KEY_ENV, model_problems

    problems = await model_problems(plan.models, plan.endpoints)
    if problems:
        lines = []
        for m, why in problems:
            if m not in plan.endpoints:
                lines.append(f"--model {m}: {why}")
                continue
            # Without a key, a 401 or 403 is the likeliest cause of any refusal: say so.
            unset = ""
            if not plan.endpoints[m].api_key:
                unset = f" ({MODEL_API_KEY_ENV} is not set, so no key was sent)"
            lines.append(f"--model-base-url {plan.endpoints[m].base_url}: model {m}: {why}{unset}")
        raise _Usage(lines)


# --- running -------------------------------------------------------------------------------------


async def _select_tasks(fleet: AsyncFleet, args: argparse.Namespace) -> tuple[list[Any], str]:
    from .tasks import load_tasks

    tasks: list[Any] = []
    names: list[str] = []
    for path in args.tasks_file or []:
        tasks += load_tasks(path)
        names.append(Path(path).stem)
    problems: list[str] = []
    for env_key in args.env or []:
        listed = (await fleet.api.control_plane.list_tasks(env_key=env_key)).tasks
        if not listed:
            known = [e.env_key for e in await fleet.list_envs()]
            problems.append(f"--env {env_key}: the server has no tasks for it{_close(env_key, known)}")
        tasks += [t.model_dump() for t in listed]
        names.append(env_key)
    if args.task_key:
        listed = (await fleet.api.control_plane.list_tasks()).tasks
        by_key = {t.task_key: t for t in listed}
        for key in dict.fromkeys(args.task_key):
            if key in by_key:
                tasks.append(by_key[key].model_dump())
            else:
                problems.append(f"--task-key {key}: no such task{_close(key, list(by_key))}")
        names.append("tasks")
    if problems:
        raise _Usage(problems)
    if not tasks and not (args.env or args.tasks_file or args.task_key):
        tasks = [t.model_dump() for t in (await fleet.api.control_plane.list_tasks()).tasks]
        names.append("all")
    unique = {str(t["task_key"] if isinstance(t, dict) else t.task_key): t for t in tasks}
    return list(unique.values()), "+".join(names)


def _ray_executor(args: argparse.Namespace, plan: _Plan, client_options: dict[str, Any]) -> Any:
    """The ``RayExecutor`` of ``--ray [ADDRESS]``: join ADDRESS, or start a local Ray without one."""
    from .evaluation._runner import DEFAULT_CONCURRENCY

    try:
        from .integrations.ray import RayExecutor
    except ImportError:
        raise _Usage(["--ray: install the 'ray' extra (pip install 'fleet-sdk[ray]')"]) from None
    return RayExecutor(
        client_options,
        address=args.ray or None,
        concurrency_per_actor=plan.concurrency or DEFAULT_CONCURRENCY,
        init_options={} if args.ray else {"include_dashboard": False},
    )


async def _eval_jobs(
    fleet: AsyncFleet, args: argparse.Namespace, plan: _Plan, bar: ProgressBar
) -> ReportEnvelope:
    from .evaluation._jobs_run import run_job_evaluation

    tasks, suite = ([], "") if plan.resume else await _select_tasks(fleet, args)
    return await run_job_evaluation(
        fleet,
        plan.run_dir,
        tasks=tasks,
        models=plan.models,
        k=plan.k,
        max_steps=plan.max_steps,
        suite_name=suite or "tasks",
        run_id=None if plan.resume else args.run_id,
        resume=plan.resume,
        retry_errored=plan.retry_errored,
        deadline=args.deadline or DEFAULT_DEADLINE,
        on_progress=bar,
        endpoints={m: e.base_url for m, e in plan.endpoints.items()},
        server=plan.server,
        extra={"selection": plan.selection},
    )


async def _eval_here(
    fleet: AsyncFleet,
    args: argparse.Namespace,
    plan: _Plan,
    bar: ProgressBar,
    client_options: dict[str, Any],
) -> ReportEnvelope:
    from .evaluation import run_evaluation

    tasks, suite = ([], "") if plan.resume else await _select_tasks(fleet, args)
    executor = _ray_executor(args, plan, client_options) if args.ray is not None else None
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
            run_id=None if plan.resume else args.run_id,
            resume=plan.resume,
            model_endpoints=plan.endpoints,
            on_progress=bar,
            executor=executor,
            retry_errored=plan.retry_errored,
            preflight=False,  # _probe asked every endpoint before the server started
            server=plan.server,
            extra={"selection": plan.selection},
        )
    finally:
        if executor is not None:
            executor.shutdown()


async def _eval(args: argparse.Namespace, plan: _Plan, out: TextIO) -> ReportEnvelope:
    """Start the server (or connect to the platform), play the run, return its report."""
    from ._cli_logging import warnings_beside

    await _probe(plan)
    bar = ProgressBar(out)
    with warnings_beside(bar, prefix="fleet-sdk eval"):
        return await _eval_on_server(args, plan, bar, out)


async def _eval_on_server(
    args: argparse.Namespace, plan: _Plan, bar: ProgressBar, out: TextIO
) -> ReportEnvelope:
    """Start the server (or connect to the platform) and play the run with ``bar`` drawing."""
    from ._client import AsyncFleet

    try:
        if plan.server.get("kind") == "remote":
            urls = {name: plan.server[name] for name in ("base_url", "platform_url") if plan.server.get(name)}
            async with AsyncFleet(**urls) as fleet:
                plan.server = {
                    "kind": "remote",
                    "base_url": fleet.config.base_url,
                    "platform_url": fleet.config.platform_url,
                }
                return await (
                    _eval_jobs(fleet, args, plan, bar)
                    if plan.jobs
                    else _eval_here(fleet, args, plan, bar, {})
                )
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
                    return await _eval_jobs(fleet, args, plan, bar)
                return await _eval_here(fleet, args, plan, bar, options)
            finally:
                await fleet.close()
        finally:
            await anyio.to_thread.run_sync(local.stop)
    finally:
        bar.close()


def _write_html(envelope: ReportEnvelope, run_dir: Path) -> Path:
    """The HTML report, written into the run directory (its transcript links relative to it)."""
    from .reports import filename, to_html

    path = run_dir / filename(envelope.run_id, "html")
    path.write_text(to_html(envelope, transcript_base=""), encoding="utf-8")
    return path


def _retried_line(retried: int, before: int) -> str:
    """What ``--retry-errored`` did this time (the report counts every retry of the run)."""
    now = retried - before
    if now == 0:
        return "No errored episodes to retry: none were played again.\n"
    line = f"Retried {now} errored {'episode' if now == 1 else 'episodes'}"
    return line + (f" ({retried} over every retry of this run).\n" if before else ".\n")


def _finish(envelope: ReportEnvelope, plan: _Plan, args: argparse.Namespace, out: TextIO) -> int:
    """Print the verdict and the counts, write the HTML report; the exit code by errored episodes."""
    from .reports import to_markdown

    out.write("\n" + to_markdown(envelope, part="verdict"))
    for summary in envelope.report.models:
        rate = "n/a" if summary.pass_rate is None else f"{100 * summary.pass_rate:.1f}%"
        out.write(
            f"{summary.model}: {summary.passed}/{summary.passed + summary.failed} graded passed ({rate}),"
            f" {summary.errored} errored\n"
        )
    if plan.retry_errored:
        out.write(_retried_line(envelope.report.retried, plan.manifest.retried if plan.manifest else 0))
    page = _write_html(envelope, plan.run_dir)
    out.write(f"\nRun directory: {plan.run_dir}\nReport: {page}\n")
    total = len(envelope.report.results)
    errored = sum(1 for r in envelope.report.results if r.status in ("errored", "pending"))
    if total and errored / total > args.max_errored:
        sys.stderr.write(
            f"fleet-sdk eval: {errored} of {total} episodes errored ({100 * errored / total:.0f}%), more "
            f"than --max-errored {args.max_errored:g} allows (exit {EXIT_ERRORED}); see the report's "
            f"Failures, or play them again: fleet-sdk eval --out-dir {plan.run_dir} --retry-errored\n"
        )
        return EXIT_ERRORED
    return EXIT_OK


def _interrupted(plan: _Plan | None, *, how: str = "interrupted", code: int = EXIT_INTERRUPTED) -> int:
    """After Ctrl-C or SIGTERM: say what is kept and how to go on.

    Args:
        plan: The run's plan (None: stopped before the flags were checked).
        how: What stopped it, as the message says it.
        code: The exit code.
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
    return code


def _usage(lines: Sequence[str]) -> int:
    for line in lines:
        sys.stderr.write(f"fleet-sdk eval: error: {line}\n")
    return EXIT_USAGE


@contextlib.contextmanager
def _holding(run_dir: Path) -> Iterator[None]:
    """Hold the run directory while the run plays (a directory made for nothing is removed).

    Raises:
        _Usage: Another process holds it.
    """
    from .evaluation import RUN_FILE
    from .evaluation._runlock import LOCK_FILE, RunBusyError, RunLock

    made = not run_dir.exists()
    try:
        with RunLock(run_dir):
            yield
    except RunBusyError as exc:
        raise _Usage([f"--out-dir: {exc}; wait for it to end, or stop it (Ctrl-C) and resume"]) from None
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
        plan = _plan(args)
        with _holding(plan.run_dir):
            envelope = run(_eval(args, plan, sys.stdout))
    except KeyboardInterrupt:
        return _interrupted(plan)
    except Terminated as exc:
        return _interrupted(plan, how="terminated (SIGTERM)", code=exc.exit_code)
    except EvaluationTimeoutError as exc:  # before EvaluationError: the run is kept, not misused
        sys.stderr.write(f"fleet-sdk eval: error: {exc}\n")
        return EXIT_FAILED
    except _Usage as exc:
        return _usage(exc.lines)
    except EvaluationError as exc:  # a check of the runner the plan did not foresee
        return _usage([str(exc)])
    except (FleetError, OSError) as exc:
        sys.stderr.write(f"fleet-sdk eval: error: {type(exc).__name__}: {exc}\n")
        return EXIT_FAILED
    code = _finish(envelope, plan, args, sys.stdout)
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
    every = "without --env, --task-key or --tasks-file, every task the server has (the bundled ones locally)"
    ev.add_argument(
        "--env", action="append", help=f"run every task of this environment (repeatable; default: {every})"
    )
    ev.add_argument("--tasks-file", action="append", help="a task file, JSON (repeatable; default: none)")
    ev.add_argument("--task-key", action="append", help=f"run this task (repeatable; default: {every})")
    ev.add_argument(
        "--model",
        action="append",
        help="model id (repeatable; default: local/scripted and local/random)",
    )
    ev.add_argument(
        "-k", type=int, default=None, help="samples per task and model (the k of pass@k; default 1)"
    )
    ev.add_argument(
        "--concurrency", type=int, default=None, help="episodes at once (default 4, or the resumed run's)"
    )
    ev.add_argument("--max-steps", type=int, default=None, help="step budget per episode (default 30)")
    ev.add_argument("--out-dir", default="./fleet-eval", help="the run directory (default: ./fleet-eval)")
    ev.add_argument("--run-id", default=None, help="the run id (default: run-<time>-<random>)")
    ev.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --out-dir (every other setting is read from it; default: a new run)",
    )
    ev.add_argument(
        "--retry-errored",
        action="store_true",
        help="resume, and play the errored episodes again (graded ones are kept; default: off)",
    )
    ev.add_argument(
        "--max-errored",
        type=float,
        default=0.0,
        metavar="FRACTION",
        help=f"errored episodes tolerated, as a fraction of the run, before exit {EXIT_ERRORED} (default 0)",
    )
    ev.add_argument(
        "--jobs",
        action="store_true",
        help="let the server play the episodes as jobs (default: off, they are played here)",
    )
    ev.add_argument(
        "--deadline",
        type=float,
        default=None,
        help=f"seconds to wait for the jobs of --jobs (default: {DEFAULT_DEADLINE:g})",
    )
    ev.add_argument(
        "--model-base-url",
        action="append",
        metavar="[MODEL=]URL",
        help="OpenAI-compatible chat-completions URL for models that are not local policies "
        "(key: FLEET_EVAL_MODEL_API_KEY; default: none, so only local/... models)",
    )
    ev.add_argument(
        "--temperature",
        action="append",
        metavar="[MODEL=]T",
        help="sampling temperature (default: the endpoint's)",
    )
    ev.add_argument(
        "--max-tokens",
        action="append",
        metavar="[MODEL=]N",
        help="most tokens per model reply (default: the endpoint's)",
    )
    ev.add_argument(
        "--top-p",
        action="append",
        metavar="[MODEL=]P",
        help="nucleus sampling mass, in (0, 1] (default: the endpoint's)",
    )
    ev.add_argument(
        "--seed", action="append", metavar="[MODEL=]N", help="the endpoint's sampling seed (default: none)"
    )
    ev.add_argument(
        "--extra-body",
        action="append",
        metavar="[MODEL=]JSON",
        help="more request fields, a JSON object (e.g. '{\"top_k\": 20}'; default: none)",
    )
    ev.add_argument(
        "--remote",
        action="store_true",
        help="use the platform (FLEET_API_KEY) instead (default: off, an embedded local server in --out-dir)",
    )
    ev.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="play the episodes on Ray actors: join the cluster at ADDRESS ('auto', 'ray://head:10001'), "
        "or start a local Ray without one; --concurrency is then per actor (one actor per node). "
        "With --remote the actors read FLEET_API_KEY from their own environment (default: off)",
    )
    ev.set_defaults(handler=_run_eval)
    one_line_errors(ev)

    from ._cli_report import add_report_command

    add_report_command(commands)
