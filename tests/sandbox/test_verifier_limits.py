"""What the operating system bounds for one verifier run, attacked with the audit hook off.

The jail kept the host's files, environment and network out, but bounded little else: a
verifier held gigabytes in ``/tmp``, started 150 processes, wrote a gigabyte of scratch onto
the server's disk, wrote a 40 MB result past the 1 MiB cap straight into its result file, ran
``unshare -r`` for uid 0 in a nested user namespace, and read the host's paths in
``/proc/self/mountinfo``. Each test here replays one of those as a verifier that switched the
audit hook off (``_jail_runs``), so only the OS answers. Where a bound depends on this machine
(a writable cgroup, the server's uid), the test asserts what :meth:`JailStatus.summary` says
instead of skipping.
"""

from __future__ import annotations

import os
import platform
import sys
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from _jail_runs import probes, run_without_audit_hook
from _procs import processes

from fleet_local.sandbox import OUTPUT_LIMIT_BYTES, _jail, _sandbox, run_sandboxed_sync
from fleet_local.sandbox._cgroup import RunCgroup, find_cgroup_parent
from fleet_local.sandbox._seccomp import seccomp_program

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="the OS jail is Linux's"),
    pytest.mark.usefixtures("verifier_runner"),
]

STATUS = _jail.jail_status()


@pytest.fixture
def without_seccomp(monkeypatch: pytest.MonkeyPatch) -> None:
    """The jail as on an architecture without a seccomp table."""
    status = replace(STATUS, seccomp=False)
    monkeypatch.setattr(_sandbox, "jail_status", lambda: status)


def not_bounded(what: str) -> bool:
    """Whether the jail's summary lists ``what`` among what it does not bound here."""
    summary = STATUS.summary()
    return "Not bounded:" in summary and what in summary.split("Not bounded:", 1)[1]


def host_processes_with(token: str) -> list[int]:
    return [p.pid for p in processes() if p.alive and token.encode() in p.cmdline()]


def test_the_jail_is_available_here() -> None:
    """CI installs bubblewrap: every test below runs against the real jail."""
    assert STATUS.available, STATUS.reason


# ---------------------------------------------------------------- memory and disk


FILL = """
import errno, os

def fill(path):
    chunk = b"x" * (1024 * 1024)
    written = 0
    try:
        with open(path, "wb") as f:
            for _ in range(1024):  # a gigabyte, a MiB at a time
                f.write(chunk)
                f.flush()
                written += 1
    except OSError as exc:
        return [written, errno.errorcode[exc.errno]]
    return [written, None]

def verify(env):
    return {"score": 1, **{path: fill(path) for path in ("/tmp/fill", "fill", "/fill", "/dev/shm/fill")}}
"""


def test_a_gigabyte_into_tmp_or_scratch_stops_at_the_tmpfs_size(
    databases: dict[str, str], tmp_path: Path
) -> None:
    """``/tmp`` was an unsized tmpfs (two runs held 4 GiB of memory) and scratch sat on the data
    dir's disk (1 GiB in 5 s). Both are tmpfs mounts of ``scratch_mb`` now; the root and
    ``/dev`` are read-only, and nothing of the run is on the host's disk."""
    scratch_root = tmp_path / "scratch-root"
    scratch_root.mkdir()
    result = probes(run_without_audit_hook(FILL, databases, scratch_mb=16, scratch_root=scratch_root))
    assert result["/fill"] == [0, "EROFS"]
    assert result["/dev/shm/fill"] == [0, "EROFS"]
    if STATUS.sized_tmpfs:
        for path in ("/tmp/fill", "fill"):
            written, error = result[path]
            assert error == "ENOSPC" and written <= 16, (path, result[path])
    else:
        assert not_bounded("scratch and /tmp")
    assert list(scratch_root.iterdir()) == []


# ---------------------------------------------------------------- processes and threads


def test_a_verifier_cannot_start_processes(databases: dict[str, str]) -> None:
    """One verifier started 150 ``sleep`` processes. The seccomp filter refuses every new
    process (fork, vfork, posix_spawn, a clone that is not a thread)."""
    token = f"0.{uuid.uuid4().int % 10**12:012d}"
    code = (
        "import os, subprocess\n"
        "def verify(env):\n"
        "    started, errors = 0, set()\n"
        "    for _ in range(150):\n"
        "        try:\n"
        f"            subprocess.Popen(['/usr/bin/sleep', '300', {token!r}])\n"
        "            started += 1\n"
        "        except OSError as exc:\n"
        "            errors.add(type(exc).__name__)\n"
        "    for attempt in (os.fork, lambda: os.posix_spawn('/usr/bin/true', ['true'], {})):\n"
        "        try:\n"
        "            attempt()\n"
        "            started += 1\n"
        "        except OSError as exc:\n"
        "            errors.add(type(exc).__name__)\n"
        "    return {'score': 1, 'started': started, 'errors': sorted(errors)}\n"
    )
    result = probes(run_without_audit_hook(code, databases))
    if STATUS.seccomp:
        assert result == {"score": 1, "started": 0, "errors": ["PermissionError"]}
    else:
        assert not_bounded("new processes")
    assert host_processes_with(token) == []


