"""Running a verifier in a fresh, limited child process, jailed by the operating system.

Each run starts ``python -I -S _child.py`` (the real interpreter behind ``sys.executable``)
inside the OS jail of ``_jail.py`` (bubblewrap: no network, own PID and user namespaces, a
filesystem view of only the runtime, its bundle, its databases and a scratch tmpfs of a fixed
size, an empty environment, a seccomp filter refusing new processes), with
``RLIMIT_AS``/``RLIMIT_CPU`` limits, a cgroup of its own where this process can make one
(``_cgroup.py``), and an audit hook (see ``_audit.py``) installed before
the verifier's code runs, as a second layer. Where the jail cannot start, runs are refused
(:class:`JailUnavailableError`) unless the caller opts in with ``allow_unjailed=True``, which
is for trusted code only; ``VerifierOutcome.sandbox`` says which layers protected the run.

Where the server gives its data dir as the database root, a run is forked from the verifier
zygote instead (``_zygote.py``): one jailed interpreter per process whose forks take, each for
itself, what bubblewrap gives a fresh run (``_zygote_child.py``); the outcomes are the same, and
anything the zygote cannot serve runs fresh (``FLEET_VERIFIER_RUNNER=fresh`` always does).

The job goes in on stdin as JSON; the result comes back on a pipe of its own (an inherited
file descriptor), so the verifier's prints (stdout) stay its own. The verifier can reach that
pipe too, so it is read like stdout and stderr: continuously, with a cap, and a result past it
is an error; nothing of a jailed run touches the host's disk. The whole process group is
killed at the deadline (and after the run, should anything of it be left), and every fault
comes back as ``VerifierOutcome.error``. From its start until it is reaped, the group is
registered with ``_process_groups.py`` (and held at its gate until then, which is also
when it is moved into its cgroup), so it is killed even when this process is SIGKILLed mid-run
(for a jailed run bwrap's ``--die-with-parent`` does it too, once bwrap has armed it; an
unjailed run has nothing else).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import io
import json
import math
import os
import shutil
import signal
import socket
import struct
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from fleet_sdk._twin import sync_function
from fleet_sdk.verifiers._entry import CallConvention, call_arguments
from fleet_sdk.verifiers._outcome import ErrorType, SandboxLayers, VerifierError, VerifierOutcome

from ._bytecode import staged
from ._cgroup import RunCgroup
from ._errors import JailUnavailableError, SandboxError
from ._jail import (
    INNER_CODE_DIR,
    INNER_RUNTIME_DIR,
    RUNTIME_DIR,
    THREAD_LIMIT,
    JailStatus,
    inner_databases,
    jail_argv,
    jail_status,
    seccomp_fd,
)
from ._pickled_args import PickledArguments
from ._plain_pickle import PlainDataError, dump_plain
from ._process_groups import GATE_OPEN, gated, guard_group, release_group
from ._zygote import Submitted, ZygoteUnavailable, forget_broken, roots_covering, runner, submit
from ._zygote_child import RESULT_FD as ZYGOTE_RESULT_FD

__all__ = [
    "DEFAULT_MEMORY_MB",
    "DEFAULT_SCRATCH_MB",
    "DEFAULT_TIMEOUT",
    "OUTPUT_LIMIT_BYTES",
    "JailUnavailableError",
    "RunPlan",
    "SandboxError",
    "plan_run",
    "run_planned",
    "run_sandboxed",
    "run_sandboxed_sync",
]

DEFAULT_TIMEOUT = 30.0
"""Seconds of wall-clock time a sandboxed verifier gets by default."""

DEFAULT_MEMORY_MB = 512
"""Address-space limit (``RLIMIT_AS``) of the sandbox child by default, in MiB."""

DEFAULT_SCRATCH_MB = 64
"""Size of a jailed run's scratch tmpfs (its cwd), and of its ``/tmp``, by default, in MiB."""

OUTPUT_LIMIT_BYTES = 1024 * 1024
"""At most this much of the child's stdout (and, separately, stderr) is kept."""

_RESULT_LIMIT_BYTES = 2 * OUTPUT_LIMIT_BYTES
"""The largest result record read back: a result of up to ``OUTPUT_LIMIT_BYTES`` as JSON, plus
an error message and traceback the runner caps (``_runner.py``)."""

TEMP_PREFIX = "fleet-verifier-"
"""The prefix of an unjailed run's temporary directory (the local server puts them all under its
own scratch root, which it empties as a whole at startup); a jailed run has none on the host."""

_CHILD_SCRIPT = Path(__file__).with_name("_child.py")
_MIB = 1024 * 1024
_READ_CHUNK = 65536
_STDERR_TAIL = 4000
# How long to wait for stdout/stderr to reach EOF once the child has exited or been killed.
_DRAIN_GRACE = 2.0


