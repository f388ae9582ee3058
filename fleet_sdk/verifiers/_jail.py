"""The operating-system jail around a sandboxed verifier: bubblewrap (Linux namespaces).

The sandbox child runs inside ``bwrap`` with every namespace unshared: no network (an empty
network namespace), its own PID namespace (when the child ends, everything it started is
killed with it), its own user namespace with uid/gid 65534 and no capabilities, a fresh
session, and a filesystem view holding only what it needs, read-only: ``/usr`` (shared
libraries), the interpreter's own prefix with its ``site-packages`` hidden, the sandbox's
stdlib-only modules, the databases it may read; plus its scratch directory and result
directory (writable). ``/etc``, the home directory, the server's data directory and every
other file of the host are absent. The environment is empty.

:func:`jail_status` probes once per process whether the jail can start here; the result says
why not when it cannot (no ``bwrap`` on ``PATH``, namespaces refused by the kernel...).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["INNER_CODE_DIR", "INNER_OUT_DIR", "INNER_SCRATCH", "JailStatus", "jail_argv", "jail_status"]

INNER_SCRATCH = "/scratch"
"""The verifier's scratch directory (its cwd) inside the jail."""

INNER_OUT_DIR = "/out"
"""Where the child writes its result file inside the jail."""

INNER_CODE_DIR = "/opt/fleet-verifier"
"""Where the sandbox's own stdlib-only modules are mounted (read-only) inside the jail."""

_INNER_DATABASES = "/databases"
_NOBODY = "65534"
_PROBE_TIMEOUT = 10.0


@dataclass(frozen=True)
class JailStatus:
    """Whether the OS jail can start on this machine.

    Attributes:
        available: ``bwrap`` is installed and could start a jailed interpreter.
        reason: Why it is not available (empty when it is).
        bwrap: The path of ``bwrap``, when found.
    """

    available: bool
    reason: str = ""
    bwrap: str | None = None


def _interpreter() -> str:
    """The real interpreter binary (a venv's ``python`` is a symlink to it)."""
    return os.path.realpath(sys.executable)


def _runtime_binds() -> list[str]:
    """bwrap arguments mounting the Python runtime read-only, at the same paths as the host."""
    args: list[str] = ["--ro-bind", "/usr", "/usr"]
    # Merged-/usr systems have /lib -> usr/lib and friends; others have real directories.
    for top in ("/bin", "/lib", "/lib32", "/lib64", "/libx32", "/sbin"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    prefixes = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.base_exec_prefix)}
    interpreter_dir = os.path.dirname(_interpreter())
    for prefix in sorted(prefixes):
        if prefix != "/usr" and not prefix.startswith("/usr/"):
            args += ["--ro-bind", prefix, prefix]
    if not any(interpreter_dir.startswith(p.rstrip("/") + "/") for p in (*prefixes, "/usr")):
        args += ["--ro-bind", interpreter_dir, interpreter_dir]
    # Installed packages are not the verifier's business (it runs with -I -S anyway).
    base = {"base": sys.base_prefix, "platbase": sys.base_exec_prefix}
    for key in ("purelib", "platlib"):
        site = os.path.realpath(sysconfig.get_paths(vars=base)[key])
        if os.path.isdir(site):
            args += ["--tmpfs", site]
    return args


def jail_argv(
    command: list[str],
    *,
    code_dir: Path,
    scratch: Path,
    out_dir: Path,
    databases: Mapping[str, str],
    bwrap: str,
) -> tuple[list[str], dict[str, str]]:
    """The ``bwrap`` command line running ``command`` in the jail, and the databases' inner paths.

    Args:
        command: The command to run inside (its paths must be inner paths).
        code_dir: The host directory of the sandbox's modules (mounted at :data:`INNER_CODE_DIR`).
        scratch: The host scratch directory (mounted writable at :data:`INNER_SCRATCH`).
        out_dir: The host result directory (mounted writable at :data:`INNER_OUT_DIR`).
        databases: Name to resolved host path; each is mounted read-only.
        bwrap: The ``bwrap`` executable.
    """
    args = [
        bwrap,
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--uid",
        _NOBODY,
        "--gid",
        _NOBODY,
        "--hostname",
        "verifier",
        "--clearenv",
        *_runtime_binds(),
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--tmpfs",
        "/tmp",
        "--ro-bind",
        str(code_dir),
        INNER_CODE_DIR,
        "--bind",
        str(scratch),
        INNER_SCRATCH,
        "--bind",
        str(out_dir),
        INNER_OUT_DIR,
    ]
    inner: dict[str, str] = {}
    for index, (name, host_path) in enumerate(databases.items()):
        inner_path = f"{_INNER_DATABASES}/{index}.sqlite"
        inner[name] = inner_path
        if os.path.exists(host_path):
            args += ["--ro-bind", host_path, inner_path]
    args += ["--chdir", INNER_SCRATCH, "--", *command]
    return args, inner


_cache: dict[str, JailStatus] = {}
_cache_lock = threading.Lock()


def _probe() -> JailStatus:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return JailStatus(False, "bubblewrap (bwrap) is not installed (Debian: apt-get install bubblewrap)")
    code_dir = Path(os.path.realpath(os.path.dirname(__file__)))
    with tempfile.TemporaryDirectory(prefix="fleet-jail-probe-") as scratch:
        argv, _ = jail_argv(
            [_interpreter(), "-I", "-S", "-c", "import os; print(os.getuid())"],
            code_dir=code_dir,
            scratch=Path(scratch),
            out_dir=Path(scratch),
            databases={},
            bwrap=bwrap,
        )
        try:
            done = subprocess.run(argv, capture_output=True, env={}, timeout=_PROBE_TIMEOUT, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return JailStatus(False, f"bwrap could not start: {exc}", bwrap)
    if done.returncode != 0 or done.stdout.strip() != _NOBODY.encode():
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return JailStatus(False, f"bwrap failed: {message[-1] if message else done.returncode}", bwrap)
    return JailStatus(True, "", bwrap)


def jail_status() -> JailStatus:
    """Whether the OS jail can start here (probed once per process, then cached)."""
    with _cache_lock:
        status = _cache.get("status")
        if status is None:
            status = _probe() if sys.platform.startswith("linux") else JailStatus(False, "not Linux")
            _cache["status"] = status
        return status