def test_threads_are_bounded_where_the_os_can_bound_them(databases: dict[str, str]) -> None:
    """Threads are the one thing a run may still start. A cgroup's ``pids.max`` bounds them, or
    ``RLIMIT_NPROC`` (counted per user namespace, so per run) when the server is not root; as
    root without a writable cgroup nothing but the address space does, and the summary says so."""
    code = (
        "import threading\n"
        "def verify(env):\n"
        "    threading.stack_size(64 * 1024)  # so the address-space limit is not what stops them\n"
        "    stop, started = threading.Event(), []\n"
        "    try:\n"
        "        for _ in range(200):\n"
        "            thread = threading.Thread(target=stop.wait)\n"
        "            thread.start()\n"
        "            started.append(thread)\n"
        "    except RuntimeError:\n"
        "        pass\n"
        "    stop.set()\n"
        "    for thread in started:\n"
        "        thread.join()\n"
        "    return {'score': 1, 'started': len(started)}\n"
    )
    started = probes(run_without_audit_hook(code, databases))["started"]
    if STATUS.cgroup_parent is not None or os.geteuid() != 0:
        assert started < _jail.THREAD_LIMIT
    else:
        assert started == 200
        assert not_bounded("threads")


def test_a_run_cannot_raise_its_priority_leave_its_session_or_reach_a_terminal(
    databases: dict[str, str],
) -> None:
    """Verifier runs shared the server's CPU priority. With a cgroup a run's ``cpu.weight`` is
    below the server's; without one, the summary says the share is not bounded (a run is a
    session of its own, which the scheduler weighs as the server's equal). Either way it cannot
    raise its priority, start another session, or open a terminal."""
    code = (
        "import os\n"
        "def verify(env):\n"
        "    out = {'score': 1}\n"
        "    tty = lambda: open('/dev/tty', 'w')\n"
        "    for name, attempt in (('nice', lambda: os.nice(-5)), ('setsid', os.setsid), ('tty', tty)):\n"
        "        try:\n"
        "            attempt()\n"
        "            out[name + '_refused'] = False\n"
        "        except OSError:\n"
        "            out[name + '_refused'] = True\n"
        "    return out\n"
    )
    result = probes(run_without_audit_hook(code, databases))
    assert result["nice_refused"] is True and result["tty_refused"] is True
    assert result["setsid_refused"] is STATUS.seccomp
    if STATUS.cgroup_parent is None:
        assert not_bounded("CPU share")


# ---------------------------------------------------------------- the result


WRITE_AROUND = """
import json, os

def verify(env):
    blob = json.dumps({"result": "x" * (40 * 1024 * 1024), "score": 1.0, "error": None}).encode()
    for fd in range(3, 64):  # whatever of the runner's is open for writing: its result
        try:
            with os.fdopen(fd, "wb", closefd=False) as channel:
                channel.write(blob)
        except OSError:
            pass
    os._exit(0)  # before the runner writes a record of its own
"""


def test_a_result_written_around_the_runner_is_refused(databases: dict[str, str]) -> None:
    """A verifier found its result file through its descriptors and wrote a 40 MB result past
    the 1 MiB cap. The result now comes back on a pipe read with a cap, so a result too large is
    an error, and never parsed or kept (the hook is on: writing to a descriptor is no event)."""
    outcome = run_sandboxed_sync(WRITE_AROUND, databases=databases)
    assert outcome.success is False and outcome.score is None
    assert outcome.error is not None and outcome.error.type == "exception"
    assert "wrote a result larger than" in outcome.error.message
    assert outcome.result is None
    assert len(outcome.model_dump_json()) < 2 * OUTPUT_LIMIT_BYTES


# ---------------------------------------------------------------- namespaces, syscalls, /proc


@pytest.mark.parametrize("filter_on", [True, False], ids=["seccomp", "disable-userns alone"])
def test_nested_user_namespaces_are_refused(
    databases: dict[str, str], filter_on: bool, request: pytest.FixtureRequest
) -> None:
    """``unshare -r id`` gave uid 0 in a nested user namespace. The seccomp filter refuses
    ``unshare``; without it, bubblewrap's ``--disable-userns`` does."""
    if not filter_on:
        request.getfixturevalue("without_seccomp")
    code = "import os\ndef verify(env):\n    os.execv('/usr/bin/unshare', ['unshare', '-r', 'id'])\n"
    outcome = run_without_audit_hook(code, databases)
    assert "uid=0" not in outcome.stdout
    if filter_on and not STATUS.seccomp:  # the documented fallback; the other case tests the rest
        assert not_bounded("new processes")
        return
    if not filter_on and not STATUS.userns_disabled:
        assert "nested user namespaces (no --disable-userns here)" in STATUS.summary()
        return
    assert outcome.error is not None and outcome.error.traceback is not None
    expected = "Operation not permitted" if filter_on else "No space left on device"
    assert f"unshare failed: {expected}" in outcome.error.traceback


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the x32 ABI is x86_64's")
def test_raw_syscalls_are_filtered_and_another_abi_is_killed(databases: dict[str, str]) -> None:
    """The filter sees the syscall, not the Python function: ``ctypes`` (the hook is off) calling
    ``unshare`` and ``pidfd_open`` directly is refused, and the same call through the x32 ABI,
    which a filter checking only numbers would let through, kills the process."""
    code = (
        "import ctypes\n"
        "def verify(env):\n"
        "    libc = ctypes.CDLL(None, use_errno=True)\n"
        "    out = {}\n"
        "    for name, number, arg in (('unshare', 272, 0x10000000), ('pidfd_open', 434, 1)):\n"
        "        out[name] = [libc.syscall(number, arg, 0), ctypes.get_errno()]\n"
        "    print(out, flush=True)\n"
        "    libc.syscall(0x40000000 | 272, 0x10000000)\n"
        "    return {'score': 1, 'x32': 'survived'}\n"
    )
    outcome = run_without_audit_hook(code, databases)
    assert outcome.stdout.strip() == "{'unshare': [-1, 1], 'pidfd_open': [-1, 1]}"
    assert outcome.error is not None and "killed by SIGSYS" in outcome.error.message