@dataclass
class _ZygoteJob:
    """What a run needs from the zygote (``_zygote.py``): its view, databases and payload."""

    status: JailStatus
    code_dir: Path
    runtime_dir: Path
    roots: tuple[str, ...]
    databases: list[str]  # host paths, in the order of their inner names
    scratch_bytes: int
    payload: bytes  # the job, naming the zygote run's result descriptor


@dataclass
class _Fresh:
    """What a fresh run's command line is made of (made only when the run is fresh)."""

    status: JailStatus
    code_dir: Path
    runtime_dir: Path
    databases: dict[str, str]  # name to resolved host path
    scratch_mb: int
    payload: dict[str, Any]  # the job, naming this process's result descriptor


@dataclass
class RunPlan:
    """A verifier run worked out (:func:`plan_run`): its arguments checked, its payload made,
    the jail and runner chosen; no descriptor, cgroup or directory of it exists yet."""

    status: JailStatus
    layers: SandboxLayers
    timeout: float
    memory_mb: int
    scratch_mb: int
    scratch_root: str | os.PathLike[str] | None
    decodes_arguments: bool
    code_dir: Path
    runtime_dir: Path
    databases: dict[str, str]  # name to resolved host path
    payload: dict[str, Any]  # the job, without its result descriptor
    roots: tuple[str, ...] | None  # what the zygote's run sees, when the zygote serves it
    zygote_payload: bytes  # the zygote's job (naming its result descriptor), when it serves it

    def loop_safe(self) -> bool:
        """Whether making the run touches nothing but a pipe (a jailed zygote run without a
        cgroup): ``os.pipe()`` neither blocks nor grows with the request, so it runs on the
        loop, where a worker-thread hop would cost more."""
        return self.roots is not None and self.status.available and self.status.cgroup_parent is None


@dataclass
class _Job:
    argv: list[str]
    payload: bytes
    timeout: float
    memory_mb: int
    layers: SandboxLayers
    result_fd: int | None  # the read end of the result pipe, until the run reads it
    child_fds: list[int]  # what the child inherits (the result pipe's write end, the filter)
    root: Path | None = None  # an unjailed run's temporary directory (its cwd is ``root/work``)
    cgroup: RunCgroup | None = None
    decodes_arguments: bool = False  # the child decodes pickled arguments (and may refuse them)
    zygote: _ZygoteJob | None = None  # how the zygote would run it (else, or if it cannot: fresh)
    fresh: _Fresh | None = None  # how a fresh run is made (``argv`` is empty until it is)

    def payload_for_zygote(self) -> bytes:
        assert self.zygote is not None
        return self.zygote.payload

    def close_child_fds(self) -> None:
        """Close this process's copies of what the child inherited (once it has them)."""
        fds, self.child_fds = self.child_fds, []
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)

    def cleanup(self) -> None:
        self.close_child_fds()
        if self.result_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.result_fd)
            self.result_fd = None
        if self.cgroup is not None:
            self.cgroup.remove()
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)


