"""What the sandbox child does, from reading its job on stdin to writing its result file.

Standard library only (see ``_child.py``). The protocol with the parent (``_sandbox.py``):

- stdin: one JSON object ``{code, final_answer, arguments, pickled_args, convention,
  function_name, databases, result_fd, jailed, memory_mb, cpu_seconds, result_limit}``
  (``arguments``: ``null``, or the hex of a plain-data pickle of ``(args, kwargs)``, see
  ``_plain_pickle.py``; ``pickled_args``: ``null``, or the public SDK's pickle, undecoded, see
  ``_pickled_args.py``);
- stdout / stderr: whatever the verifier prints (the parent captures and caps them);
- ``result_fd``: an inherited pipe, on which one JSON object ``{result, score, error,
  execution_time_ms}`` is written at the end, or ``{arguments_error}`` when the arguments could
  not be decoded (nothing ran); nothing on it means the child died (killed, or ``os._exit``).
  The verifier can reach the pipe as well: the parent caps what it reads.

Order matters: limits first, then the result pipe is opened, everything the runner needs is
imported, the process functions no audit event covers are removed, and only then is the audit
hook installed and the verifier's code run.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # signal's C half: no stub
import contextlib
import json
import os
import resource
import sqlite3
import sys
from collections.abc import Callable
from typing import Any

from fleet_sdk.verifiers._entry import Execution, _direct, execute
from fleet_sdk.verifiers._sqlite import SQLiteEnvironment

from ._audit import SandboxPolicy, install_audit_hook

__all__ = ["main"]

_MIB = 1024 * 1024
_FILE_SIZE_LIMIT = 64 * _MIB
_OPEN_FILES = 256
_THREADS = 64  # _jail.THREAD_LIMIT (this module cannot import it: stdlib only)
# An error's message and traceback are capped too, so the whole record stays within what the
# parent reads (``_sandbox._RESULT_LIMIT_BYTES``).
_TEXT_LIMIT = 64 * 1024
# Functions that reach other processes without raising an audit event (so the hook cannot
# refuse them): removed from their modules before the verifier runs, and the modules cannot be
# imported afresh once the hook is on (``_audit._DENIED_IMPORTS``).
_UNAUDITED = {
    "posix": ("pidfd_open", "setpriority", "sched_setaffinity", "sched_setparam", "sched_setscheduler"),
    "os": ("pidfd_open", "setpriority", "sched_setaffinity", "sched_setparam", "sched_setscheduler"),
    "_signal": ("pidfd_send_signal",),
    "signal": ("pidfd_send_signal",),
    "subprocess": ("_fork_exec", "_posixsubprocess"),
}


def _set_limit(which: int, soft: int, hard: int) -> None:
    _, current_hard = resource.getrlimit(which)
    if current_hard != resource.RLIM_INFINITY:
        soft, hard = min(soft, current_hard), min(hard, current_hard)
    resource.setrlimit(which, (soft, hard))


def _apply_limits(memory_mb: int, cpu_seconds: int, jailed: bool) -> None:
    _set_limit(resource.RLIMIT_AS, memory_mb * _MIB, memory_mb * _MIB)
    _set_limit(resource.RLIMIT_NOFILE, _OPEN_FILES, _OPEN_FILES)  # pipes and sockets hold memory too
    if jailed:
        # Counted per user namespace, so per run (but never for root's uid: see _jail.py). Not
        # unjailed: there it would count every process of this user.
        _set_limit(resource.RLIMIT_NPROC, _THREADS, _THREADS)
    # SIGXCPU at the soft limit, SIGKILL one second later at the hard one.
    _set_limit(resource.RLIMIT_CPU, cpu_seconds, cpu_seconds + 1)
    _set_limit(resource.RLIMIT_CORE, 0, 0)
    # Writing past the size limit fails with EFBIG (an OSError) instead of killing the child.
    # ``_signal``, not ``signal``: the same call without importing ``signal`` (and its enums) on
    # every run; a verifier that imports ``signal`` gets it as before.
    _signal.signal(_signal.SIGXFSZ, _signal.SIG_IGN)
    _set_limit(resource.RLIMIT_FSIZE, _FILE_SIZE_LIMIT, _FILE_SIZE_LIMIT)


def _prepare_imports(code: str) -> None:
    """Import, before the hook, what the verifier may need that the hook would then refuse.

    asyncio imports subprocess, which imports ``_posixsubprocess`` (whose ``fork_exec`` raises
    no audit event, so the hook denies importing it). With asyncio loaded, the module and
    subprocess's references to it are dropped again (:func:`_remove_unaudited`):
    ``subprocess.Popen`` still raises its own (denied) event first.

    asyncio costs about as much CPU as the rest of a run, so only code that says ``async``
    gets it: ``async def``, ``async for``/``with``, ``import asyncio``, ``_asyncio``. ``await``
    is a syntax error outside an ``async def``, so it needs no test of its own (a verifier's
    "awaiting approval" loaded asyncio for nothing).
    """
    if "async" in code:
        import asyncio  # noqa: F401


def _remove_unaudited() -> None:
    """Remove what reaches other processes without an audit event (``_UNAUDITED``)."""
    sys.modules.pop("_posixsubprocess", None)
    for module_name, names in _UNAUDITED.items():
        module = sys.modules.get(module_name)
        for name in names:
            if module is not None and hasattr(module, name):
                delattr(module, name)


def _read_roots() -> list[str]:
    """The interpreter's own ``sys.path`` (the stdlib, under ``-I -S``), minus our own code."""
    here = os.path.dirname(os.path.realpath(__file__))
    roots = []
    for entry in sys.path:
        if not entry:
            continue
        real = os.path.realpath(entry)
        if here == real or here.startswith(real.rstrip(os.sep) + os.sep):
            continue
        roots.append(real)
    return roots