def test_no_host_path_is_visible_in_the_jail(databases: dict[str, str]) -> None:
    """``/proc/self/mountinfo`` listed the host path of every bind mount (the data dir, the
    instance's databases) and ``/proc/1/cmdline`` bubblewrap's whole command line. The jail has
    no ``/proc`` now, and nothing else it shows names the host's directories."""
    code = (
        "import os, sys\n"
        "def verify(env):\n"
        "    out = {'score': 1}\n"
        "    for path in ('/proc/self/mountinfo', '/proc/1/cmdline', '/proc/self/environ'):\n"
        "        try:\n"
        "            out[path] = open(path, 'rb').read().decode('latin-1')\n"
        "        except OSError as exc:\n"
        "            out[path] = type(exc).__name__\n"
        "    out['seen'] = repr((os.listdir('/'), os.getcwd(), sys.argv, sys.path, dict(os.environ),\n"
        "                        env.db('seed').db_path, os.listdir('/databases'), os.listdir('/opt')))\n"
        "    return out\n"
    )
    result = probes(run_without_audit_hook(code, databases))
    for path in ("/proc/self/mountinfo", "/proc/1/cmdline", "/proc/self/environ"):
        assert result[path] == "FileNotFoundError", result[path]
    checkout = str(Path(_jail.__file__).resolve().parents[2])
    database_dir = str(Path(databases["seed"]).resolve().parent)
    assert checkout not in result["seen"] and database_dir not in result["seen"], result["seen"]


def test_the_filter_has_a_table_for_each_supported_architecture() -> None:
    for machine in ("x86_64", "aarch64"):
        program = seccomp_program(machine)
        assert program is not None and len(program) % 8 == 0
    assert seccomp_program("riscv64") is None


# ---------------------------------------------------------------- cgroups


@pytest.fixture
def fake_proc(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A ``/proc/self`` naming a cgroup v2 tree made of plain files: (proc dir, own cgroup)."""
    mount = tmp_path / "cgroup"
    own = mount / "server.scope"
    own.mkdir(parents=True)
    (own / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (own / "cgroup.subtree_control").write_text("\n")
    (own / "cgroup.procs").write_text(f"{os.getpid()}\n")
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "mountinfo").write_text(f"30 25 0:26 / {mount} rw - cgroup2 cgroup2 rw,nsdelegate\n")
    (proc / "cgroup").write_text("0::/server.scope\n")
    yield proc, own


def test_runs_get_a_cgroup_under_this_process_where_controllers_can_be_delegated(
    fake_proc: tuple[Path, Path],
) -> None:
    """The files a per-run cgroup is made of (the kernel's own could not be written here)."""
    proc, own = fake_proc
    parent, why = find_cgroup_parent(proc)
    assert (parent, why) == (own.resolve(), "")
    assert (own / "cgroup.subtree_control").read_text() == "+cpu +memory +pids"
    run = RunCgroup(own, memory_bytes=640 * 1024 * 1024, pids=64)
    limits = {name: (run.path / name).read_text() for name in ("memory.max", "pids.max", "cpu.weight")}
    assert limits == {"memory.max": str(640 * 1024 * 1024), "pids.max": "64", "cpu.weight": "25"}
    run.add(4242)
    assert (run.path / "cgroup.procs").read_text() == "4242"


def test_without_the_controllers_runs_get_no_cgroup_and_the_status_says_why(
    fake_proc: tuple[Path, Path],
) -> None:
    proc, own = fake_proc
    (own / "cgroup.controllers").write_text("cpu io\n")
    parent, why = find_cgroup_parent(proc)
    assert parent is None
    assert why == f"the cgroup v2 controllers memory, pids are not available in {own.resolve()}"
    if STATUS.cgroup_parent is None:  # this machine: the summary carries the reason
        assert STATUS.cgroup_reason and STATUS.cgroup_reason in STATUS.summary()
