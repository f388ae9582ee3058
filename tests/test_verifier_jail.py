"""Attacks on the verifier sandbox, written as a hostile verifier would.

Two layers protect a run: the OS jail (bubblewrap namespaces) and the audit hook. The first
group of tests attacks the audit hook itself (frame walks, tracing, code swaps) and checks it
refuses. The second turns the audit hook off, as an attacker who had disabled it by any Python
means would have, and checks the OS jail alone still keeps the host's files, environment,
network, processes and the server's database out of reach.
"""

from __future__ import annotations

import socket
import sqlite3
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _procs import processes

from fleet_sdk.verifiers import (
    DENIED_PREFIX,
    JailUnavailableError,
    VerifierOutcome,
    _jail,
    _sandbox,
    run_sandboxed,
    run_sandboxed_async,
)


@pytest.fixture
def server_db(tmp_path: Path) -> Path:
    """A stand-in for the server's own ``fleet.db`` in its data dir, holding a secret."""
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    path = data_dir / "fleet.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE docs (id TEXT, body TEXT)")
        conn.execute("INSERT INTO docs VALUES ('key', 'server-secret')")
    conn.close()
    return path


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Secrets in the caller's environment, which the verifier must never see."""
    secret = f"secret-{uuid.uuid4().hex}"
    for name in ("FLEET_API_KEY", "FLEET_LOCAL_API_KEY", "AWS_SECRET_ACCESS_KEY", "OPENAI_API_KEY"):
        monkeypatch.setenv(name, secret)
    yield secret


def run_without_audit_hook(code: str, databases: dict[str, str], timeout: float = 20.0) -> VerifierOutcome:
    """Run with the OS jail only: as if the verifier had switched the audit hook off."""
    job = _sandbox._prepare(
        code,
        databases=databases,
        final_answer=None,
        function_name=None,
        timeout=timeout,
        memory_mb=512,
        allow_unjailed=False,
        audit_hook=False,
    )
    return _sandbox._run_job(job)


def probes(outcome: VerifierOutcome) -> dict[str, Any]:
    assert outcome.success, outcome.error
    assert isinstance(outcome.result, dict)
    return outcome.result


# ---------------------------------------------------------------- the audit hook holds


FRAME_WALK = """
import os, sys

def verify(env):
    frame = sys._getframe()
    while frame is not None:
        policy = frame.f_locals.get("policy")
        if policy is not None:
            policy.check = lambda event, args: None
        frame = frame.f_back
    os.system("touch pwned")
    return 1
"""


def test_the_frame_walk_of_the_report_is_refused(databases: dict[str, str]) -> None:
    outcome = run_sandboxed(FRAME_WALK, databases=databases)
    assert outcome.sandbox == "os_jail+audit_hook"
    assert outcome.error is not None and outcome.error.type == "exception"
    assert outcome.error.message.startswith(f"PermissionError: {DENIED_PREFIX}: sys._getframe")


@pytest.mark.parametrize(
    ("attack", "denied"),
    [
        ("try:\n        1 / 0\n    except ZeroDivisionError as e:\n        e.__traceback__.tb_frame", "tb_"),
        ("def g():\n        yield 1\n    g().gi_frame", "gi_frame"),
        ("async def c():\n        pass\n    co = c()\n    co.close()\n    co.cr_frame", "cr_frame"),
        ("verify.__code__", "__code__"),
        ("import sys\n    sys.settrace(lambda *a: None)", "sys.settrace"),
        ("import sys\n    sys.setprofile(lambda *a: None)", "sys.setprofile"),
        ("import sys\n    sys._current_frames()", "sys._current_frames"),
        ("import inspect\n    inspect.currentframe()", "sys._getframe"),
        ("import traceback\n    traceback.extract_stack()", "sys._getframe"),
        ("import gc\n    gc.get_referrers(env)", "gc.get_referrers"),
        ("import gc\n    gc.get_objects()", "gc.get_objects"),
        ("breakpoint()", "builtins.breakpoint"),
        ("import ctypes", "import of"),
        ("import _testcapi", "import of"),
        ("(lambda: 0).__code__.replace(co_code=b'')", "__code__"),
        (
            "import types\n    types.CodeType(*[0] * 6, b'', *[()] * 3, *[''] * 3, 0, b'', b'')",
            "code.__new__",
        ),
    ],
)
def test_introspection_that_reaches_the_hook_is_refused(
    databases: dict[str, str], attack: str, denied: str
) -> None:
    code = f"def verify(env):\n    {attack}\n    return 1\n"
    outcome = run_sandboxed(code, databases=databases)
    assert outcome.error is not None, outcome.result
    assert f"{DENIED_PREFIX}: " in outcome.error.message
    assert denied in outcome.error.message