def _sandbox_module_dicts() -> list[dict[str, Any]]:
    """The globals of this package's modules and of the verifier runtime beside them (``_entry``
    carries the runner's window): the hook protects their functions' defaults."""
    package = __name__.rpartition(".")[0]
    return [vars(m) for n, m in sys.modules.items() if n.partition(".")[0] in (package, "fleet_sdk")]


def _forget_sandbox_modules() -> None:
    """Drop this package's modules from ``sys.modules``, so the verifier cannot reach the hook's
    module globals by name (the runner keeps its own references)."""
    package = __name__.rpartition(".")[0]
    for name in [n for n in sys.modules if n.partition(".")[0] in (package, "fleet_sdk")]:
        del sys.modules[name]


def _jsonable(value: Any, limit: int, score: float | None) -> Any:
    """The result as JSON, or, when it is not JSON or too large, its (capped) repr.

    A too-large JSON result that scored becomes ``{"score": ..., "truncated": repr}``, so whoever
    reads only the result (the remote API's clients) still finds the score in it.
    """
    try:
        text = json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        text = None
    if text is not None and len(text) <= limit:
        return value
    keep_score = text is not None and score is not None
    room = limit // 2 if keep_score else limit
    shown = repr(value)
    shown = shown if len(shown) <= room else shown[: room - 3] + "..."
    return {"score": score, "truncated": shown} if keep_score else shown


def _capped(text: str | None) -> str | None:
    if text is None or len(text) <= _TEXT_LIMIT:
        return text
    return text[: _TEXT_LIMIT // 2] + "\n[...]\n" + text[-_TEXT_LIMIT // 2 :]


def _record(execution: Execution, limit: int) -> dict[str, Any]:
    error = None
    if execution.error_type is not None:
        error = {
            "type": execution.error_type,
            "message": _capped(execution.error_message or ""),
            "traceback": _capped(execution.traceback),
            "exception_type": execution.exception_type,
        }
    return {
        "result": _jsonable(execution.result, limit, execution.score),
        "score": execution.score,
        "error": error,
        "execution_time_ms": execution.execution_time_ms,
    }


def _read_arguments(payload: dict[str, Any]) -> tuple[list[Any], dict[str, Any]] | None:
    """The verifier's ``(args, kwargs)``, if the job has any, decoded here: under this run's
    limits, so a pickle that is costly to decode costs the run, not the server that received it.
    The pickle modules load only for the runs that need them."""
    if payload.get("pickled_args") is not None:
        from ._pickled_args import load_arguments

        return load_arguments(payload["pickled_args"])
    if payload.get("arguments") is not None:
        from ._plain_pickle import load_plain

        args, kwargs = load_plain(bytes.fromhex(payload["arguments"]))
        return args, kwargs
    return None


def main() -> int:
    """Run the job read from stdin; the exit status is 0 whenever a result file was written."""
    payload = json.loads(sys.stdin.buffer.read())
    _apply_limits(int(payload["memory_mb"]), int(payload["cpu_seconds"]), bool(payload.get("jailed")))
    stdout = sys.stdout
    if hasattr(stdout, "reconfigure"):
        stdout.reconfigure(encoding="utf-8", errors="backslashreplace", line_buffering=True)
    code: str = payload["code"]
    databases: dict[str, str] = payload["databases"]
    limit = int(payload["result_limit"])
    with os.fdopen(int(payload["result_fd"]), "w", encoding="utf-8") as result_file:
        _prepare_imports(code)
        try:
            arguments = _read_arguments(payload)
        except Exception as exc:  # the request's fault, not the verifier's: the parent refuses it
            result_file.write(json.dumps({"arguments_error": _capped(str(exc) or type(exc).__name__)}))
            return 0
        env = SQLiteEnvironment(databases, read_only=True)  # hardened connections: see _sqlite.py
        for name in databases:  # the hook denies sqlite3.connect: open them all now
            with contextlib.suppress(OSError, sqlite3.Error):  # env.db(name) will say why
                env.db(name).connect()
        unaudited: Callable[..., Any] = _direct
        _remove_unaudited()
        if payload.get("audit_hook", True):
            # No local keeps the policy: the hook's closure is its only holder.
            unaudited = install_audit_hook(
                SandboxPolicy(workdir=os.getcwd(), databases=databases.values(), read_roots=_read_roots()),
                protected=_sandbox_module_dicts(),
            )
        _forget_sandbox_modules()
        execution = execute(
            code,
            env,
            payload.get("final_answer"),
            arguments=arguments,
            convention=payload.get("convention", "env"),
            function_name=payload.get("function_name"),
            unaudited=unaudited,
        )
        with contextlib.suppress(Exception):  # the verifier may have broken its connections
            env.close()
        with contextlib.suppress(Exception):  # the verifier may have closed stdout
            sys.stdout.flush()
        result_file.write(json.dumps(_record(execution, limit)))
    return 0
