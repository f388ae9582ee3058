"""What ``fleet-sdk eval`` will run (``Plan``): its flags resolved against the run directory.

A new run takes its models, endpoints and tasks from the flags, checked before any server starts;
a resume (``--resume``, ``--retry-errored``) takes everything from what the run directory stores,
and a flag given again that contradicts it is refused. Every problem is one line naming the flag
(``UsageError``). Once a server is there, ``select_tasks`` picks the tasks of a new run.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._cli_eval_flags import (
    DEFAULT_MODELS,
    SAMPLING_FLAGS,
    SELECTION_FLAGS,
    EvalFlags,
    UsageError,
    check_url,
    close,
)

if TYPE_CHECKING:
    from ._client import AsyncFleet
    from .evaluation import RunManifest
    from .policies import ModelEndpoint

__all__ = ["Plan", "make_plan", "probe", "select_tasks"]


@dataclass(frozen=True)
class Plan:
    """What ``eval`` will do, resolved from the flags (and, on resume, the run directory).

    Attributes:
        flags: The flags it was made from.
        run_dir: The run directory.
        resume: Whether the run in ``run_dir`` goes on.
        retry_errored: Whether its errored episodes are played again.
        models: The run's models.
        endpoints: The endpoint of each model that is not a local policy.
        server: Where the episodes run (``RunManifest.server``).
        k: Samples per task and model of a new run.
        max_steps: Step budget per episode of a new run.
        concurrency: Episodes at once (None: the runner's default).
        manifest: The stored run, on resume.
        selection: The task selection flags of a new run (``EvalFlags.selection``).
        jobs: Whether the server plays the episodes as jobs.
    """

    flags: EvalFlags
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


def _endpoints_from_flags(
    flags: EvalFlags, models: Sequence[str], problems: list[str]
) -> dict[str, ModelEndpoint]:
    """The endpoint (URL, key from the environment, sampling) of each model that is not a local policy."""
    from .evaluation import MODEL_API_KEY_ENV
    from .policies import LOCAL_MODELS, ModelEndpoint

    key = os.environ.get(MODEL_API_KEY_ENV) or None
    shared_url, own_urls = flags.base_url(models)
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
        check_url(url, problems)
        endpoints[model] = ModelEndpoint(url, key, flags.sampling_for(model, models, problems))
    if not endpoints:
        given = flags.sampling_given
        if flags.model_base_urls:
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
            problems.append(f"--model {model}: no such local policy{close(model, LOCAL_MODELS)}")
        elif jobs and not PROVIDER_MODEL.match(model):
            problems.append(f"--model {model}: --jobs takes provider/model ids (e.g. openai/{model})")


def _check_tasks(flags: EvalFlags, embedded: bool, problems: list[str]) -> None:
    """Task files load; with the embedded server, task keys and envs are bundled ones (did you mean)."""
    from ._exceptions import TaskConfigError
    from .tasks import load_tasks

    for path in flags.tasks_files:
        try:
            load_tasks(path)
        except TaskConfigError as exc:
            problems.append(f"--tasks-file: {exc}")
    if not embedded or not (flags.envs or flags.task_keys):
        return  # the platform's tasks are checked once connected (no server to start first)
    from ._server_plugin import bundled_environments as registry

    environments = registry()
    keys = [str(t["task_key"]) for env in environments.values() for t in env.tasks]
    for env_key in flags.envs:
        if env_key not in environments:
            problems.append(f"--env {env_key}: no such environment{close(env_key, list(environments))}")
    for key in flags.task_keys:
        if key not in keys:
            problems.append(f"--task-key {key}: no such task{close(key, keys)}")


def _resume_problems(flags: EvalFlags, manifest: RunManifest) -> list[str]:
    """Flags given on resume that contradict the stored run, one line each."""
    problems: list[str] = []

    def refuse(flag: str, given: object, stored: object) -> None:
        problems.append(f"{flag} {given} contradicts the run's {stored} (a resumed run keeps its settings)")

    if flags.models and list(flags.models) != manifest.models:
        refuse("--model", " ".join(flags.models), " ".join(manifest.models))
    for flag, value, expected in (
        ("-k", flags.k, manifest.k),
        ("--max-steps", flags.max_steps, manifest.max_steps),
    ):
        if value is not None and expected is not None and value != expected:
            refuse(flag, value, expected)
    if flags.run_id is not None and flags.run_id != manifest.run_id:
        refuse("--run-id", flags.run_id, manifest.run_id)
    stored_selection = manifest.extra.get("selection") or {}
    for name, values in flags.selection().items():
        if values != stored_selection.get(name):
            before = " ".join(stored_selection.get(name) or []) or "nothing"
            refuse(SELECTION_FLAGS[name], " ".join(values), f"{SELECTION_FLAGS[name]} {before}")
    remote = manifest.server.get("kind") == "remote"
    if flags.remote and not remote:
        problems.append("--remote contradicts the run, which ran on its embedded local server")
    shared_url, own_urls = flags.base_url(manifest.models)
    for model, record in manifest.endpoints.items():
        url = own_urls.get(model, shared_url)
        if url is not None and url != record.get("base_url"):
            refuse("--model-base-url", url, f"{record.get('base_url')} for {model}")
        given = flags.sampling_for(model, manifest.models, problems).to_dict()
        stored = record.get("sampling") or {}
        for name, flag in SAMPLING_FLAGS.items():
            if name in given and given[name] != stored.get(name):
                refuse(flag, json.dumps(given[name]), f"{json.dumps(stored.get(name))} for {model}")
    if flags.model_base_urls and not manifest.endpoints:
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


def _jobs_resume_problems(flags: EvalFlags, manifest: RunManifest) -> list[str]:
    """A resume that mixes a jobs run with a run played here, one line each."""
    from .evaluation._jobs_run import is_jobs_run

    if is_jobs_run(manifest) or manifest.source != "platform":
        if flags.jobs and not is_jobs_run(manifest):
            return ["--jobs contradicts the run, whose episodes are played here (resume it without --jobs)"]
        if flags.ray is not None and is_jobs_run(manifest):
            return ["--ray contradicts the run, whose episodes are played by server jobs (--jobs)"]
        return []
    return [
        f"--resume: run {manifest.run_id!r} was made by an earlier --jobs that stored no slots to resume; "
        "start a new run in another --out-dir"
    ]


def _stored(run_dir: Path) -> RunManifest | None:
    from .evaluation import RunDir

    if not RunDir.exists(run_dir):
        return None
    with RunDir(run_dir) as store:
        return store.manifest()


def make_plan(flags: EvalFlags) -> Plan:
    """Resolve the flags against the run directory, without I/O beyond it and the task files.

    Args:
        flags: The flags (their own problems are told with the run's).

    Raises:
        UsageError: Every problem found, one line each.
    """
    problems: list[str] = []
    run_dir = flags.out_dir
    manifest = _stored(run_dir)
    if manifest is not None and (busy := _busy_problems(run_dir, manifest)):
        raise UsageError(busy)  # whatever else is said would not help while it runs
    if flags.resume and manifest is None:
        problems.append(f"--resume: there is no run in {run_dir} (start one without --resume)")
    if not flags.resume and manifest is not None:
        problems.append(
            f"--out-dir: {run_dir} already holds run {manifest.run_id!r}; continue it with --resume, "
            "or choose another --out-dir"
        )
    if problems:
        raise UsageError(problems)  # the rest depends on whether a run is there
    problems += flags.problems()
    # A resume runs where the run ran (a --remote contradicting that is refused on its own).
    remote = manifest.server.get("kind") == "remote" if manifest is not None else flags.remote
    if remote and not os.environ.get("FLEET_API_KEY"):
        problems.append("--remote: FLEET_API_KEY is not set (the platform's API key)")
    if manifest is not None:
        return _resumed(flags, manifest, problems)
    return _new(flags, problems)


def _resumed(flags: EvalFlags, manifest: RunManifest, problems: list[str]) -> Plan:
    """The plan of a resume: everything the run directory stores, keys from the environment."""
    from .evaluation import MODEL_API_KEY_ENV
    from .evaluation._jobs_run import is_jobs_run
    from .policies import ModelEndpoint, SamplingParams

    problems += _resume_problems(flags, manifest)
    problems += _jobs_resume_problems(flags, manifest)
    if problems:
        raise UsageError(problems)
    key = os.environ.get(MODEL_API_KEY_ENV) or None
    endpoints = {
        model: ModelEndpoint(str(r["base_url"]), key, SamplingParams.from_dict(r.get("sampling")))
        for model, r in manifest.endpoints.items()
    }
    return Plan(
        flags=flags,
        run_dir=flags.out_dir,
        resume=True,
        retry_errored=flags.retry_errored,
        models=manifest.models,
        endpoints=endpoints,
        server=manifest.server or {"kind": "embedded"},
        concurrency=flags.concurrency or manifest.concurrency,
        manifest=manifest,
        jobs=is_jobs_run(manifest),
    )


def _new(flags: EvalFlags, problems: list[str]) -> Plan:
    """The plan of a new run: models, endpoints and tasks from the flags, each checked."""
    models = list(flags.models or DEFAULT_MODELS)
    _check_models_named(models, flags.jobs, problems)
    endpoints = _endpoints_from_flags(flags, models, problems)
    if not flags.jobs and flags.deadline is not None:
        problems.append("--deadline: bounds the wait for --jobs only; add --jobs or drop it")
    if flags.jobs:
        if flags.concurrency is not None:
            problems.append("--concurrency: --jobs plays at the server's job concurrency; drop it")
        if flags.ray is not None:
            problems.append("--ray: --jobs plays on the server, not on Ray actors; choose one")
        if flags.sampling:
            problems.append(
                "--jobs: the server's job runs its models with their defaults; drop the sampling flags"
            )
        if len({e.base_url for e in endpoints.values()}) > 1:
            problems.append("--jobs: the embedded server asks every model at one --model-base-url")
    _check_tasks(flags, not flags.remote, problems)
    if problems:
        raise UsageError(problems)
    return Plan(
        flags=flags,
        run_dir=flags.out_dir,
        resume=False,
        retry_errored=False,
        models=models,
        endpoints=endpoints,
        server={"kind": "remote"} if flags.remote else {"kind": "embedded"},
        k=flags.k,
        max_steps=flags.max_steps,
        concurrency=flags.concurrency,
        selection=flags.selection(),
        jobs=flags.jobs,
    )


async def probe(plan: Plan) -> None:
    """Ask every endpoint model one small request before anything starts.

    Raises:
        UsageError: The models that cannot be asked, one line each.
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
        raise UsageError(lines)


async def select_tasks(fleet: AsyncFleet, flags: EvalFlags) -> tuple[list[Any], str]:
    """The tasks a new run's selection flags pick on ``fleet``'s server, and the suite's name.

    Raises:
        UsageError: An ``--env`` or ``--task-key`` the server does not have, one line each.
    """
    from .tasks import load_tasks

    tasks: list[Any] = []
    names: list[str] = []
    for path in flags.tasks_files:
        tasks += load_tasks(path)
        names.append(Path(path).stem)
    problems: list[str] = []
    for env_key in flags.envs:
        listed = (await fleet.api.control_plane.list_tasks(env_key=env_key)).tasks
        if not listed:
            known = [e.env_key for e in await fleet.list_envs()]
            problems.append(f"--env {env_key}: the server has no tasks for it{close(env_key, known)}")
        tasks += [t.model_dump() for t in listed]
        names.append(env_key)
    if flags.task_keys:
        listed = (await fleet.api.control_plane.list_tasks()).tasks
        by_key = {t.task_key: t for t in listed}
        for key in dict.fromkeys(flags.task_keys):
            if key in by_key:
                tasks.append(by_key[key].model_dump())
            else:
                problems.append(f"--task-key {key}: no such task{close(key, list(by_key))}")
        names.append("tasks")
    if problems:
        raise UsageError(problems)
    if not tasks and not flags.selects:
        tasks = [t.model_dump() for t in (await fleet.api.control_plane.list_tasks()).tasks]
        names.append("all")
    unique = {str(t["task_key"] if isinstance(t, dict) else t.task_key): t for t in tasks}
    return list(unique.values()), "+".join(names)