def test_the_hook_module_is_not_reachable_by_name(databases: dict[str, str]) -> None:
    code = (
        "import sys\n"
        "def verify(env):\n"
        "    return {'score': 1, 'ours': sorted(m for m in sys.modules if 'fleet' in m)}\n"
    )
    assert probes(run_sandboxed(code, databases=databases))["ours"] == []


def test_a_swapped_code_object_is_refused(databases: dict[str, str]) -> None:
    code = (
        "def helper():\n    return 0\n"
        "def verify(env):\n"
        "    helper.__code__ = (lambda: 1).__code__\n"
        "    return 1\n"
    )
    outcome = run_sandboxed(code, databases=databases)
    assert outcome.error is not None and DENIED_PREFIX in outcome.error.message


def test_the_stdlib_still_works_under_the_introspection_rules(databases: dict[str, str]) -> None:
    code = (
        "import collections, enum, typing, datetime, decimal\n"
        "def verify(env):\n"
        "    Point = collections.namedtuple('Point', 'x y')\n"
        "    Color = enum.Enum('Color', 'RED GREEN')\n"
        "    T = typing.TypeVar('T')\n"
        "    try:\n"
        "        int('x')\n"
        "    except ValueError:\n"
        "        pass\n"
        "    return {'score': 1, 'p': Point(1, 2).x, 'c': Color.RED.name}\n"
    )
    result = probes(run_sandboxed(code, databases=databases))
    assert result == {"score": 1, "p": 1, "c": "RED"}


def test_a_failing_verifier_still_gets_its_traceback(databases: dict[str, str]) -> None:
    outcome = run_sandboxed("def verify(env):\n    return 1 / 0\n", databases=databases)
    assert outcome.error is not None and outcome.error.traceback is not None
    assert 'File "<verifier>", line 2, in verify' in outcome.error.traceback


# ---------------------------------------------------------------- SQLite cannot reach server state


def test_the_connection_refuses_a_new_authorizer_and_attach(
    databases: dict[str, str], server_db: Path
) -> None:
    code = (
        "def verify(env):\n"
        "    conn = env.db('current').connect()\n"
        "    out = {'score': 1}\n"
        "    for name, attempt in [\n"
        "        ('authorizer', lambda: conn.set_authorizer(None)),\n"
        "        ('limit', lambda: conn.setlimit(7, 10)),\n"
        "        ('extension', lambda: conn.enable_load_extension(True)),\n"
        f"        ('attach', lambda: conn.execute(\"ATTACH DATABASE '{server_db}' AS s\")),\n"
        "        ('tokenizer', lambda: conn.execute(\"SELECT fts3_tokenizer('simple')\").fetchall()),\n"
        "        ('write', lambda: conn.execute('INSERT INTO users VALUES (3, 3)')),\n"
        "    ]:\n"
        "        try:\n"
        "            attempt()\n"
        "            out[name] = 'allowed'\n"
        "        except Exception as exc:\n"
        "            out[name] = type(exc).__name__ + ': ' + str(exc)\n"
        "    return out\n"
    )
    result = probes(run_sandboxed(code, databases=databases))
    assert result["authorizer"].startswith("PermissionError: ")
    assert result["limit"].startswith("PermissionError: ")
    assert result["extension"].startswith("PermissionError: ")
    assert result["attach"] == "DatabaseError: not authorized"
    assert result["tokenizer"] == "OperationalError: not authorized to use function: fts3_tokenizer"
    assert "readonly" in result["write"]


def test_attach_of_the_server_database_fails_even_with_the_authorizer_gone(
    databases: dict[str, str], server_db: Path
) -> None:
    code = (
        "import sqlite3\n"
        "def verify(env):\n"
        "    conn = env.db('current').connect()\n"
        "    sqlite3.Connection.set_authorizer(conn, None)\n"
        "    sqlite3.Connection.setlimit(conn, sqlite3.SQLITE_LIMIT_ATTACHED, 10)\n"
        "    try:\n"
        f"        conn.execute(\"ATTACH DATABASE 'file:{server_db}?mode=ro' AS s\")\n"
        "        return {'score': 1, 'read': conn.execute('SELECT body FROM s.docs').fetchall()}\n"
        "    except sqlite3.Error as exc:\n"
        "        return {'score': 1, 'error': str(exc)}\n"
    )
    for outcome in (run_sandboxed(code, databases=databases), run_without_audit_hook(code, databases)):
        result = probes(outcome)
        assert "read" not in result, result
        assert "unable to open database" in result["error"]
    with sqlite3.connect(server_db) as conn:
        assert conn.execute("SELECT count(*) FROM docs").fetchone() == (1,)
    conn.close()


