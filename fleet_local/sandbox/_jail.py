"""The operating-system jail around a sandboxed verifier: bubblewrap (Linux namespaces).

The sandbox child runs inside ``bwrap`` with every namespace unshared: no network (an empty
network namespace), its own PID namespace (when the child ends, everything it started is
killed with it), its own user namespace with uid/gid 65534, no capabilities and no further
user namespaces (``--disable-userns``), and a filesystem view holding only what it needs,
read-only: ``/usr`` (shared libraries), the interpreter's own prefix with its
``site-packages`` hidden, the sandbox's stdlib-only modules, the databases it may read. The
writable places are its scratch directory and ``/tmp``, each a tmpfs of a fixed size.
``/etc``, ``/proc``, the home directory, the server's data directory and every other file of
the host are absent; the root and ``/dev`` are read-only. The environment is empty.
The seccomp filter of ``_seccomp.py`` refuses new processes, namespaces and mounts, among
others; where this process can make cgroups, each run also gets one (``_cgroup.py``).

:func:`jail_status` probes once per process whether the jail can start here and what it
bounds (:meth:`JailStatus.summary`); it says why not when it cannot (no ``bwrap`` on
``PATH``, namespaces refused by the kernel...).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import threading
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import fleet_sdk.verifiers

from ._cgroup import CPU_WEIGHT, find_cgroup_parent
from ._runner_choice import database_roots, disabled_reason, runner
from ._seccomp import seccomp_program

__all__ = [
    "INNER_CODE_DIR",
    "INNER_SCRATCH",
    "THREAD_LIMIT",
    "ZYGOTE_PROC",
    "ZYGOTE_ROOTS",
    "JailStatus",
    "inner_databases",
    "jail_argv",
    "jail_status",
    "seccomp_fd",
    "zygote_argv",
]

INNER_SCRATCH = "/scratch"
"""The verifier's scratch directory (its cwd) inside the jail: a tmpfs of ``scratch_mb``, as is
``/tmp``."""

INNER_CODE_DIR = "/opt/fleet-verifier"
"""Where the sandbox's own stdlib-only modules are mounted (read-only) inside the jail."""

INNER_RUNTIME_DIR = "/opt/fleet-verifier-runtime"
"""Where the verifier runtime's stdlib-only modules (``fleet_sdk/verifiers``) are mounted (read-only)."""

RUNTIME_DIR = Path(os.path.realpath(os.path.dirname(fleet_sdk.verifiers.__file__)))
"""The host directory of the verifier runtime, which the sandbox child imports besides its own."""

THREAD_LIMIT = 64
"""Processes and threads of one run together (``pids.max``, else ``RLIMIT_NPROC``)."""

_INNER_DATABASES = "/databases"
ZYGOTE_PROC = "/tmp/.fleet-zygote-proc"
"""Where the zygote sees ``/proc`` (below ``/tmp``, which each run covers with its own)."""
ZYGOTE_ROOTS = "/tmp/.fleet-zygote-roots"
"""Where the zygote sees the database roots (``<index>`` each), below ``/tmp`` as ``/proc``."""
_NOBODY = "65534"
_PROBE_TIMEOUT = 10.0
_MIB = 1024 * 1024


