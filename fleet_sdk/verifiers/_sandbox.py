"""Running a verifier in a fresh, limited child process, jailed by the operating system.

Each run starts ``python -I -S _child.py`` (the real interpreter behind ``sys.executable``)
inside the OS jail of ``_jail.py`` (bubblewrap: no network, own PID and user namespaces, a
filesystem view of only the runtime, its bundle, its scratch dir and its databases, an empty
environment), with ``RLIMIT_AS``/``RLIMIT_CPU`` limits and an audit hook (see ``_audit.py``)
installed before the verifier's code runs, as a second layer. Where the jail cannot start,
runs are refused (:class:`JailUnavailableError`) unless the caller opts in with
``allow_unjailed=True``; ``VerifierOutcome.sandbox`` says which layers protected the run.

The job goes in on stdin as JSON; the result comes back in a file outside the scratch
directory, so the verifier's prints (stdout) stay its own. stdout and stderr are read
continuously and capped, the whole process group is killed at the deadline (and after the
run, should anything of it be left), and every fault comes back as ``VerifierOutcome.error``.
From its start until it is reaped, the group is registered with ``fleet_sdk.process_groups`` (and
held at its gate until then), so it is killed even when this process is SIGKILLed mid-run (for a
jailed run bwrap's ``--die-with-parent`` does it too, once bwrap has armed it; an unjailed run
has nothing else).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .._exceptions import JailUnavailableError, SandboxError
from .._twin import sync_function
from ..process_groups import GATE_OPEN, gated, guard_group, release_group
from ._entry import CallConvention, call_arguments
from ._jail import INNER_CODE_DIR, INNER_OUT_DIR, jail_argv, jail_status
from ._outcome import ErrorType, SandboxLayers, VerifierError, VerifierOutcome
from ._plain_pickle import PlainDataError, dump_plain

__all__ = [
    "DEFAULT_MEMORY_MB",
    "DEFAULT_TIMEOUT",
    "OUTPUT_LIMIT_BYTES",
    "JailUnavailableError",
    "SandboxError",
    "run_sandboxed",
    "run_sandboxed_async",
]

DEFAULT_TIMEOUT = 30.0
"""Seconds of wall-clock time a sandboxed verifier gets by default."""

DEFAULT_MEMORY_MB = 512
"""Address-space limit (``RLIMIT_AS``) of the sandbox child by default, in MiB."""

OUTPUT_LIMIT_BYTES = 1024 * 1024
"""At most this much of the child's stdout (and, separately, stderr) is kept."""

TEMP_PREFIX = "fleet-verifier-"
"""The prefix of every run's temporary directory (the local server puts them all under its own
scratch root, which it empties as a whole at startup)."""

_CHILD_SCRIPT = Path(__file__).with_name("_child.py")
_READ_CHUNK = 65536
_STDERR_TAIL = 4000
# How long to wait for stdout/stderr to reach EOF once the child has exited or been killed.
_DRAIN_GRACE = 2.0