# ---------------------------------------------------------------- the OS jail alone holds


def test_without_the_hook_the_host_files_are_absent(databases: dict[str, str], server_db: Path) -> None:
    code = (
        "import os\n"
        "def verify(env):\n"
        "    out = {'score': 1}\n"
        f"    for name, path in [('passwd', '/etc/passwd'), ('server_db', {str(server_db)!r}),\n"
        f"                       ('data_dir', {str(server_db.parent)!r}),\n"
        "                       ('home', os.path.expanduser('~/.bashrc'))]:\n"
        "        try:\n"
        "            with open(path, 'rb') as f:\n"
        "                out[name] = f.read(100).decode('latin-1')\n"
        "        except OSError as exc:\n"
        "            out[name] = type(exc).__name__\n"
        "    return out\n"
    )
    result = probes(run_without_audit_hook(code, databases))
    assert result["passwd"] == "FileNotFoundError"
    assert result["server_db"] == "FileNotFoundError"
    assert result["data_dir"] == "FileNotFoundError"
    assert result["home"] == "FileNotFoundError"


def test_without_the_hook_no_secret_is_in_the_environment_or_proc(
    databases: dict[str, str], secret_env: str
) -> None:
    code = (
        "import os\n"
        "def verify(env):\n"
        "    seen = [repr(dict(os.environ))]\n"
        "    for pid in os.listdir('/proc'):\n"
        "        if pid.isdigit():\n"
        "            try:\n"
        "                with open(f'/proc/{pid}/environ', 'rb') as f:\n"
        "                    seen.append(f.read().decode('latin-1'))\n"
        "            except OSError:\n"
        "                pass\n"
        "    return {'score': 1, 'seen': seen, 'ppid': os.getppid(), 'uid': os.getuid()}\n"
    )
    result = probes(run_without_audit_hook(code, databases))
    assert all(secret_env not in text for text in result["seen"])
    assert not any(key in text for text in result["seen"] for key in ("FLEET_", "AWS_", "OPENAI_"))
    assert result["ppid"] == 1  # its parent is the jail's init: the host's processes are invisible
    assert result["uid"] == 65534


def test_without_the_hook_there_is_no_network(databases: dict[str, str]) -> None:
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    code = (
        "import socket\n"
        "def verify(env):\n"
        "    try:\n"
        f"        socket.create_connection(('127.0.0.1', {port}), timeout=2).close()\n"
        "        return {'score': 1, 'connected': True}\n"
        "    except OSError as exc:\n"
        "        return {'score': 1, 'connected': False, 'error': type(exc).__name__}\n"
    )
    try:
        result = probes(run_without_audit_hook(code, databases))
    finally:
        listener.close()
    assert result["connected"] is False, result


def host_processes_with(token: str) -> list[int]:
    return [p.pid for p in processes() if token.encode() in p.cmdline()]


def test_without_the_hook_a_setsid_grandchild_does_not_outlive_the_run(databases: dict[str, str]) -> None:
    token = f"0.{uuid.uuid4().int % 10**12:012d}"  # a unique extra duration for sleep(1)
    code = (
        "import os, time\n"
        "def verify(env):\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        if os.fork() == 0:\n"
        f"            os.execv('/usr/bin/sleep', ['sleep', '300', {token!r}])\n"
        "        os._exit(0)\n"
        "    for _ in range(100):\n"
        "        time.sleep(0.05)\n"
        "        for pid in filter(str.isdigit, os.listdir('/proc')):\n"
        "            try:\n"
        f"                if {token!r} in open(f'/proc/{{pid}}/cmdline').read():\n"
        "                    return {'score': 1, 'started': True}\n"
        "            except OSError:\n"
        "                pass\n"
        "    return {'score': 1, 'started': False}\n"
    )
    outcome = run_without_audit_hook(code, databases)
    assert probes(outcome)["started"] is True
    assert host_processes_with(token) == []


def test_without_the_hook_a_shell_runs_as_nobody_and_sees_nothing(databases: dict[str, str]) -> None:
    code = (
        "import os, subprocess\n"
        "def verify(env):\n"
        "    done = subprocess.run(['/bin/sh', '-c', 'id -u; ls /; cat /etc/passwd'], capture_output=True)\n"
        "    return {'score': 1, 'out': done.stdout.decode(), 'err': done.stderr.decode()}\n"
    )
    result = probes(run_without_audit_hook(code, databases))
    lines = result["out"].split()
    assert lines[0] == "65534"
    assert "etc" not in lines and "home" not in lines and "work" not in lines
    assert "No such file" in result["err"]


