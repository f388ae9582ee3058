"""What the sandbox child does, from reading its job on stdin to writing its result file.

Standard library only (see ``_child.py``). The protocol with the parent (``_sandbox.py``):

- stdin: one JSON object ``{code, final_answer, arguments, convention, function_name,
  databases, result_path, memory_mb, cpu_seconds, result_limit}`` (``arguments``: ``null``, or
  the hex of a plain-data pickle of ``(args, kwargs)``, see ``_plain_pickle.py``);
- stdout / stderr: whatever the verifier prints (the parent captures and caps them);
- ``result_path``: one JSON object ``{result, score, error, execution_time_ms}`` written at the
  end; no file means the child died (killed, or ``os._exit``).

Order matters: limits first, then the result file is opened, everything the runner needs is
imported, and only then is the audit hook installed and the verifier's code run.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import sqlite3
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from ._audit import SandboxPolicy, install_audit_hook
from ._entry import Execution, execute
from ._sqlite import SQLiteEnvironment

__all__ = ["main"]

_MIB = 1024 * 1024
_FILE_SIZE_LIMIT = 64 * _MIB


def _set_limit(which: int, soft: int, hard: int) -> None:
    _, current_hard = resource.getrlimit(which)
    if current_hard != resource.RLIM_INFINITY:
        soft, hard = min(soft, current_hard), min(hard, current_hard)
    resource.setrlimit(which, (soft, hard))


def _apply_limits(memory_mb: int, cpu_seconds: int) -> None:
    _set_limit(resource.RLIMIT_AS, memory_mb * _MIB, memory_mb * _MIB)
    # SIGXCPU at the soft limit, SIGKILL one second later at the hard one.
    _set_limit(resource.RLIMIT_CPU, cpu_seconds, cpu_seconds + 1)
    _set_limit(resource.RLIMIT_CORE, 0, 0)
    # Writing past the size limit fails with EFBIG (an OSError) instead of killing the child.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    _set_limit(resource.RLIMIT_FSIZE, _FILE_SIZE_LIMIT, _FILE_SIZE_LIMIT)


def _prepare_imports(code: str) -> None:
    """Import, before the hook, what the verifier may need that the hook would then refuse.

    asyncio imports subprocess, which imports ``_posixsubprocess`` (whose ``fork_exec`` raises
    no audit event, so the hook denies importing it). With asyncio loaded, the module is
    dropped again: ``subprocess.Popen`` still raises its own (denied) event first.
    """
    if "async" in code or "await" in code:
        import asyncio  # noqa: F401

        sys.modules.pop("_posixsubprocess", None)
        subprocess_module = sys.modules.get("subprocess")
        if subprocess_module is not None and hasattr(subprocess_module, "_posixsubprocess"):
            delattr(subprocess_module, "_posixsubprocess")


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


def _forget_sandbox_modules() -> None:
    """Drop this package's modules from ``sys.modules``, so the verifier cannot reach the hook's
    module globals by name (the runner keeps its own references)."""
    package = __name__.rpartition(".")[0]
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
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


def _record(execution: Execution, limit: int) -> dict[str, Any]:
    error = None
    if execution.error_type is not None:
        error = {
            "type": execution.error_type,
            "message": execution.error_message or "",
            "traceback": execution.traceback,
        }
    return {
        "result": _jsonable(execution.result, limit, execution.score),
        "score": execution.score,
        "error": error,
        "execution_time_ms": execution.execution_time_ms,
    }


def main() -> int:
    """Run the job read from stdin; the exit status is 0 whenever a result file was written."""
    payload = json.loads(sys.stdin.buffer.read())
    _apply_limits(int(payload["memory_mb"]), int(payload["cpu_seconds"]))
    stdout = sys.stdout
    if hasattr(stdout, "reconfigure"):
        stdout.reconfigure(encoding="utf-8", errors="backslashreplace", line_buffering=True)
    code: str = payload["code"]
    databases: dict[str, str] = payload["databases"]
    limit = int(payload["result_limit"])
    with open(payload["result_path"], "w", encoding="utf-8") as result_file:
        _prepare_imports(code)
        arguments = None
        if payload.get("arguments") is not None:  # pickle loads only for the runs that need it
            from ._plain_pickle import load_plain

            args, kwargs = load_plain(bytes.fromhex(payload["arguments"]))
            arguments = (args, kwargs)
        env = SQLiteEnvironment(databases, read_only=True)  # hardened connections: see _sqlite.py
        for name in databases:  # the hook denies sqlite3.connect: open them all now
            with contextlib.suppress(OSError, sqlite3.Error):  # env.db(name) will say why
                env.db(name).connect()
        unaudited: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext
        if payload.get("audit_hook", True):
            # No local keeps the policy: the hook's closure is its only holder.
            unaudited = install_audit_hook(
                SandboxPolicy(workdir=os.getcwd(), databases=databases.values(), read_roots=_read_roots())
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