@dataclass
class _Job:
    root: Path
    workdir: Path
    result_path: Path
    payload: bytes
    argv: list[str]
    timeout: float
    memory_mb: int
    layers: SandboxLayers

    def cleanup(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def _prepare(
    code: str,
    *,
    databases: Mapping[str, str | os.PathLike[str]],
    final_answer: Any,
    function_name: str | None,
    timeout: float,
    memory_mb: int,
    allow_unjailed: bool,
    scratch_root: str | os.PathLike[str] | None = None,
    audit_hook: bool = True,
    args: Sequence[Any] | None = None,
    kwargs: Mapping[str, Any] | None = None,
    convention: CallConvention = "env",
) -> _Job:
    """Check the arguments, make the run's directories and its command line (jailed if possible).

    ``audit_hook=False`` leaves the second layer out; only tests use it, to show what the OS
    jail alone stops.
    """
    if not isinstance(code, str):
        raise SandboxError(f"code must be a str, not {type(code).__name__}")
    try:
        arguments = call_arguments(final_answer, args, kwargs, convention)
        # To the child as a plain-data pickle: tuples, sets and bytes arrive as they were sent.
        pickled = dump_plain(arguments).hex() if arguments is not None else None
    except (ValueError, PlainDataError) as exc:
        raise SandboxError(f"verifier arguments: {exc}") from None
    if not (isinstance(timeout, int | float) and math.isfinite(timeout) and timeout > 0):
        raise SandboxError(f"timeout must be a positive number of seconds, not {timeout!r}")
    if not (isinstance(memory_mb, int) and memory_mb >= 32):
        raise SandboxError(f"memory_mb must be an int of at least 32, not {memory_mb!r}")
    resolved = {str(name): str(Path(path).resolve()) for name, path in databases.items()}
    status = jail_status()
    if not status.available and not allow_unjailed:
        raise JailUnavailableError(status.reason)
    root = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=scratch_root))
    workdir = root / "work"
    out_dir = root / "out"
    workdir.mkdir()
    out_dir.mkdir()
    result_path = out_dir / "result.json"
    layers: SandboxLayers = "os_jail+audit_hook" if status.available else "audit_hook"
    if not audit_hook:
        layers = "os_jail" if status.available else "none"
    if status.available:
        assert status.bwrap is not None
        inner_child = f"{INNER_CODE_DIR}/{_CHILD_SCRIPT.name}"
        argv, inner_databases = jail_argv(
            [os.path.realpath(sys.executable), "-I", "-S", inner_child],
            code_dir=_CHILD_SCRIPT.parent.resolve(),
            scratch=workdir,
            out_dir=out_dir,
            databases=resolved,
            bwrap=status.bwrap,
        )
        inner_result = f"{INNER_OUT_DIR}/{result_path.name}"
    else:
        argv = [sys.executable, "-I", "-S", str(_CHILD_SCRIPT)]
        inner_databases, inner_result = resolved, str(result_path)
    job = {
        "code": code,
        "final_answer": final_answer,
        "arguments": pickled,
        "convention": convention,
        "function_name": function_name,
        "databases": inner_databases,
        "audit_hook": audit_hook,
        "result_path": inner_result,
        "memory_mb": memory_mb,
        "cpu_seconds": math.ceil(timeout) + 1,
        "result_limit": OUTPUT_LIMIT_BYTES,
    }
    try:
        payload = json.dumps(job).encode("utf-8")
    except (TypeError, ValueError) as exc:
        shutil.rmtree(root, ignore_errors=True)
        raise SandboxError(f"final_answer must be JSON-serializable: {exc}") from None
    return _Job(root, workdir, result_path, payload, argv, float(timeout), memory_mb, layers)