def _plan(
    code: str,
    *,
    databases: Mapping[str, str | os.PathLike[str]],
    final_answer: Any,
    function_name: str | None,
    timeout: float,
    memory_mb: int,
    allow_unjailed: bool,
    scratch_mb: int = DEFAULT_SCRATCH_MB,
    scratch_root: str | os.PathLike[str] | None = None,
    audit_hook: bool = True,
    args: Sequence[Any] | None = None,
    kwargs: Mapping[str, Any] | None = None,
    convention: CallConvention = "env",
    pickled_args: PickledArguments | None = None,
) -> RunPlan:
    """Check the arguments and work out the run (jailed if possible), making none of its
    descriptors, cgroup or directories yet (:func:`_materialize` does).

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
    alone = arguments is None and final_answer is None and convention == "env"
    if pickled_args is not None and not alone:
        raise SandboxError("pickled_args go alone (no final_answer, args, kwargs) with the 'env' convention")
    if not (isinstance(timeout, int | float) and math.isfinite(timeout) and timeout > 0):
        raise SandboxError(f"timeout must be a positive number of seconds, not {timeout!r}")
    if not (isinstance(memory_mb, int) and memory_mb >= 32):
        raise SandboxError(f"memory_mb must be an int of at least 32, not {memory_mb!r}")
    if not (isinstance(scratch_mb, int) and scratch_mb >= 1):
        raise SandboxError(f"scratch_mb must be an int of at least 1, not {scratch_mb!r}")
    resolved = {str(name): str(Path(path).resolve()) for name, path in databases.items()}
    status = jail_status()
    if not status.available and not allow_unjailed:
        raise JailUnavailableError(status.reason)
    layers: SandboxLayers = "os_jail+audit_hook" if status.available else "audit_hook"
    if not audit_hook:
        layers = "os_jail" if status.available else "none"
    try:
        if status.available:
            # The same modules, with their bytecode: the run need not compile them (_bytecode.py).
            code_dir, runtime_dir = staged(_CHILD_SCRIPT.parent.resolve(), RUNTIME_DIR)
            inner = inner_databases(resolved)
        else:
            code_dir, runtime_dir, inner = _CHILD_SCRIPT.parent, RUNTIME_DIR, resolved
    except OSError as exc:
        raise SandboxError(f"could not prepare the verifier's run: {exc}") from exc
    payload = {
        "code": code,
        "final_answer": final_answer,
        "arguments": pickled,
        "pickled_args": pickled_args.payload() if pickled_args is not None else None,
        "convention": convention,
        "function_name": function_name,
        "databases": inner,
        "audit_hook": audit_hook,
        "jailed": status.available,
        "memory_mb": memory_mb,
        "cpu_seconds": math.ceil(timeout) + 1,
        "result_limit": OUTPUT_LIMIT_BYTES,
    }
    roots = roots_covering(list(resolved.values())) if _zygote_serves(status) else None
    zygote_payload = b""
    if roots is not None:
        # The zygote's run gets no bwrap command line: one is made only if it falls back.
        try:
            zygote_payload = json.dumps({**payload, "result_fd": ZYGOTE_RESULT_FD}).encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise SandboxError(f"final_answer must be JSON-serializable: {exc}") from None
    return RunPlan(
        status=status,
        layers=layers,
        timeout=float(timeout),
        memory_mb=memory_mb,
        scratch_mb=scratch_mb,
        scratch_root=scratch_root,
        decodes_arguments=pickled_args is not None,
        code_dir=code_dir,
        runtime_dir=runtime_dir,
        databases=resolved,
        payload=payload,
        roots=roots,
        zygote_payload=zygote_payload,
    )


def _materialize(plan: RunPlan) -> _Job:
    """Make a planned run's result pipe, and its cgroup, directory or fresh command line where
    it needs them (only the pipe: :meth:`RunPlan.loop_safe`).

    Raises:
        SandboxError: They could not be made (the job's descriptors are closed again).
    """
    status = plan.status
    result_fd, result_write = os.pipe()
    job = _Job([], b"", plan.timeout, plan.memory_mb, plan.layers, result_fd, [result_write])
    job.decodes_arguments = plan.decodes_arguments
    try:
        if status.available:
            if status.cgroup_parent is not None:
                job.cgroup = RunCgroup(
                    Path(status.cgroup_parent),
                    memory_bytes=(plan.memory_mb + 2 * plan.scratch_mb) * _MIB,
                    pids=THREAD_LIMIT,
                )
        else:
            job.root = Path(tempfile.mkdtemp(prefix=TEMP_PREFIX, dir=plan.scratch_root))
            (job.root / "work").mkdir()
        payload = {**plan.payload, "result_fd": result_write}
        job.fresh = _Fresh(status, plan.code_dir, plan.runtime_dir, plan.databases, plan.scratch_mb, payload)
        if plan.roots is None:
            _make_fresh(job)
        else:
            job.zygote = _ZygoteJob(
                status,
                plan.code_dir,
                plan.runtime_dir,
                plan.roots,
                list(plan.databases.values()),
                plan.scratch_mb * _MIB,
                plan.zygote_payload,
            )
    except OSError as exc:
        job.cleanup()
        raise SandboxError(f"could not prepare the verifier's run: {exc}") from exc
    except BaseException:
        job.cleanup()
        raise
    return job


def _prepare(code: str, **kwargs: Any) -> _Job:
    """Plan a run and make what it holds (:func:`_plan`, :func:`_materialize`), blocking."""
    return _materialize(_plan(code, **kwargs))


def _make_fresh(job: _Job) -> None:
    """Make a fresh run's command line and job (with its seccomp filter's descriptor).

    Raises:
        SandboxError: The job is not JSON (a ``final_answer`` that is not).
        OSError: The filter's pipe could not be made.
    """
    fresh = job.fresh
    assert fresh is not None and not job.argv
    status = fresh.status
    if status.available:
        seccomp = seccomp_fd() if status.seccomp else None
        if seccomp is not None:
            job.child_fds.append(seccomp)
        argv, _ = jail_argv(
            [
                os.path.realpath(sys.executable),
                "-I",
                "-S",
                f"{INNER_CODE_DIR}/{_CHILD_SCRIPT.name}",
                INNER_RUNTIME_DIR,
            ],
            status=status,
            code_dir=fresh.code_dir,
            databases=fresh.databases,
            scratch_mb=fresh.scratch_mb,
            seccomp=seccomp,
            runtime_dir=fresh.runtime_dir,
        )
    else:
        argv = [sys.executable, "-I", "-S", str(_CHILD_SCRIPT), str(RUNTIME_DIR)]
    try:
        job.argv, job.payload = argv, json.dumps(fresh.payload).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise SandboxError(f"final_answer must be JSON-serializable: {exc}") from None


def _zygote_serves(status: JailStatus) -> bool:
    """The zygote runs jailed runs here: chosen, and the jail has every part it reproduces."""
    return runner() == "zygote" and _zygote_serves_here(status)


def _zygote_serves_here(status: JailStatus) -> bool:
    """The jail here has every part the zygote reproduces."""
    return (
        status.available
        and status.sized_tmpfs
        and status.userns_disabled
        and status.seccomp
        and hasattr(os, "pidfd_open")
    )


def _confine(job: _Job, pid: int) -> None:
    """Put the run's first process, still at its gate, into its cgroup (everything it starts
    follows it there).

    Without a cgroup the run keeps the CPU priority it started with: it is a session of its
    own, which the scheduler weighs as any other session's equal. A lower nice value would
    count against the other sessions of the machine too (a busy trainer's, say), not against
    the server alone, as ``cpu.weight`` does.

    Raises:
        SandboxError: The process could not be moved into its cgroup.
    """
    if job.cgroup is not None:
        try:
            job.cgroup.add(pid)
        except OSError as exc:
            raise SandboxError(f"could not move the verifier into its cgroup: {exc}") from exc


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
    result: _Captured,
    elapsed_ms: float,
) -> VerifierOutcome:
    """Build the outcome from what the child left behind; never raises for the child's faults.

    Raises:
        PlainDataError: The child could not decode the job's pickled arguments (nothing ran).
    """
    stderr_tail = stderr[-_STDERR_TAIL:] or None

    def failed(kind: ErrorType, message: str, traceback: str | None = stderr_tail) -> VerifierOutcome:
        return VerifierOutcome(
            success=False,
            stdout=stdout,
            error=VerifierError(type=kind, message=message, traceback=traceback),
            execution_time_ms=elapsed_ms,
            sandbox=job.layers,
        )

    if result.dropped:  # written past the runner, straight into the pipe: never parsed
        return failed(
            "exception", f"the verifier process wrote a result larger than {_RESULT_LIMIT_BYTES} bytes"
        )
    try:
        record = json.loads(result.data) if result.data else None
    except ValueError:  # cut short (killed while writing), or not the runner's
        record = None
    if isinstance(record, dict) and job.decodes_arguments and "arguments_error" in record:
        raise PlainDataError(str(record["arguments_error"]))
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


# -- the run (async; run_sandboxed_sync is its blocking twin) --------------------------------------


@dataclass
class _Captured:
    """What was read from one of the child's pipes: at most the cap, and the count of the rest."""

    data: bytes
    dropped: int

    def text(self) -> str:
        return _decode(self.data, self.dropped)


async def _read_capped(stream: asyncio.StreamReader, limit: int) -> _Captured:
    """Read ``stream`` to its end, keeping the first ``limit`` bytes (so the writer never blocks)."""
    chunks: list[bytes] = []
    kept = dropped = 0
    while chunk := await stream.read(_READ_CHUNK):
        room = limit - kept
        if room > 0:
            chunks.append(chunk[:room])
            kept += min(room, len(chunk))
        dropped += max(0, len(chunk) - max(room, 0))
    return _Captured(b"".join(chunks), dropped)


async def _read_result(pipe: io.RawIOBase) -> _Captured:
    """Read the result pipe (the runner's record) to its end, capped at ``_RESULT_LIMIT_BYTES``."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    try:
        return await _read_capped(reader, _RESULT_LIMIT_BYTES)
    finally:
        transport.close()


async def _feed_async(stream: asyncio.StreamWriter, payload: bytes) -> None:
    try:
        stream.write(payload)
        await stream.drain()
        stream.close()
        await stream.wait_closed()
    except (BrokenPipeError, ConnectionResetError, OSError):
        pass


async def run_sandboxed(
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
    scratch_mb: int = DEFAULT_SCRATCH_MB,
    allow_unjailed: bool = False,
    scratch_root: str | os.PathLike[str] | None = None,
    pickled_args: PickledArguments | None = None,
) -> VerifierOutcome:
    """Run a verifier in a fresh, limited, OS-jailed child process and return its outcome.

    The child is the interpreter with ``-I -S`` (no site-packages, no ``PYTHON*`` variables)
    inside a bubblewrap jail: no network, its own PID namespace (nothing it starts outlives
    it), uid 65534 without capabilities, an empty environment, and a filesystem holding only
    the Python runtime, the given databases (read-only) and two tmpfs mounts of ``scratch_mb``
    each, its scratch directory (cwd) and ``/tmp``. A seccomp filter refuses new processes (threads are
    fine), namespaces and mounts. ``RLIMIT_AS = memory_mb`` MiB and ``RLIMIT_CPU`` just above
    ``timeout`` apply; where this process can make cgroups, the run also gets one bounding its
    memory and tmpfs together, its threads, and its CPU share below this process's
    (:meth:`~fleet_sdk.verifiers.JailStatus.summary` says what is bounded here). As a second
    layer, an audit hook denies opening anything but those files, starting processes, sending
    signals, the network, ``ctypes`` and frame introspection; a denied call raises
    ``PermissionError("denied by the verifier sandbox: ...")`` inside the verifier. The
    verifier gets ``SQLiteEnvironment(databases, read_only=True)`` as ``env``, whose
    connections refuse ``ATTACH`` and changes to their authorizer. At most
    :data:`OUTPUT_LIMIT_BYTES` of its stdout is kept. ``outcome.sandbox`` names the layers
    that protected the run.

    Every fault of the verifier (syntax error, no entry point, exception, timeout, memory
    limit, invalid or oversized result, a crash of the child) is returned in
    ``outcome.error``. The child's pipes are read on the running loop, so the loop is never
    blocked; its process group is SIGKILLed at the deadline, on cancellation and after every
    run, so nothing it started outlives the call. :func:`run_sandboxed_sync` is the blocking twin
    (the same run, on the SDK's loop bridge).

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
        scratch_mb: Size of the jailed run's scratch tmpfs, and of its ``/tmp``, in MiB (at
            least 1); writing past it fails with ``ENOSPC``.
        allow_unjailed: Where the OS jail cannot start, run with the audit hook alone
            (``outcome.sandbox == "audit_hook"``) instead of raising. **Only for trusted code**:
            the hook is a second layer, and what it misses (native code, SQLite's own file
            access) reaches the host as this process's user.
        scratch_root: Where an unjailed run's temporary directory (its cwd) is made (the
            system's temp directory by default); it is removed after the run.
        pickled_args: The public SDK's pickled arguments as received
            (:meth:`PickledArguments.read`), instead of ``args`` and ``kwargs``: decoded inside
            the run, under its limits, never in this process.

    Raises:
        JailUnavailableError: The OS jail cannot start and ``allow_unjailed`` is false.
        SandboxError: Invalid arguments (e.g. a ``final_answer`` that is not JSON, ``args`` that
            are not plain data, or ``args`` together with ``final_answer``), or the interpreter
            could not be started or confined.
        PlainDataError: The run could not decode ``pickled_args`` (the verifier did not run).
    """
    # Off the loop: checking the jail may run bubblewrap (seconds, under a lock), and the
    # arguments and payload grow with the request.
    plan = await asyncio.to_thread(
        _plan,
        code,
        databases=databases,
        final_answer=final_answer,
        function_name=function_name,
        timeout=timeout,
        memory_mb=memory_mb,
        scratch_mb=scratch_mb,
        allow_unjailed=allow_unjailed,
        scratch_root=scratch_root,
        args=args,
        kwargs=kwargs,
        convention=convention,
        pickled_args=pickled_args,
    )
    return await run_planned(plan)


def plan_run(
    code: str,
    *,
    databases: Mapping[str, str | os.PathLike[str]],
    final_answer: Any = None,
    args: Sequence[Any] | None = None,
    kwargs: Mapping[str, Any] | None = None,
    convention: CallConvention = "env",
    function_name: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    memory_mb: int = DEFAULT_MEMORY_MB,
    scratch_mb: int = DEFAULT_SCRATCH_MB,
    allow_unjailed: bool = False,
    scratch_root: str | os.PathLike[str] | None = None,
    pickled_args: PickledArguments | None = None,
) -> RunPlan:
    """Work out a run as :func:`run_sandboxed` would, blocking (call it in a worker thread, e.g.
    in the same hop as the caller's own look-ups); :func:`run_planned` runs it.

    Args:
        code: As :func:`run_sandboxed`'s.
        databases: As :func:`run_sandboxed`'s.
        final_answer: As :func:`run_sandboxed`'s.
        args: As :func:`run_sandboxed`'s.
        kwargs: As :func:`run_sandboxed`'s.
        convention: As :func:`run_sandboxed`'s.
        function_name: As :func:`run_sandboxed`'s.
        timeout: As :func:`run_sandboxed`'s.
        memory_mb: As :func:`run_sandboxed`'s.
        scratch_mb: As :func:`run_sandboxed`'s.
        allow_unjailed: As :func:`run_sandboxed`'s.
        scratch_root: As :func:`run_sandboxed`'s.
        pickled_args: As :func:`run_sandboxed`'s.

    Raises:
        JailUnavailableError: The OS jail cannot start and ``allow_unjailed`` is false.
        SandboxError: Invalid arguments.
    """
    return _plan(
        code,
        databases=databases,
        final_answer=final_answer,
        function_name=function_name,
        timeout=timeout,
        memory_mb=memory_mb,
        scratch_mb=scratch_mb,
        allow_unjailed=allow_unjailed,
        scratch_root=scratch_root,
        args=args,
        kwargs=kwargs,
        convention=convention,
        pickled_args=pickled_args,
    )


async def run_planned(plan: RunPlan) -> VerifierOutcome:
    """Run a planned run (:func:`plan_run`) to its outcome.

    What the run holds (its pipes; a cgroup or directory) is made only now, so a request waiting
    for a run slot with its plan holds no descriptor: on the loop when that is a pipe alone
    (:meth:`RunPlan.loop_safe`), else in a worker thread.

    Args:
        plan: The run.

    Raises:
        SandboxError: What the run holds could not be made, or the interpreter could not be
            started or confined.
        PlainDataError: The run could not decode its pickled arguments.
    """
    job = _materialize(plan) if plan.loop_safe() else await asyncio.to_thread(_materialize, plan)
    return await _run_job_async(job)


def _run_job(job: _Job) -> VerifierOutcome:
    """Run a prepared job to its outcome, blocking (on the SDK's loop bridge)."""
    from fleet_sdk._runtime._bridge import run_sync

    return run_sync(_run_job_async(job))


async def _run_job_async(job: _Job) -> VerifierOutcome:
    """Run a prepared job to its outcome: the one run every entry point goes through."""
    try:
        if job.zygote is not None:
            try:
                return await _run_in_zygote(job, job.zygote)
            except ZygoteUnavailable as exc:  # nothing of the verifier ran: run it fresh
                _log_fallback(exc)
                try:
                    _make_fresh(job)
                except OSError as exc:
                    raise SandboxError(f"could not prepare the verifier's run: {exc}") from exc
        start = time.perf_counter()
        try:
            process = await asyncio.create_subprocess_exec(
                *gated(job.argv),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=None if job.root is None else job.root / "work",
                env={},
                start_new_session=True,
                pass_fds=job.child_fds,
            )
        except OSError as exc:
            raise SandboxError(f"could not start the sandbox interpreter {sys.executable!r}: {exc}") from exc
        finally:
            job.close_child_fds()  # the child has its copies: the result pipe ends with the run
        guard_group(process.pid)
        assert process.stdin is not None and process.stdout is not None and process.stderr is not None
        assert job.result_fd is not None
        result_file, job.result_fd = os.fdopen(job.result_fd, "rb", buffering=0), None
        readers = [
            asyncio.ensure_future(_read_capped(process.stdout, OUTPUT_LIMIT_BYTES)),
            asyncio.ensure_future(_read_capped(process.stderr, OUTPUT_LIMIT_BYTES)),
            asyncio.ensure_future(_read_result(result_file)),
        ]
        tasks: list[asyncio.Future[Any]] = list(readers)
        timed_out = False
        try:
            try:
                _confine(job, process.pid)
                tasks.append(asyncio.ensure_future(_feed_async(process.stdin, GATE_OPEN + job.payload)))
                await asyncio.wait_for(process.wait(), job.timeout)
            except TimeoutError:
                timed_out = True
                _kill_group(process.pid)  # not reaped yet: the pid is still ours
                await process.wait()
            else:
                # Exited. The one kill rule: the group goes after every run, so a straggler it
                # left (a daemon thread's fork, a detached grandchild) never outlives the run.
                # The group id stays ours while any member lives; with none left, killpg finds
                # nothing (tests/sandbox/test_verifier_sandbox.py, threads left running).
                _kill_group(process.pid)
        except BaseException:
            if process.returncode is None:
                _kill_group(process.pid)
                await asyncio.shield(process.wait())
            release_group(process.pid)
            for task in tasks:
                task.cancel()
            result_file.close()
            raise
        release_group(process.pid)  # reaped, and its group killed
        elapsed_ms = (time.perf_counter() - start) * 1000.0
        await asyncio.wait(tasks, timeout=_DRAIN_GRACE)
        for task in tasks:
            task.cancel()  # a no-op for the finished ones
        result_file.close()
        stdout, stderr, result = (
            task.result() if task.done() and not task.cancelled() else _Captured(b"", 0) for task in readers
        )
        return _finish(
            job,
            returncode=process.returncode if process.returncode is not None else -signal.SIGKILL,
            timed_out=timed_out,
            stdout=stdout.text(),
            stderr=stderr.text(),
            result=result,
            elapsed_ms=elapsed_ms,
        )
    finally:
        if job.cgroup is None and job.root is None:
            # Only this process's pipe ends to close (a jailed run without a cgroup, the
            # zygote's usual): a few close() calls, less than a worker-thread hop costs.
            job.cleanup()
        else:  # removing a cgroup or a directory tree touches the file system: off the loop
            await asyncio.shield(asyncio.to_thread(job.cleanup))


# -- a run served by the zygote (``_zygote.py``) -----------------------------------------------------

_CREDENTIALS = struct.Struct("iII")  # struct ucred: pid, uid, gid
_fallbacks: collections.deque[str] = collections.deque(maxlen=8)
_fallback_count = [0]


def _log_fallback(exc: Exception) -> None:
    """Remember why the zygote could not take a run (the last few), for tests and diagnostics."""
    _fallbacks.append(str(exc))
    _fallback_count[0] += 1


def _wake(ready: asyncio.Future[None]) -> None:
    if not ready.done():
        ready.set_result(None)


async def _recv(channel: socket.socket, timeout: float) -> tuple[bytes, int | None]:  # noqa: ASYNC109
    """One message from a run's channel on the loop, and the sender's pid (``SCM_CREDENTIALS``,
    which the kernel translates into this process's PID namespace); ``b""`` at its end.

    Waits by a reader callback and a timer of the loop, not by a task (``asyncio.wait_for``).

    Raises:
        TimeoutError: No message within ``timeout`` seconds (none is looked for at 0 or less).
    """
    loop = asyncio.get_running_loop()
    if timeout <= 0:
        raise TimeoutError
    deadline = loop.time() + timeout
    while True:
        try:
            data, ancillary, _, _ = channel.recvmsg(4096, socket.CMSG_SPACE(_CREDENTIALS.size))
        except BlockingIOError:
            if loop.time() >= deadline:
                raise TimeoutError from None
            ready: asyncio.Future[None] = loop.create_future()
            loop.add_reader(channel.fileno(), _wake, ready)
            timer = loop.call_at(deadline, _wake, ready)
            try:
                await ready
            finally:
                timer.cancel()
                loop.remove_reader(channel.fileno())
            continue
        except OSError:
            return b"", None
        pid = None
        for level, kind, value in ancillary:
            if (
                level == socket.SOL_SOCKET
                and kind == socket.SCM_CREDENTIALS
                and len(value) >= _CREDENTIALS.size
            ):
                pid = _CREDENTIALS.unpack_from(value)[0]
        return data, pid


class _PipeEnd:
    """One pipe end of a zygote run, served by a callback of the loop (no task, transport or
    stream per pipe): a read end read to its end, keeping the first ``limit`` bytes and counting
    the rest (so the writer never blocks), or a write end fed a payload and then closed.

    ``done`` is resolved at the read end's end of file (or once the payload is written, or the
    reader is gone); :meth:`close` stops early and closes the descriptor (idempotent).
    """

    def __init__(self, fd: int, *, limit: int = 0, payload: bytes | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        self._fd = fd
        self._limit = limit
        self._chunks: list[bytes] = []
        self._kept = self._dropped = 0
        self._payload = memoryview(payload) if payload is not None else None
        self.done: asyncio.Future[None] = self._loop.create_future()
        os.set_blocking(fd, False)
        if self._payload is None:
            self._loop.add_reader(fd, self._readable)
        else:
            self._writable()
            if self._fd >= 0:
                self._loop.add_writer(fd, self._writable)

    def _readable(self) -> None:
        try:
            chunk = os.read(self._fd, _READ_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            chunk = b""
        if not chunk:
            self.close(finished=True)
            return
        room = self._limit - self._kept
        if room > 0:
            self._chunks.append(chunk[:room])
            self._kept += min(room, len(chunk))
        self._dropped += max(0, len(chunk) - max(room, 0))

    def _writable(self) -> None:
        assert self._payload is not None
        try:
            while self._payload:
                self._payload = self._payload[os.write(self._fd, self._payload) :]
        except (BlockingIOError, InterruptedError):
            return
        except OSError:  # the reader is gone (the run ended)
            pass
        self.close(finished=True)

    def close(self, *, finished: bool = False) -> None:
        """Stop serving the pipe and close this process's end (``finished``: at its end)."""
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            if self._payload is None:
                self._loop.remove_reader(fd)
            else:
                self._loop.remove_writer(fd)
            with contextlib.suppress(OSError):
                os.close(fd)
        if finished and not self.done.done():
            self.done.set_result(None)

    def captured(self) -> _Captured:
        """What was read, if the pipe reached its end (else nothing, as for a reader cut short)."""
        if not self.done.done():
            return _Captured(b"", 0)
        return _Captured(b"".join(self._chunks), self._dropped)


def _close_run(run: Submitted) -> None:
    """Close this process's ends of a run that never started (its pipes and channel)."""
    run.channel.close()
    for fd in (run.stdin, run.stdout, run.stderr):
        with contextlib.suppress(OSError):
            os.close(fd)


def _kill_pidfd(pidfd: int | None) -> None:
    """SIGKILL the run (PID 1 of its namespace: everything it started dies with it)."""
    if pidfd is not None:
        with contextlib.suppress(OSError):
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)


async def _run_in_zygote(job: _Job, how: _ZygoteJob) -> VerifierOutcome:
    """Run ``job`` in a fork of the zygote; the outcomes are the fresh run's.

    Raises:
        ZygoteUnavailable: The zygote could not take or set up the run (nothing of it ran).
    """
    start = time.perf_counter()
    deadline = asyncio.get_running_loop().time() + job.timeout
    assert job.result_fd is not None and job.child_fds
    hand_over = functools.partial(
        submit,
        how.status,
        code_dir=how.code_dir,
        runtime_dir=how.runtime_dir,
        roots=how.roots,
        databases=how.databases,
        scratch_bytes=how.scratch_bytes,
        result_write=job.child_fds[0],
    )
    try:
        run = hand_over(may_start=False)  # one small sendmsg to a live zygote: no thread hop
    except ZygoteUnavailable:  # none is up, or its queue is full: wait for it off the loop
        run = await asyncio.to_thread(hand_over)
    run.channel.setblocking(False)
    # Nothing of the run is read, and the job keeps its descriptors, until the run says it is
    # ready (``P``): until then a zygote that cannot set it up hands the job back untouched.
    timed_out = False
    try:
        try:
            message, pid = await _recv(run.channel, job.timeout)
        except TimeoutError:
            message, pid, timed_out = b"", None, True
    except BaseException:
        _close_run(run)
        raise
    if message[:1] != b"P" or pid is None:
        _close_run(run)  # the run, if any, reads the end of its channel and exits
        if timed_out:
            return _finish(
                job,
                returncode=128 + signal.SIGKILL,
                timed_out=True,
                stdout="",
                stderr="",
                result=_Captured(b"", 0),
                elapsed_ms=(time.perf_counter() - start) * 1000.0,
            )
        reason = message[1:].decode("utf-8", "replace")
        if message[:1] == b"S":
            reason = f"the run ended with status {reason} before it started"
        # The zygote gone (end of file) is started again; a run it could not set up means it
        # cannot here, and the process goes on with fresh runs.
        forget_broken(reason, disable=bool(message))
        raise ZygoteUnavailable(reason or "the zygote ended before the run started")
    job.close_child_fds()
    result_fd, job.result_fd = job.result_fd, None
    # Each pipe is served by a callback of the loop: no task, transport or stream reader each.
    pipes: list[_PipeEnd] = []
    pidfd: int | None = None
    stdin: int | None = run.stdin
    returncode: int | None = None
    try:
        for fd, limit in (
            (run.stdout, OUTPUT_LIMIT_BYTES),
            (run.stderr, OUTPUT_LIMIT_BYTES),
            (result_fd, _RESULT_LIMIT_BYTES),
        ):
            pipes.append(_PipeEnd(fd, limit=limit))
        # The run is at its gate: its pid is pinned (a pidfd), it is confined, then let go.
        pidfd = os.pidfd_open(pid)
        _confine(job, pid)
        await asyncio.get_running_loop().sock_sendall(run.channel, b"G")
        assert stdin is not None
        fed: int = stdin
        stdin = None  # the feeder closes it
        pipes.append(_PipeEnd(fed, payload=job.payload_for_zygote()))
        remaining = deadline - asyncio.get_running_loop().time()
        try:
            message, _ = await _recv(run.channel, remaining)
        except TimeoutError:
            timed_out = True
            _kill_pidfd(pidfd)
            try:
                message, _ = await _recv(run.channel, _DRAIN_GRACE)
            except TimeoutError:
                message = b""
        if message[:1] == b"S" and message[1:].isdigit():
            returncode = int(message[1:])
        _kill_pidfd(pidfd)  # after every run: whatever it left
    except BaseException:
        _kill_pidfd(pidfd)
        for fd in (run.stdout, run.stderr, result_fd)[len(pipes) :]:  # not served yet
            with contextlib.suppress(OSError):
                os.close(fd)
        for pipe in pipes:
            pipe.close()
        raise
    finally:
        if pidfd is not None:
            os.close(pidfd)
        if stdin is not None:
            os.close(stdin)
        run.channel.close()
    elapsed_ms = (time.perf_counter() - start) * 1000.0
    pending = [pipe.done for pipe in pipes if not pipe.done.done()]
    if pending:
        await asyncio.wait(pending, timeout=_DRAIN_GRACE)
    for pipe in pipes:
        pipe.close()
    stdout, stderr, result = (pipe.captured() for pipe in pipes[:3])
    if returncode is None and not timed_out:
        # The zygote (or the run's middle) died mid-run: the run was killed with it.
        record = result.data if result.data and not result.dropped else b""
        if not record:
            return VerifierOutcome(
                success=False,
                stdout=stdout.text(),
                error=VerifierError(
                    type="exception",
                    message="the verifier's runner (zygote) ended during the run, which was killed with it",
                    traceback=stderr.text()[-_STDERR_TAIL:] or None,
                ),
                execution_time_ms=elapsed_ms,
                sandbox=job.layers,
            )
    return _finish(
        job,
        returncode=returncode if returncode is not None else 128 + signal.SIGKILL,
        timed_out=timed_out,
        stdout=stdout.text(),
        stderr=stderr.text(),
        result=result,
        elapsed_ms=elapsed_ms,
    )


run_sandboxed_sync = sync_function(run_sandboxed)
"""Blocking twin of :func:`run_sandboxed`: the same run, limits and outcome."""