@dataclass(frozen=True)
class JailStatus:
    """Whether the OS jail can start on this machine, and what it bounds here.

    Attributes:
        available: ``bwrap`` is installed and could start a jailed interpreter.
        reason: Why it is not available (empty when it is).
        bwrap: The path of ``bwrap``, when found.
        sized_tmpfs: The scratch tmpfs has a size (``bwrap --size``, bubblewrap 0.8+).
        userns_disabled: Nested user namespaces are refused (``--disable-userns``, 0.8+).
        seccomp: The seccomp filter is loaded (x86_64 and aarch64).
        cgroup_parent: The cgroup each run gets its own cgroup in, or ``None``.
        cgroup_reason: Why runs get no cgroup (empty when they do).
    """

    available: bool
    reason: str = ""
    bwrap: str | None = None
    sized_tmpfs: bool = False
    userns_disabled: bool = False
    seccomp: bool = False
    cgroup_parent: str | None = None
    cgroup_reason: str = ""

    def summary(self) -> str:
        """One line: what the OS bounds for each run here, and what it does not (and why)."""
        if not self.available:
            return f"the verifier OS jail is unavailable: {self.reason}"
        bounded, unbounded = [], []
        if self.cgroup_parent is not None:
            bounded.append(
                "memory with tmpfs (a cgroup per run: memory.max = memory_mb + 2 x scratch_mb, no swap)"
            )
            bounded.append(f"processes and threads (pids.max {THREAD_LIMIT})")
            bounded.append(f"CPU share (cpu.weight {CPU_WEIGHT}) and CPU time (RLIMIT_CPU)")
        else:
            bounded.append("memory per process (RLIMIT_AS = memory_mb)")
            if os.geteuid() != 0:
                bounded.append(f"processes and threads (RLIMIT_NPROC {THREAD_LIMIT})")
            else:
                unbounded.append(
                    "threads, beyond what RLIMIT_AS leaves room for (RLIMIT_NPROC does not apply to "
                    "root's uid and there is no cgroup)"
                )
            bounded.append("CPU time (RLIMIT_CPU)")
            unbounded.append(
                "CPU share: a run is scheduled as its own session, the server's equal (no cgroup; "
                "at most verifier_concurrency runs at once)"
            )
        if self.seccomp:
            bounded.append("one process per run (seccomp)")
        else:
            unbounded.append("new processes (no seccomp filter for this architecture)")
        if self.sized_tmpfs:
            bounded.append("scratch and /tmp (a tmpfs of scratch_mb each)")
        else:
            unbounded.append("scratch and /tmp (this bubblewrap has no --size)")
        if not self.userns_disabled:  # bubblewrap before 0.8, or a kernel that refused it
            (bounded if self.seccomp else unbounded).append(
                "nested user namespaces (no --disable-userns here)"
            )
        text = "verifier jail (bubblewrap): bounded: " + "; ".join(bounded)
        if unbounded:
            text += ". Not bounded: " + "; ".join(unbounded)
        if self.cgroup_parent is None:
            text += f". No cgroup per run: {self.cgroup_reason}"
        return f"{text}. {self.runner_note()}"

    def runner_note(self) -> str:
        """How jailed runs start here: forked from the zygote, or a fresh interpreter each."""
        zygote = runner() == "zygote" and self.sized_tmpfs and self.userns_disabled and self.seccomp
        if zygote and database_roots():
            return (
                "Runner: zygote (each run forked from one pre-started jailed interpreter, in its own "
                "user, PID, mount, network, IPC and UTS namespaces, with the same limits)"
            )
        why = disabled_reason()
        if why is not None:
            return f"Runner: fresh (a new jailed interpreter per run; the zygote could not run here: {why})"
        if zygote:
            return "Runner: fresh (a new jailed interpreter per run; no database root is set for the zygote)"
        if runner() == "zygote":
            return "Runner: fresh (a new jailed interpreter per run; the zygote needs every part of the jail)"
        return "Runner: fresh (a new jailed interpreter per run)"


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
    sites = {os.path.realpath(sysconfig.get_paths(vars=base)[key]) for key in ("purelib", "platlib")}
    for site in sorted(sites):
        if os.path.isdir(site):
            args += ["--tmpfs", site]
    return args


def seccomp_fd() -> int:
    """A pipe's read end holding the seccomp filter, for ``--seccomp`` (the caller closes it).

    The filter is a few hundred bytes, far below a pipe's buffer, so it is written at once.
    """
    program = seccomp_program()
    assert program is not None, "no seccomp filter for this architecture"
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, program)
    finally:
        os.close(write_end)
    return read_end