def _kill_group(pid: int) -> None:
    """SIGKILL the child's process group (it leads it: ``start_new_session=True``)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _decode(data: bytes, dropped: int) -> str:
    text = data.decode("utf-8", errors="replace")
    if dropped:
        text += f"\n[fleet_sdk: output truncated, {dropped} more bytes dropped]"
    return text


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _finish(
    job: _Job,
    *,
    returncode: int,
    timed_out: bool,
    stdout: str,
    stderr: str,
    elapsed_ms: float,
) -> VerifierOutcome:
    """Build the outcome from what the child left behind; never raises for the child's faults."""
    stderr_tail = stderr[-_STDERR_TAIL:] or None

    def failed(kind: ErrorType, message: str, traceback: str | None = stderr_tail) -> VerifierOutcome:
        return VerifierOutcome(
            success=False,
            stdout=stdout,
            error=VerifierError(type=kind, message=message, traceback=traceback),
            execution_time_ms=elapsed_ms,
            sandbox=job.layers,
        )

    try:
        record = json.loads(job.result_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        record = None
    if isinstance(record, dict):  # complete: the verifier finished, even if only just in time
        try:
            error = record.get("error")
            return VerifierOutcome(
                success=error is None,
                score=record.get("score") if error is None else None,
                result=record.get("result"),
                stdout=stdout,
                error=VerifierError.model_validate(error) if error is not None else None,
                execution_time_ms=elapsed_ms,
                sandbox=job.layers,
            )
        except ValidationError as exc:
            return failed("exception", f"the verifier process wrote an invalid result: {exc}")
    if timed_out:
        return failed("timeout", f"the verifier did not finish within {job.timeout:g}s and was killed")
    if job.layers.startswith("os_jail") and returncode > 128:
        returncode = 128 - returncode  # bwrap exits 128 + N when its child was killed by signal N
    if returncode < 0:
        number = -returncode
        name = _signal_name(number)
        if number == signal.SIGXCPU:
            return failed("timeout", f"the verifier used up its CPU time and was killed ({name})")
        if number in (signal.SIGKILL, signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT):
            return failed(
                "memory_limit",
                f"the verifier process was killed by {name}, most likely at its "
                f"{job.memory_mb} MiB memory limit",
            )
        return failed("exception", f"the verifier process was killed by {name}")
    return failed("exception", f"the verifier process exited with status {returncode} without a result")


# -- the run (async; run_sandboxed is its blocking twin) ---------------------------------------


async def _read_capped(stream: asyncio.StreamReader, limit: int) -> str:
    chunks: list[bytes] = []
    kept = dropped = 0
    while chunk := await stream.read(_READ_CHUNK):
        room = limit - kept
        if room > 0:
            chunks.append(chunk[:room])
            kept += min(room, len(chunk))
        dropped += max(0, len(chunk) - max(room, 0))
    return _decode(b"".join(chunks), dropped)


async def _feed_async(stream: asyncio.StreamWriter, payload: bytes) -> None:
    try:
        stream.write(payload)
        await stream.drain()
        stream.close()
        await stream.wait_closed()
    except (BrokenPipeError, ConnectionResetError, OSError):
        pass


async def run_sandboxed_async(
    code: str,
    *,
    databases: Mapping[str, str | os.PathLike[str]],
    final_answer: Any = None,
    args: Sequence[Any] | None = None,
    kwargs: Mapping[str, Any] | None = None,
    convention: CallConvention = "env",
    function_name: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,  # noqa: ASYNC109 - the child's limit, enforced by killing it
    memory_mb: int = DEFAULT_MEMORY_MB,
    allow_unjailed: bool = False,
    scratch_root: str | os.PathLike[str] | None = None,
) -> VerifierOutcome:
    """Run a verifier in a fresh, limited, OS-jailed child process and return its outcome.

    The child is the interpreter with ``-I -S`` (no site-packages, no ``PYTHON*`` variables)
    inside a bubblewrap jail: no network, its own PID namespace (nothing it starts outlives
    it), uid 65534 without capabilities, an empty environment, and a filesystem holding only
    the Python runtime, its scratch directory (cwd) and the given databases (read-only).
    ``RLIMIT_AS = memory_mb`` MiB and ``RLIMIT_CPU`` just above ``timeout`` apply. As a second
    layer, an audit hook denies opening anything but those files, starting processes, sending
    signals, the network, ``ctypes`` and frame introspection; a denied call raises
    ``PermissionError("denied by the verifier sandbox: ...")`` inside the verifier. The
    verifier gets ``SQLiteEnvironment(databases, read_only=True)`` as ``env``, whose
    connections refuse ``ATTACH`` and changes to their authorizer. At most
    :data:`OUTPUT_LIMIT_BYTES` of its stdout is kept. ``outcome.sandbox`` names the layers
    that protected the run.

    Every fault of the verifier (syntax error, no entry point, exception, timeout, memory
    limit, invalid result, a crash of the child) is returned in ``outcome.error``. The child's
    pipes are read on the running loop, so the loop is never blocked; its process group is
    SIGKILLed at the deadline, on cancellation and after every run, so nothing it started
    outlives the call. :func:`run_sandboxed` is the blocking twin (the same run, on the SDK's
    loop bridge).

    Args:
        code: The verifier's source; its entry point is ``verify`` (else the only function).
        databases: Database name to SQLite file, e.g. ``{"seed": ..., "current": ...}``.
        final_answer: The agent's final answer (JSON-serializable), passed when ``verify``
            takes two parameters.
        args: Call ``verify(env, *args, **kwargs)`` instead (the public SDK's form); ``args``
            and ``kwargs`` must be plain data (builtin containers and scalars).
        kwargs: Keyword arguments for that call, e.g. ``{"final_answer": "42"}``.
        convention: ``"snapshots"`` calls ``fn(env.db("seed"), env.db("current"), final_answer)``
            instead (see :data:`~fleet_sdk.verifiers.CallConvention`).
        function_name: Call this top-level function instead of finding the entry point.
        timeout: Wall-clock seconds before the child is killed (``error.type == "timeout"``).
        memory_mb: Address-space limit of the child, in MiB (at least 32).
        allow_unjailed: Where the OS jail cannot start, run with the audit hook alone
            (``outcome.sandbox == "audit_hook"``) instead of raising. Only for trusted code.
        scratch_root: The directory the run's temporary directory is made in (the system's
            temp directory by default); it is removed after the run.

    Raises:
        JailUnavailableError: The OS jail cannot start and ``allow_unjailed`` is false.
        SandboxError: Invalid arguments (e.g. a ``final_answer`` that is not JSON, ``args`` that
            are not plain data, or ``args`` together with ``final_answer``), or the interpreter
            could not be started.
    """
    # Off the loop: checking the jail may run bubblewrap (seconds, under a lock) and making the
    # run's directory touches the disk.
    job = await asyncio.to_thread(
        _prepare,
        code,
        databases=databases,
        final_answer=final_answer,
        function_name=function_name,
        timeout=timeout,
        memory_mb=memory_mb,
        allow_unjailed=allow_unjailed,
        scratch_root=scratch_root,
        args=args,
        kwargs=kwargs,
        convention=convention,
    )
    return await _run_job_async(job)


def _run_job(job: _Job) -> VerifierOutcome:
    """Run a prepared job to its outcome, blocking (on the SDK's loop bridge)."""
    from .._runtime._bridge import run_sync

    return run_sync(_run_job_async(job))


async def _run_job_async(job: _Job) -> VerifierOutcome:
    """Run a prepared job to its outcome: the one run every entry point goes through."""
    try:
        start = time.perf_counter()
        try:
            process = await asyncio.create_subprocess_exec(
                *gated(job.argv),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=job.workdir,
                env={},
                start_new_session=True,
            )
        except OSError as exc:
            raise SandboxError(f"could not start the sandbox interpreter {sys.executable!r}: {exc}") from exc
        guard_group(process.pid)
        assert process.stdin is not None and process.stdout is not None and process.stderr is not None
        readers = [
            asyncio.ensure_future(_read_capped(process.stdout, OUTPUT_LIMIT_BYTES)),
            asyncio.ensure_future(_read_capped(process.stderr, OUTPUT_LIMIT_BYTES)),
        ]
        feeder = asyncio.ensure_future(_feed_async(process.stdin, GATE_OPEN + job.payload))
        timed_out = False
        try:
            try:
                await asyncio.wait_for(process.wait(), job.timeout)
            except TimeoutError:
                timed_out = True
                _kill_group(process.pid)  # not reaped yet: the pid is still ours
                await process.wait()
            else:
                # Exited. The one kill rule: the group goes after every run, so a straggler it
                # left (a daemon thread's fork, a detached grandchild) never outlives the run.
                # The group id stays ours while any member lives; with none left, killpg finds
                # nothing (tests/test_verifier_sandbox.py, threads left running).
                _kill_group(process.pid)
        except BaseException:
            if process.returncode is None:
                _kill_group(process.pid)
                await asyncio.shield(process.wait())
            release_group(process.pid)
            for task in (*readers, feeder):
                task.cancel()
            raise
        release_group(process.pid)  # reaped, and its group killed
        elapsed_ms = (time.perf_counter() - start) * 1000.0
        await asyncio.wait([*readers, feeder], timeout=_DRAIN_GRACE)
        for task in (*readers, feeder):
            task.cancel()  # a no-op for the finished ones
        stdout, stderr = (task.result() if task.done() and not task.cancelled() else "" for task in readers)
        return _finish(
            job,
            returncode=process.returncode if process.returncode is not None else -signal.SIGKILL,
            timed_out=timed_out,
            stdout=stdout,
            stderr=stderr,
            elapsed_ms=elapsed_ms,
        )
    finally:
        await asyncio.shield(asyncio.to_thread(job.cleanup))


run_sandboxed = sync_function(run_sandboxed_async)
"""Blocking twin of :func:`run_sandboxed_async`: the same run, limits and outcome."""