def test_patching_builtins_fools_neither_the_hook_nor_the_jail(databases: dict[str, str]) -> None:
    # An attacker patches a builtin the hook might call so a path looks like a file descriptor.
    # The hook binds its helpers once; and without the hook, the jail has no /etc/passwd.
    code = (
        "import builtins\n"
        "def verify(env):\n"
        "    real = builtins.isinstance\n"
        "    builtins.isinstance = lambda obj, cls: cls is int or real(obj, cls)\n"
        "    try:\n"
        "        return {'score': 1, 'passwd': open('/etc/passwd').read()}\n"
        "    except OSError as exc:\n"
        "        return {'score': 1, 'error': type(exc).__name__ + ': ' + str(exc)}\n"
        "    finally:\n"
        "        builtins.isinstance = real\n"
    )
    hooked = probes(run_sandboxed(code, databases=databases))
    assert hooked["error"].startswith(f"PermissionError: {DENIED_PREFIX}: open('/etc/passwd')")
    jailed = probes(run_without_audit_hook(code, databases))
    assert jailed["error"].startswith("FileNotFoundError")


# ---------------------------------------------------------------- no jail: refuse unless allowed


@pytest.fixture
def no_jail(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This machine as one without bubblewrap: the probe finds no ``bwrap`` on PATH."""
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(_jail, "_cache", {})
    yield
    monkeypatch.setattr(_jail, "_cache", {})


def test_without_a_jail_runs_are_refused_unless_allowed(databases: dict[str, str], no_jail: None) -> None:
    with pytest.raises(JailUnavailableError, match="bubblewrap"):
        run_sandboxed("def verify(env):\n    return 1\n", databases=databases)
    outcome = run_sandboxed("def verify(env):\n    return 1\n", databases=databases, allow_unjailed=True)
    assert outcome.score == 1.0
    assert outcome.sandbox == "audit_hook"
    # The audit hook alone still refuses the plain escapes.
    refused = run_sandboxed(FRAME_WALK, databases=databases, allow_unjailed=True)
    assert refused.error is not None and DENIED_PREFIX in refused.error.message


async def test_the_async_runner_refuses_the_same_way(databases: dict[str, str], no_jail: None) -> None:
    with pytest.raises(JailUnavailableError):
        await run_sandboxed_async("def verify(env):\n    return 1\n", databases=databases)


async def test_the_async_runner_reports_the_jail(databases: dict[str, str]) -> None:
    outcome = await run_sandboxed_async("def verify(env):\n    return 1\n", databases=databases)
    assert outcome.score == 1.0
    assert outcome.sandbox == "os_jail+audit_hook"


async def test_the_async_runner_checks_the_jail_and_cleans_up_off_the_loop(
    databases: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Probing the jail runs bubblewrap (seconds) and cleanup removes a tree: neither may block
    # the loop the server serves every other request on.
    loop_thread = threading.get_ident()
    threads: dict[str, int] = {}
    real_status, real_cleanup = _jail.jail_status, _sandbox._Job.cleanup

    def status() -> _jail.JailStatus:
        threads["jail_status"] = threading.get_ident()
        return real_status()

    def cleanup(job: Any) -> None:
        threads["cleanup"] = threading.get_ident()
        real_cleanup(job)

    monkeypatch.setattr(_sandbox, "jail_status", status)
    monkeypatch.setattr(_sandbox._Job, "cleanup", cleanup)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    outcome = await run_sandboxed_async(
        "def verify(env):\n    return 1\n", databases=databases, scratch_root=scratch
    )
    assert outcome.score == 1.0
    assert set(threads) == {"jail_status", "cleanup"}
    assert loop_thread not in threads.values()
    assert list(scratch.iterdir()) == []


def test_the_marker_file_of_the_frame_walk_is_nowhere(databases: dict[str, str], tmp_path: Path) -> None:
    """The frame walk stops at ``sys._getframe``, before its ``touch pwned`` runs.

    Inside the jail the verifier can write only its scratch and result directories, both made
    under ``scratch_root`` and removed after the run; so the marker is looked for in the whole
    scratch root (and in the test's own directories), which must be left empty.
    """
    scratch_root = tmp_path / "scratch"
    scratch_root.mkdir()
    outcome = run_sandboxed(FRAME_WALK, databases=databases, scratch_root=scratch_root)
    assert outcome.error is not None
    assert outcome.error.message.startswith(f"PermissionError: {DENIED_PREFIX}: sys._getframe")
    assert list(scratch_root.iterdir()) == []
    assert [p for p in tmp_path.rglob("pwned")] == []
    assert not Path("pwned").exists()