def inner_databases(databases: Mapping[str, str]) -> dict[str, str]:
    """Each database's path inside the jail (by its position), as :func:`jail_argv` binds it.

    Args:
        databases: Name to host path, in the order of their inner names.
    """
    return {name: f"{_INNER_DATABASES}/{index}.sqlite" for index, name in enumerate(databases)}


def jail_argv(
    command: list[str],
    *,
    status: JailStatus,
    code_dir: Path,
    databases: Mapping[str, str],
    scratch_mb: int,
    seccomp: int | None,
    runtime_dir: Path = RUNTIME_DIR,
) -> tuple[list[str], dict[str, str]]:
    """The ``bwrap`` command line running ``command`` in the jail, and the databases' inner paths.

    Args:
        command: The command to run inside (its paths must be inner paths).
        status: What this machine's bubblewrap supports (:func:`jail_status`).
        code_dir: The host directory of the sandbox's modules (mounted at :data:`INNER_CODE_DIR`).
        databases: Name to resolved host path; each is mounted read-only.
        scratch_mb: The size of the scratch tmpfs, and of ``/tmp``'s, in MiB.
        seccomp: The file descriptor of the filter (:func:`seccomp_fd`), inherited by
            bubblewrap; ``None`` without a filter.
        runtime_dir: The host directory of the verifier runtime's modules (mounted at
            :data:`INNER_RUNTIME_DIR`): :data:`RUNTIME_DIR`, or its compiled copy (``_bytecode.py``).
    """
    assert status.bwrap is not None
    args = [status.bwrap, "--unshare-all", "--unshare-user"]
    if status.userns_disabled:
        args.append("--disable-userns")
    # No --new-session: the run's session is its own already (made by its parent: no
    # controlling terminal), and seccomp refuses setsid and the TIOCSTI/TIOCLINUX ioctls.
    args += ["--die-with-parent", "--cap-drop", "ALL", "--uid", _NOBODY, "--gid", _NOBODY]
    args += ["--hostname", "verifier", "--clearenv", *_runtime_binds(), "--dev", "/dev"]
    # No /proc: its mountinfo would show the host paths of every bind mount below.
    for tmpfs in (INNER_SCRATCH, "/tmp"):
        if status.sized_tmpfs:
            args += ["--size", str(scratch_mb * _MIB)]
        args += ["--tmpfs", tmpfs]
    args += ["--ro-bind", str(code_dir), INNER_CODE_DIR, "--ro-bind", str(runtime_dir), INNER_RUNTIME_DIR]
    inner = inner_databases(databases)
    for name, host_path in databases.items():
        if os.path.exists(host_path):
            args += ["--ro-bind", host_path, inner[name]]
    # The root and /dev are tmpfs mounts bubblewrap made: read-only, they hold nothing more.
    args += ["--remount-ro", "/dev", "--remount-ro", "/"]
    if seccomp is not None:
        args += ["--seccomp", str(seccomp)]
    args += ["--chdir", INNER_SCRATCH, "--", *command]
    return args, inner


