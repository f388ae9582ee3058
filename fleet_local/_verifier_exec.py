"""Running verifiers for ``POST /v1/verifiers/execute``, the manager's
``/execute_verifier_function`` and the job harness.

Code is found, in order: in the request's ``bundle`` (a base64 zip made by
``fleet_sdk.verifiers.bundle_verifier``), among the bundles stored before under
``(key, sha256)``, or in the task whose ``task_key`` is ``key`` when its code
has that sha256. Unknown code answers 404 ``not_found`` so the client resends
with ``bundle``. The verifier runs in the sandbox (``run_sandboxed``)
against the instance's ``seed`` and ``current`` databases, called with the
request's arguments in whichever form it sent them (``_verifier_args.py``);
every fault of the verifier comes back as ``success: false`` with a structured
``error`` (HTTP 200). The public SDK's ``{function_code, function_name}`` body
of the manager endpoint runs the same way (:func:`execute_function`). Each run
is stored as a ``"verifier_execution"`` document.

At most ``verifier_concurrency`` runs go at once; the others wait for a slot
within their run's timeout, then answer 503 ``verifier_busy`` (``Retry-After``;
nothing ran, so resending is safe). Where the OS jail cannot start, which code
may run under the audit hook alone is decided in one place,
:func:`may_run_unjailed`.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import io
import json
import logging
import math
import os
import shutil
import threading
import zipfile
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from fastapi.exceptions import RequestValidationError

from fleet_sdk.types import env_instance as models
from fleet_sdk.verifiers import (
    BUNDLE_ENTRY_NAME,
    CallConvention,
    VerifierError,
    VerifierOutcome,
    bundle_sha256,
)

from . import _instances
from ._dedent import dedent
from ._errors import LocalAPIError, not_found
from ._records import ExecutionPrivate, ExecutionRecord, ExecutionWire
from ._state import LocalState, iso, new_id
from ._store import Records
from ._verifier_args import Invocation, bad_arguments, from_args_array, from_pickled_args
from .sandbox import JailUnavailableError, PickledArguments, PlainDataError
from .sandbox._sandbox import RunPlan, plan_run, run_planned

__all__ = [
    "BUNDLE_KIND",
    "EXECUTION_KIND",
    "check_bundle",
    "decode_bundle",
    "default_verifier_concurrency",
    "execute_function",
    "execute_verifier",
    "execution_records",
    "get_verifier",
    "may_run_unjailed",
    "run_code",
    "verifier_concurrency",
    "verifier_id_of",
]

_log = logging.getLogger(__name__)

BUNDLE_KIND = "verifier_bundle"
EXECUTION_KIND = "verifier_execution"
TASK_KIND = "task"
JAIL_UNAVAILABLE = "verifier_jail_unavailable"
VERIFIER_BUSY = "verifier_busy"
# Both the zip and its uncompressed contents: a small zip can hold a gigabyte of zeros.
_MAX_BUNDLE_BYTES = 5 * 1024 * 1024
_MAX_BUNDLE_FILES = 64


def execution_records(state: LocalState) -> Records[ExecutionRecord]:
    """The store's verifier execution documents as typed records (an instance's id is their parent).

    Args:
        state: Server state.
    """
    return Records(state.store, EXECUTION_KIND, ExecutionRecord)


def scratch_root(state: LocalState) -> Path:
    """Where this server's verifier runs make their temporary directories (in its data dir, so
    a restart can remove what a killed process left without touching another server's runs).

    :func:`clear_scratch` creates it once at startup, so a run does not touch the disk here."""
    return state.settings.data_dir / "verifier-scratch"


def clear_scratch(state: LocalState) -> None:
    """Remove the temporary directories of verifier runs a previous process left behind, and
    create the (empty) scratch root."""
    root = scratch_root(state)
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True, exist_ok=True)


def default_verifier_concurrency(memory_mb: int, scratch_mb: int) -> int:
    """Verifier runs at once when the server is not told: two per core, and no more than fit
    in memory at their limits (``memory_mb`` plus two tmpfs mounts of ``scratch_mb`` each).

    Args:
        memory_mb: A run's address-space limit.
        scratch_mb: A run's scratch tmpfs (and ``/tmp``) size.
    """
    cores = os.cpu_count() or 1
    try:
        memory = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // (1024 * 1024)
    except (ValueError, OSError, AttributeError):  # not POSIX: cores alone
        memory = 0
    by_memory = memory // (memory_mb + 2 * scratch_mb) if memory else 2 * cores
    return max(1, min(2 * cores, by_memory))


def verifier_concurrency(state: LocalState) -> int:
    """The verifier runs this server allows at once."""
    settings = state.settings
    if settings.verifier_concurrency is not None:
        return settings.verifier_concurrency
    return default_verifier_concurrency(settings.verifier_memory_mb, settings.verifier_scratch_mb)


def may_run_unjailed(state: LocalState, code: str, *, keyed: bool) -> bool:
    """Whether ``code`` may run under the audit hook alone where the OS jail cannot start.

    The one place this is decided. The hook is a second layer, no sandbox for untrusted code
    (docs/threat-model.md), so: the bundled tasks' own verifiers (they ship with this package)
    always may; any other code only on a server started with ``--allow-unjailed-verifiers``,
    and only for a request bearing the server's key. A request without it (the manager routes
    need only an instance id) runs nothing else unjailed.

    Args:
        state: Server state.
        code: The verifier source.
        keyed: The request bore the server's key.
    """
    return code in state.bundled_verifiers or (keyed and state.settings.allow_unjailed_verifiers)


def _verifier_id(sha256: str) -> str:
    return f"ver_{sha256[:16]}"


def verifier_id_of(code: str) -> str:
    """The ``verifier_id`` the bundle of this verifier source gets."""
    return _verifier_id(bundle_sha256(code))


def _bundle_error(message: str) -> LocalAPIError:
    return LocalAPIError(400, f"bad bundle: {message}", code="bad_bundle", retryable=False)


def _check_bundle_size(archive: zipfile.ZipFile) -> None:
    """Refuse a zip bomb from its directory, before inflating anything."""
    entries = archive.infolist()
    if len(entries) > _MAX_BUNDLE_FILES:
        raise _bundle_error(f"{len(entries)} files; at most {_MAX_BUNDLE_FILES} are accepted")
    total = sum(info.file_size for info in entries)
    if total > _MAX_BUNDLE_BYTES:
        raise _bundle_error(f"{total} bytes uncompressed; at most {_MAX_BUNDLE_BYTES} are accepted")


_DECODED_MAX = 128
"""Decoded bundles remembered (:func:`decode_bundle`), each of at most ``_DECODED_MAX_CHARS``."""
_DECODED_MAX_CHARS = 64 * 1024
_decoded: OrderedDict[tuple[str, str | None], str] = OrderedDict()
_decoded_lock = threading.Lock()


def decode_bundle(bundle_b64: str, sha256: str | None = None) -> str:
    """The verifier source inside a base64 bundle.

    The SDK sends the same bundle with every verification of a task, so the source of each small
    bundle that decoded is remembered by its exact text (and ``sha256``): a repeat costs a
    dictionary lookup instead of base64, sha256 and zip work. A bundle that failed is not
    remembered, so it fails the same way each time.

    Args:
        bundle_b64: The ``bundle`` field.
        sha256: When given, the zip's sha256 must equal it.

    Raises:
        LocalAPIError: 400 when the bundle is not base64, not a zip, has no ``verifier.py``,
            does not match ``sha256``, holds more than 64 files or more than 5 MiB uncompressed.
    """
    key = (bundle_b64, sha256)
    with _decoded_lock:
        code = _decoded.get(key)
        if code is not None:
            _decoded.move_to_end(key)
            return code
    code = _decode_bundle(bundle_b64, sha256)
    if len(bundle_b64) <= _DECODED_MAX_CHARS:
        with _decoded_lock:
            _decoded[key] = code
            while len(_decoded) > _DECODED_MAX:
                _decoded.popitem(last=False)
    return code


def _decode_bundle(bundle_b64: str, sha256: str | None) -> str:
    try:
        raw = base64.b64decode(bundle_b64, validate=True)
    except (binascii.Error, ValueError):
        raise LocalAPIError(400, "bundle is not valid base64", code="bad_bundle", retryable=False) from None
    if len(raw) > _MAX_BUNDLE_BYTES:
        raise LocalAPIError(400, "bundle is larger than 5 MiB", code="bad_bundle", retryable=False)
    if sha256 is not None:
        actual = hashlib.sha256(raw).hexdigest()
        if actual != sha256:
            raise LocalAPIError(
                400, f"bundle sha256 is {actual}, not the {sha256} sent", code="bad_bundle", retryable=False
            )
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as archive:
            _check_bundle_size(archive)
            names = archive.namelist()
            entry = BUNDLE_ENTRY_NAME if BUNDLE_ENTRY_NAME in names else None
            if entry is None:
                python = [n for n in names if n.endswith(".py")]
                entry = python[0] if len(python) == 1 else None
            if entry is None:
                raise LocalAPIError(
                    400,
                    f"bundle has no {BUNDLE_ENTRY_NAME} (entries: {', '.join(names) or 'none'})",
                    code="bad_bundle",
                    retryable=False,
                )
            with archive.open(entry) as member:  # never more than the limit, whatever the header says
                data = member.read(_MAX_BUNDLE_BYTES + 1)
            if len(data) > _MAX_BUNDLE_BYTES:
                raise _bundle_error(f"{entry} is larger than {_MAX_BUNDLE_BYTES} bytes uncompressed")
            return data.decode("utf-8")
    except (zipfile.BadZipFile, UnicodeDecodeError, KeyError, EOFError, NotImplementedError) as exc:
        raise LocalAPIError(
            400, f"bundle is not a readable zip: {exc}", code="bad_bundle", retryable=False
        ) from None


def _stored_bundle(state: LocalState, field: str, value: str) -> dict[str, Any] | None:
    return next((doc for doc in state.store.list(BUNDLE_KIND) if doc.get(field) == value), None)


def check_bundle(state: LocalState, sha256: str) -> models.VerifiersCheckResponse:
    """Whether a bundle with this sha256 is stored (``success`` false when not)."""
    doc = _stored_bundle(state, "sha256", sha256)
    if doc is None:
        return models.VerifiersCheckResponse(success=False)
    return models.VerifiersCheckResponse(
        success=True, key=doc["key"], version=1, display_src=doc["code"], created_at=doc.get("created_at")
    )


def get_verifier(state: LocalState, verifier_id: str) -> models.VerifierData:
    """A stored bundle by its ``verifier_id``.

    Raises:
        LocalAPIError: 404 ``not_found``.
    """
    doc = _stored_bundle(state, "verifier_id", verifier_id)
    if doc is None:
        raise not_found("verifier", verifier_id)
    return models.VerifierData(
        verifier_id=verifier_id,
        key=doc["key"],
        version=1,
        sha256=doc["sha256"],
        code=doc["code"],
        created_at=doc.get("created_at") or iso(),
    )


def _task_code(task: dict[str, Any]) -> str | None:
    code = task.get("verifier_code") or task.get("verifier_func")
    return code if isinstance(code, str) and code.strip() else None


def _resolve_code(state: LocalState, req: models.VerifiersExecuteRequest) -> str:
    """The code a request names (and store a new bundle by ``(key, sha256)``)."""
    record_id = f"{req.key}:{req.sha256}"
    if req.bundle is not None:
        bundled = decode_bundle(req.bundle, req.sha256)
        if state.store.get(BUNDLE_KIND, record_id) is None:
            state.store.put(
                BUNDLE_KIND,
                record_id,
                {
                    "key": req.key,
                    "sha256": req.sha256,
                    "verifier_id": _verifier_id(req.sha256),
                    "code": bundled,
                    "created_at": iso(),
                },
            )
        return bundled
    # Same bytes, same code: a bundle stored under another key serves this one too, as
    # ``check_bundle`` (by sha256 alone) told the client.
    stored = state.store.get(BUNDLE_KIND, record_id) or _stored_bundle(state, "sha256", req.sha256)
    if stored is not None:
        return str(stored["code"])
    task = state.store.get(TASK_KIND, req.key)
    if task is not None:
        code = _task_code(task)
        if code is not None and bundle_sha256(code) == req.sha256:
            return code
    raise LocalAPIError(
        404,
        f"verifier bundle not found for key {req.key!r} with sha256 {req.sha256}; resend with 'bundle'",
        code="not_found",
        retryable=False,
    )


def _code_and_seed(
    state: LocalState, req: models.VerifiersExecuteRequest, instance_id: str
) -> tuple[str, Path]:
    """The code a request names (:func:`_resolve_code`) and the seed database of the live
    instance it runs against (blocking)."""
    code = _resolve_code(state, req)
    return code, _instances.database_path(state, instance_id, "seed")


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return repr(value)
    return value


def _error(kind: str, message: str) -> models.VerifierError:
    return models.VerifierError(type=kind, message=message, traceback=None)


def _wire_error(error: VerifierError) -> models.VerifierError:
    """``error`` as the platform reports it: ``type`` is the exception's class name when the
    verifier raised (the public SDK re-raises remote errors by that name), else the fault kind."""
    return models.VerifierError(type=error.wire_type, message=error.message, traceback=error.traceback)


async def run_code(
    state: LocalState,
    code: str,
    instance_id: str,
    *,
    final_answer: Any = None,
    arguments: tuple[list[Any], dict[str, Any]] | None = None,
    pickled_args: PickledArguments | None = None,
    convention: CallConvention = "env",
    function_name: str | None = None,
    timeout_seconds: float | None = None,
    key: str | None = None,
    sha256: str | None = None,
    keyed: bool,
) -> ExecutionRecord:
    """Run verifier ``code`` against a live instance and store the execution record.

    Verifier faults never raise: they come back with ``success: False`` and ``error``.
    ``arguments`` (``(args, kwargs)``) call ``verify(env, *args, **kwargs)`` instead of passing
    ``final_answer``, as do ``pickled_args`` (the public SDK's pickle, which only the run
    decodes); ``convention`` is the sandbox's (``"snapshots"`` for the public SDK's
    ``fn(before, after, transcript)``). ``keyed``: the request bore the server's key (see
    :func:`may_run_unjailed`).

    Returns:
        The record as stored: ``VerifiersExecuteResponse`` fields, and ``score``, ``sha256``,
        ``instance_id`` and the exact ``execution_time_ms`` beside them.

    Raises:
        LocalAPIError: 404 ``instance_not_found`` when the instance is unknown or terminated;
            503 ``verifier_jail_unavailable`` when the OS jail cannot start and the code may not
            run without it (:func:`may_run_unjailed`); 503 ``verifier_busy`` when no run slot
            was free within the run's timeout; 400 ``bad_request`` naming ``args`` when the run
            could not decode ``pickled_args`` (nothing ran, nothing is stored).
    """

    def plan() -> _Planned:
        seed = _instances.database_path(state, instance_id, "seed")
        return _plan_code(
            state,
            code,
            seed,
            final_answer=final_answer,
            arguments=arguments,
            pickled_args=pickled_args,
            convention=convention,
            function_name=function_name,
            timeout_seconds=timeout_seconds,
            sha256=sha256,
            keyed=keyed,
        )

    # One worker-thread hop for the instance's seed and the run's plan.
    return await _run_planned(state, instance_id, await anyio.to_thread.run_sync(plan), key=key, keyed=keyed)


@dataclass
class _Planned:
    """A verifier run worked out (in a worker thread): its plan, or why none could be made."""

    run_timeout: float
    digest: str
    plan: RunPlan | None = None
    failure: Exception | None = None


def _plan_code(
    state: LocalState,
    code: str,
    seed: Path,
    *,
    final_answer: Any,
    arguments: tuple[list[Any], dict[str, Any]] | None,
    pickled_args: PickledArguments | None,
    convention: CallConvention,
    function_name: str | None,
    timeout_seconds: float | None,
    sha256: str | None,
    keyed: bool,
) -> _Planned:
    """Work out a run of ``code`` against the instance whose seed is ``seed`` (blocking: the
    payload grows with the request, and a first jail check runs bubblewrap)."""
    limit = float(state.settings.verifier_timeout)
    run_timeout = min(float(timeout_seconds), limit) if timeout_seconds is not None else limit
    planned = _Planned(run_timeout, sha256 or bundle_sha256(code))
    try:
        planned.plan = plan_run(
            code,
            databases={"seed": seed, "current": seed.with_name("current.db")},
            final_answer=final_answer,
            args=arguments[0] if arguments is not None else None,
            kwargs=arguments[1] if arguments is not None else None,
            convention=convention,
            function_name=function_name if function_name and function_name != "verify" else None,
            timeout=run_timeout,
            memory_mb=state.settings.verifier_memory_mb,
            scratch_mb=state.settings.verifier_scratch_mb,
            allow_unjailed=may_run_unjailed(state, code, keyed=keyed),
            scratch_root=scratch_root(state),
            pickled_args=pickled_args,
        )
    except Exception as exc:  # answered as a failed run would be (:func:`_failed_run`)
        planned.failure = exc
    return planned


def _failed_run(state: LocalState, exc: Exception, *, keyed: bool) -> models.VerifierError:
    """The execution's error for a run that could not be made or run, or the request's error.

    Raises:
        LocalAPIError: 503 ``verifier_jail_unavailable`` when the jail cannot start; 400
            ``bad_request`` when the run could not decode the pickled arguments.
    """
    if isinstance(exc, JailUnavailableError):
        detail = str(exc)
        if state.settings.allow_unjailed_verifiers and not keyed:
            detail += (
                "; without the jail only requests bearing the server's key run verifiers "
                "(unjailed runs are for trusted code only)"
            )
        raise LocalAPIError(503, detail, code=JAIL_UNAVAILABLE, retryable=False) from None
    if isinstance(exc, PlainDataError):  # the pickled arguments, decoded in the run: the request's fault
        raise bad_arguments(str(exc)) from None
    # The runner itself failed (e.g. a final_answer that is not JSON).
    _log.warning("verifier runner failed: %s", exc)
    return _error("exception", f"the verifier could not be run: {type(exc).__name__}: {exc}")


async def _run_planned(
    state: LocalState, instance_id: str, planned: _Planned, *, key: str | None, keyed: bool
) -> ExecutionRecord:
    """Run a planned verifier run in a run slot and store its execution record."""
    failure = planned.failure
    error: models.VerifierError | None = None
    success, score, result, stdout, elapsed = False, None, None, "", 0.0
    if planned.plan is not None:
        async with _run_slot(state, planned.run_timeout):
            try:
                outcome: VerifierOutcome = await run_planned(planned.plan)
            except Exception as exc:
                failure = exc
            else:
                error = _wire_error(outcome.error) if outcome.error is not None else None
                success, score, result = outcome.success, outcome.score, _jsonable(outcome.result)
                stdout, elapsed = outcome.stdout, outcome.execution_time_ms
            if failure is not None:
                error = _failed_run(state, failure, keyed=keyed)
    elif failure is not None:
        error = _failed_run(state, failure, keyed=keyed)
    if score is not None and not math.isfinite(score):
        score = None
    state.metrics.verifier_run(success, score)
    return await _save_execution(
        state,
        instance_id,
        key=key,
        sha256=planned.digest,
        verifier_id=_verifier_id(planned.digest),
        success=success,
        result=result,
        error=error,
        execution_time_ms=max(0.0, float(elapsed)),
        stdout=stdout,
        score=score,
    )


@contextlib.asynccontextmanager
async def _run_slot(state: LocalState, wait: float) -> AsyncIterator[None]:
    """Hold one of the server's verifier run slots, waiting at most ``wait`` seconds for it.

    Raises:
        LocalAPIError: 503 ``verifier_busy`` (retryable, ``Retry-After``) when none came free.
    """
    if state.verifier_gate is None:  # made inside the loop, on first use
        state.verifier_gate = anyio.Semaphore(verifier_concurrency(state))
    gate = state.verifier_gate
    try:
        if gate.value > 0 and not gate.statistics().tasks_waiting:
            gate.acquire_nowait()  # a free slot and nobody before us: no cancel scope and timer
        else:
            with anyio.fail_after(wait):
                await gate.acquire()
    except TimeoutError:
        raise LocalAPIError(
            503,
            f"every verifier run slot stayed busy for {wait:g}s; nothing ran, retry shortly",
            code=VERIFIER_BUSY,
            retryable=True,
            headers={"Retry-After": "1"},
        ) from None
    try:
        yield
    finally:
        gate.release()


async def _save_execution(
    state: LocalState,
    instance_id: str,
    *,
    key: str | None,
    sha256: str | None,
    verifier_id: str | None,
    success: bool,
    result: Any,
    error: models.VerifierError | None,
    execution_time_ms: float,
    stdout: str,
    score: float | None,
) -> ExecutionRecord:
    """Store one execution record under a new ``execution_id`` and return it as stored."""
    execution_id = new_id("vexec")
    record = ExecutionRecord(
        ExecutionWire(
            success=success,
            result=result,
            verifier_id=verifier_id,
            execution_id=execution_id,
            error=error,
            execution_time_ms=round(execution_time_ms),
            stdout=stdout,
            key=key,
            created_at=iso(),
        ),
        ExecutionPrivate(
            execution_time_ms=execution_time_ms, score=score, sha256=sha256, instance_id=instance_id
        ),
    )
    # As stored: a lone surrogate a verifier returned (or raised) is U+FFFD there, and must be
    # here too, or the answer could not be encoded.
    return await anyio.to_thread.run_sync(
        lambda: execution_records(state).put(execution_id, record, parent=instance_id)
    )


_ARGUMENT_READERS = 2
"""Pickled arguments' shapes read at once in worker threads: each read is a bounded pure-Python
walk (up to a few tenths of a second and some megabytes for the largest), so many at once,
keyless, would take every worker thread; the rest wait their turn."""
_INLINE_ARGUMENTS = 1024
"""Pickled ``args`` of up to this many base64 characters (the public SDK's usually are: a final
answer and the instance id take about 150) are read on the loop: at most 768 opcodes, about a
millisecond, less than a thread hop; and a flood of large ones never delays them."""


async def _invocation(
    state: LocalState, req: models.VerifiersExecuteRequest
) -> tuple[str | None, Any, Invocation | None]:
    """(instance id, final answer, public-SDK arguments) of a request, in any argument form.

    ``args`` as ``VerifierArgs`` names the instance and the final answer. ``args`` as a string is
    the public SDK's pickle, whose shape ``_verifier_args`` reads (a bounded walk in pure Python:
    off the loop unless small) without decoding it; without ``args``, ``args_array`` holds the positional
    arguments followed by ``{"env": <instance_id>}``.

    Raises:
        LocalAPIError: 400 ``bad_request`` for pickled ``args`` that cannot be read as plain data.
    """
    if isinstance(req.args, models.VerifierArgs):
        return req.args.instance_id, req.args.final_answer, None
    if isinstance(req.args, models.PickledArgs):
        if len(req.args.root) <= _INLINE_ARGUMENTS:
            invocation = from_pickled_args(req.args.root)
        else:
            if state.argument_readers is None:  # made inside the loop, on first use
                state.argument_readers = anyio.CapacityLimiter(_ARGUMENT_READERS)
            invocation = await anyio.to_thread.run_sync(
                from_pickled_args, req.args.root, limiter=state.argument_readers
            )
    else:
        invocation = from_args_array(list(req.args_array or []))
    return invocation.instance_id, None, invocation


async def execute_verifier(
    state: LocalState, req: models.VerifiersExecuteRequest, instance_id: str | None, *, keyed: bool
) -> models.VerifiersExecuteResponse:
    """Run the verifier a request names against an instance.

    Args:
        state: Server state.
        req: The request; ``args.instance_id`` (or the ``{"env": ...}`` entry of ``args_array``)
            names the instance unless ``instance_id`` is given.
        instance_id: The instance the route is bound to (the manager's endpoint), or None.
        keyed: The request bore the server's key (always on ``/v1/verifiers/execute``).

    Raises:
        RequestValidationError: ``VerifierArgs`` without an instance (422 naming ``args.instance_id``).
        LocalAPIError: 400 when no instance is named at all, with a bad bundle or with pickled
            ``args`` that are not plain data; 404 for unknown code (``not_found``) or instance
            (``instance_not_found``).
    """
    if instance_id is not None:  # the route names it: an unknown one is 404 before the body is read
        await anyio.to_thread.run_sync(_instances.require_live, state, instance_id)
    named, final_answer, invocation = await _invocation(state, req)
    target = instance_id if instance_id is not None else named
    if target is None and isinstance(req.args, models.VerifierArgs):
        # The control plane's schema requires it, so the body check normally answers this first.
        raise RequestValidationError(
            [{"type": "missing", "loc": ("body", "args", "instance_id"), "msg": "Field required"}]
        )
    if target is None:
        raise LocalAPIError(
            400,
            'name the instance: args.instance_id, or {"env": <instance_id>} as the last args_array entry',
            code="bad_request",
            retryable=False,
        )
    cache_hit = req.bundle is None
    instance: str = target

    def plan() -> _Planned:
        # The code first, as its errors (400, 404 for unknown code) come before the instance's.
        code, seed = _code_and_seed(state, req, instance)
        return _plan_code(
            state,
            code,
            seed,
            final_answer=final_answer,
            arguments=invocation.arguments if invocation is not None else None,
            pickled_args=invocation.pickled if invocation is not None else None,
            convention="env",
            function_name=req.function_name,
            timeout_seconds=float(req.timeout),
            sha256=req.sha256,
            keyed=keyed,
        )

    # One worker-thread hop for the code, the instance's seed and the run's plan.
    planned = await anyio.to_thread.run_sync(plan)
    record = await _run_planned(state, instance, planned, key=req.key, keyed=keyed)
    # Exactly the wire model: no subclass that could carry more.
    return models.VerifiersExecuteResponse.model_validate(
        {**dict(record.execution), "version": 1, "bundle_cache_hit": cache_hit}
    )


async def execute_function(
    state: LocalState, req: models.ExecuteFunctionRequest, instance_id: str, *, keyed: bool
) -> models.ExecuteFunctionResponse:
    """Run the public SDK's ``{function_code, function_name}`` body against an instance.

    The function is called ``fn(before, after, transcript)`` with the instance's ``seed`` and
    ``current`` databases and ``text_solution`` (as many as it takes), in the sandbox; its source
    is dedented first (the public SDK sends ``inspect.getsource`` of the function). A function
    that ran is ``success: true`` with what it returned in ``result``, whatever that is (this
    endpoint reports a return value, not a score); a fault is ``success: false`` with ``error``
    holding its type, message and traceback.

    Args:
        state: Server state.
        req: The request.
        instance_id: The instance the manager serves.
        keyed: The request bore the server's key.

    Raises:
        LocalAPIError: 404 ``instance_not_found``; 503 ``verifier_jail_unavailable`` or
            ``verifier_busy``.
    """
    await anyio.to_thread.run_sync(_instances.require_live, state, instance_id)  # 404 before any work
    # The public SDK sends inspect.getsource(fn): a function defined inside another is indented.
    # A pure-Python walk of up to a megabyte (keyless): off the loop.
    code = await anyio.to_thread.run_sync(dedent, req.function_code)
    record = await run_code(
        state,
        code,
        instance_id,
        final_answer=req.text_solution,
        convention="snapshots",
        function_name=req.function_name,
        keyed=keyed,
    )
    error = record.execution.error
    if error is None or error.type == "invalid_result":
        return models.ExecuteFunctionResponse(
            success=True,
            result=record.execution.result,
            message=f"{req.function_name} ran in {round(record.private.execution_time_ms)} ms",
        )
    # A raised exception's message already starts with its class name (``error.type``).
    raised = error.message.startswith(f"{error.type}:") or error.message == error.type
    detail = error.message if raised else f"{error.type}: {error.message}"
    return models.ExecuteFunctionResponse(
        success=False,
        result=None,
        error=detail + (f"\n{error.traceback}" if error.traceback else ""),
        message=f"{req.function_name} failed: {detail}",
    )