def zygote_argv(
    command: list[str],
    *,
    status: JailStatus,
    code_dir: Path,
    runtime_dir: Path,
    roots: tuple[str, ...],
) -> list[str]:
    """The ``bwrap`` command line of the verifier zygote (``_zygote.py``): the jail's view, plus
    ``/proc`` and the database ``roots`` read-only, without ``--disable-userns`` or the filter.

    Each run's middle process makes the run's own user namespace, limits it as
    ``--disable-userns`` does, mounts its tmpfs and databases and hides ``/proc`` and the roots;
    the run loads the filter (``_zygote_child.py``).

    Args:
        command: The script and its arguments (inner paths), run by the interpreter.
        status: What this machine's bubblewrap supports (:func:`jail_status`).
        code_dir: The host directory of the sandbox's modules.
        runtime_dir: The host directory of the verifier runtime's modules.
        roots: The directories under which the runs' databases lie.
    """
    assert status.bwrap is not None
    args = [status.bwrap, "--unshare-all", "--unshare-user", "--die-with-parent", "--cap-drop", "ALL"]
    args += ["--uid", _NOBODY, "--gid", _NOBODY, "--hostname", "verifier", "--clearenv", *_runtime_binds()]
    args += ["--dev", "/dev", "--dir", _INNER_DATABASES]
    for tmpfs in (INNER_SCRATCH, "/tmp"):  # mount points: each run mounts its own sized ones
        args += ["--size", str(_MIB), "--tmpfs", tmpfs]
    # /proc and the roots lie below /tmp, so the run's own /tmp covers them: it sees neither,
    # as a fresh run (no empty directory left where they were).
    args += ["--proc", ZYGOTE_PROC]
    for index, root in enumerate(roots):
        args += ["--ro-bind", root, f"{ZYGOTE_ROOTS}/{index}"]
    args += ["--ro-bind", str(code_dir), INNER_CODE_DIR, "--ro-bind", str(runtime_dir), INNER_RUNTIME_DIR]
    args += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", "/", "--"]
    return [*args, _interpreter(), "-I", "-S", *command]


_cache: dict[str, JailStatus] = {}
_cache_lock = threading.Lock()


def _start_once(status: JailStatus) -> str | None:
    """Start a jailed interpreter with ``status``'s options; why it failed, or ``None``."""
    code_dir = Path(os.path.realpath(os.path.dirname(__file__)))
    seccomp = seccomp_fd() if status.seccomp else None
    try:
        argv, _ = jail_argv(
            [_interpreter(), "-I", "-S", "-c", "import os; print(os.getuid())"],
            status=status,
            code_dir=code_dir,
            databases={},
            scratch_mb=1,
            seccomp=seccomp,
        )
        done = subprocess.run(
            argv,
            capture_output=True,
            env={},
            timeout=_PROBE_TIMEOUT,
            check=False,
            pass_fds=() if seccomp is None else (seccomp,),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap could not start: {exc}"
    finally:
        if seccomp is not None:
            os.close(seccomp)
    if done.returncode != 0 or done.stdout.strip() != _NOBODY.encode():
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return f"bwrap failed: {message[-1] if message else done.returncode}"
    return None


def _probe() -> JailStatus:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return JailStatus(False, "bubblewrap (bwrap) is not installed (Debian: apt-get install bubblewrap)")
    try:
        usage = subprocess.run(
            [bwrap, "--help"], capture_output=True, env={}, timeout=_PROBE_TIMEOUT, check=False
        ).stdout.decode("utf-8", "replace")
    except (OSError, subprocess.TimeoutExpired) as exc:
        return JailStatus(False, f"bwrap could not start: {exc}", bwrap)
    status = JailStatus(
        True,
        bwrap=bwrap,
        sized_tmpfs="--size" in usage,
        userns_disabled="--disable-userns" in usage,
        seccomp="--seccomp" in usage and seccomp_program() is not None,
    )
    failure = _start_once(status)
    if failure is not None:
        # A kernel may refuse what this bubblewrap offers (a nested user namespace, seccomp):
        # the jail without those is still the jail, and the summary says what is missing.
        plain = replace(status, userns_disabled=False, seccomp=False)
        if plain == status or _start_once(plain) is not None:
            return JailStatus(False, failure, bwrap)
        status = plain
    parent, why = find_cgroup_parent()
    return replace(status, cgroup_parent=None if parent is None else str(parent), cgroup_reason=why)


def jail_status() -> JailStatus:
    """Whether the OS jail can start here and what it bounds (probed once per process, then cached).

    The first call may also prepare this process's cgroup for per-run cgroups (``_cgroup.py``).
    """
    with _cache_lock:
        status = _cache.get("status")
        if status is None:
            status = _probe() if sys.platform.startswith("linux") else JailStatus(False, "not Linux")
            _cache["status"] = status
        return status
