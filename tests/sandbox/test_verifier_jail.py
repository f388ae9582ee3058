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
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from _jail_runs import probes, run_without_audit_hook
from _procs import processes

from fleet_local.sandbox import (
    DENIED_PREFIX,
    JailUnavailableError,
    _jail,
    _sandbox,
    run_sandboxed,
    run_sandboxed_sync,
)

pytestmark = pytest.mark.usefixtures("verifier_runner")


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
    outcome = run_sandboxed_sync(FRAME_WALK, databases=databases)
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
    outcome = run_sandboxed_sync(code, databases=databases)
    assert outcome.error is not None, outcome.result
    assert f"{DENIED_PREFIX}: " in outcome.error.message
    assert denied in outcome.error.message


def test_the_hook_module_is_not_reachable_by_name(databases: dict[str, str]) -> None:
    code = (
        "import sys\n"
        "def verify(env):\n"
        "    return {'score': 1, 'ours': sorted(m for m in sys.modules if 'fleet' in m)}\n"
    )
    assert probes(run_sandboxed_sync(code, databases=databases))["ours"] == []


def test_a_swapped_code_object_is_refused(databases: dict[str, str]) -> None:
    code = (
        "def helper():\n    return 0\n"
        "def verify(env):\n"
        "    helper.__code__ = (lambda: 1).__code__\n"
        "    return 1\n"
    )
    outcome = run_sandboxed_sync(code, databases=databases)
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
    result = probes(run_sandboxed_sync(code, databases=databases))
    assert result == {"score": 1, "p": 1, "c": "RED"}


def test_a_failing_verifier_still_gets_its_traceback(databases: dict[str, str]) -> None:
    outcome = run_sandboxed_sync("def verify(env):\n    return 1 / 0\n", databases=databases)
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
    result = probes(run_sandboxed_sync(code, databases=databases))
    assert result["authorizer"].startswith("PermissionError: ")
    assert result["limit"].startswith("PermissionError: ")
    assert result["extension"].startswith("PermissionError: ")
    assert result["attach"] == "DatabaseError: not authorized"
    assert result["tokenizer"] == "OperationalError: not authorized to use function: fts3_tokenizer"
    assert "readonly" in result["write"]


def test_attach_of_the_server_database_fails_even_with_the_authorizer_gone(
    databases: dict[str, str], server_db: Path
) -> None:
    """The read-only connection is a proxy: ``sqlite3.Connection.set_authorizer(conn, None)``
    used to strip a subclass's authorizer. With the hook on, the real connection is out of
    reach; with it off, a frame walk finds it, strips the authorizer, and the jail still has no
    file to attach."""
    code = (
        "import sqlite3\n"
        "def verify(env):\n"
        "    conn = env.db('current').connect()\n"
        "    out = {'score': 1}\n"
        "    try:\n"
        "        sqlite3.Connection.set_authorizer(conn, None)\n"
        "    except TypeError as exc:\n"
        "        out['proxy'] = str(exc)\n"
        "    try:\n"
        "        raw = conn._held.gi_frame.f_locals['target']\n"
        "        sqlite3.Connection.set_authorizer(raw, None)\n"
        "        sqlite3.Connection.setlimit(raw, sqlite3.SQLITE_LIMIT_ATTACHED, 10)\n"
        "        conn = raw\n"
        "    except Exception as exc:\n"
        "        out['frame'] = type(exc).__name__ + ': ' + str(exc)\n"
        "    try:\n"
        f"        conn.execute(\"ATTACH DATABASE 'file:{server_db}?mode=ro' AS s\")\n"
        "        out['read'] = conn.execute('SELECT body FROM s.docs').fetchall()\n"
        "    except sqlite3.Error as exc:\n"
        "        out['error'] = str(exc)\n"
        "    return out\n"
    )
    hooked = probes(run_sandboxed_sync(code, databases=databases))
    assert "doesn't apply to a 'ReadOnlyConnection' object" in hooked["proxy"]
    assert hooked["frame"].startswith(f"PermissionError: {DENIED_PREFIX}: reading gi_frame")
    assert hooked["error"] == "not authorized"
    jailed = probes(run_without_audit_hook(code, databases))
    assert "frame" not in jailed  # the authorizer is gone: only the jail is left
    assert "unable to open database" in jailed["error"]
    for result in (hooked, jailed):
        assert "read" not in result, result
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


def test_without_the_hook_no_secret_is_in_the_environment_and_there_is_no_proc(
    databases: dict[str, str], secret_env: str
) -> None:
    code = (
        "import os\n"
        "def verify(env):\n"
        "    out = {'score': 1, 'env': repr(dict(os.environ)), 'ppid': os.getppid(), 'uid': os.getuid()}\n"
        "    for path in ('/proc', '/proc/1/environ', '/sys'):\n"
        "        try:\n"
        "            out[path] = os.listdir(path) if not path.endswith('environ') else open(path).read()\n"
        "        except OSError as exc:\n"
        "            out[path] = type(exc).__name__\n"
        "    return out\n"
    )
    result = probes(run_without_audit_hook(code, databases))
    assert secret_env not in result["env"]
    assert not any(key in result["env"] for key in ("FLEET_", "AWS_", "OPENAI_"))
    assert result["/proc"] == result["/proc/1/environ"] == result["/sys"] == "FileNotFoundError"
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


@pytest.fixture
def without_seccomp(monkeypatch: pytest.MonkeyPatch) -> None:
    """The jail as on an architecture without a seccomp table: processes may start."""
    status = replace(_jail.jail_status(), seccomp=False)
    monkeypatch.setattr(_sandbox, "jail_status", lambda: status)


def test_without_the_hook_a_setsid_grandchild_does_not_outlive_the_run(
    databases: dict[str, str], without_seccomp: None
) -> None:
    token = f"0.{uuid.uuid4().int % 10**12:012d}"  # a unique extra duration for sleep(1)
    code = (
        "import os, time\n"
        "def verify(env):\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        if os.fork() == 0:\n"
        "            open('/tmp/started', 'w').close()\n"
        f"            os.execv('/usr/bin/sleep', ['sleep', '300', {token!r}])\n"
        "        os._exit(0)\n"
        "    for _ in range(100):\n"
        "        time.sleep(0.05)\n"
        "        if os.path.exists('/tmp/started'):\n"
        "            return {'score': 1, 'started': True}\n"
        "    return {'score': 1, 'started': False}\n"
    )
    outcome = run_without_audit_hook(code, databases)
    assert probes(outcome)["started"] is True
    assert host_processes_with(token) == []


def test_without_the_hook_a_shell_runs_as_nobody_and_sees_nothing(
    databases: dict[str, str], without_seccomp: None
) -> None:
    code = (
        "import os, subprocess\n"
        "def verify(env):\n"
        "    done = subprocess.run(['/bin/sh', '-c', 'id -u; ls /; cat /etc/passwd'], capture_output=True)\n"
        "    return {'score': 1, 'out': done.stdout.decode(), 'err': done.stderr.decode()}\n"
    )
    result = probes(run_without_audit_hook(code, databases))
    lines = result["out"].split()
    assert lines[0] == "65534"
    assert "etc" not in lines and "home" not in lines and "work" not in lines and "proc" not in lines
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
    hooked = probes(run_sandboxed_sync(code, databases=databases))
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
        run_sandboxed_sync("def verify(env):\n    return 1\n", databases=databases)
    outcome = run_sandboxed_sync("def verify(env):\n    return 1\n", databases=databases, allow_unjailed=True)
    assert outcome.score == 1.0
    assert outcome.sandbox == "audit_hook"
    # The audit hook alone still refuses the plain escapes.
    refused = run_sandboxed_sync(FRAME_WALK, databases=databases, allow_unjailed=True)
    assert refused.error is not None and DENIED_PREFIX in refused.error.message


# ---------------------------------------------------------------- no jail: the hook's known gaps narrowed
# Unjailed runs are for trusted code only (the keyless manager route refuses them); the hook
# is no promise. Still, each bypass found against it is closed, and stays closed.


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "secret.txt"
    path.write_text("server-secret")
    return path


def run_unjailed(code: str, databases: dict[str, str]) -> dict[str, Any]:
    outcome = run_sandboxed_sync(code, databases=databases, allow_unjailed=True)
    assert outcome.sandbox == "audit_hook"
    return probes(outcome)


def test_patching_posixpath_or_fspath_does_not_move_a_path_into_scratch(
    databases: dict[str, str], no_jail: None, secret_file: Path, secret_env: str
) -> None:
    """``posixpath._joinrealpath`` patched to answer a scratch path made the hook allow any
    open, the server's ``/proc/<ppid>/environ`` (its key) included. The hook resolves paths
    with C functions bound before the verifier runs."""
    code = (
        "import os, posixpath\n"
        "def verify(env):\n"
        "    scratch = os.getcwd()\n"
        "    posixpath._joinrealpath = lambda path, rest, strict, seen: (scratch + '/x', True)\n"
        "    os.fspath = lambda path: scratch + '/x'\n"
        "    out = {'score': 1}\n"
        f"    for path in ({str(secret_file)!r}, f'/proc/{{os.getppid()}}/environ'):\n"
        "        try:\n"
        "            out[path] = open(path).read()\n"
        "        except OSError as exc:\n"
        "            out[path] = type(exc).__name__ + ': ' + str(exc)\n"
        "    return out\n"
    )
    result = run_unjailed(code, databases)
    assert secret_env not in repr(result) and "server-secret" not in repr(result)
    for path, answer in result.items():
        if path != "score":
            assert answer.startswith(f"PermissionError: {DENIED_PREFIX}: open("), (path, answer)


def test_no_directory_outside_scratch_becomes_a_dir_fd_or_the_cwd(
    databases: dict[str, str], no_jail: None
) -> None:
    """``os.open(rel, ..., dir_fd=fd)``: the kernel resolves ``rel`` against ``fd`` and no audit
    event says so, while the hook resolved it against the cwd. A directory outside scratch can
    no longer become a descriptor (or the cwd), so both resolve alike; inside scratch, as before."""
    code = (
        "import os\n"
        "def verify(env):\n"
        "    out = {'score': 1}\n"
        "    stdlib, here = os.path.dirname(os.__file__), os.open('.', os.O_RDONLY)\n"
        "    attempts = {\n"
        "        'stdlib': lambda: os.open(stdlib, os.O_RDONLY),\n"
        "        'root_path': lambda: os.open('/', os.O_PATH),\n"
        "        'chdir': lambda: os.chdir('/'),\n"
        "        'scratch': lambda: os.open('made', os.O_CREAT | os.O_WRONLY, dir_fd=here),\n"
        "    }\n"
        "    for name, attempt in attempts.items():\n"
        "        try:\n"
        "            attempt()\n"
        "            out[name] = 'allowed'\n"
        "        except OSError as exc:\n"
        "            out[name] = str(exc)\n"
        "    return out\n"
    )
    result = run_unjailed(code, databases)
    assert result["scratch"] == "allowed"
    for name in ("stdlib", "root_path", "chdir"):
        assert result[name].startswith(f"{DENIED_PREFIX}: "), (name, result[name])


def test_posixsubprocess_under_another_name_or_file_is_refused(
    databases: dict[str, str], no_jail: None
) -> None:
    """``_posixsubprocess`` loaded through ``importlib.util.spec_from_file_location`` under
    another dotted name ran ``/bin/sh``: the hook compared the full name only. It now checks the
    last name and the file, and loads no extension module from outside the standard library."""
    code = (
        "import importlib.util, os, shutil, sys\n"
        "def load(name, path):\n"
        "    try:\n"
        "        importlib.util.module_from_spec(importlib.util.spec_from_file_location(name, path))\n"
        "        return 'loaded'\n"
        "    except Exception as exc:\n"
        "        return str(exc)\n"
        "def verify(env):\n"
        "    dynload = next(p for p in sys.path if p.endswith('lib-dynload'))\n"
        "    name = next(f for f in os.listdir(dynload) if f.startswith('_posixsubprocess.'))\n"
        "    shutil.copyfile(os.path.join(dynload, name), 'innocent.so')\n"
        "    return {'score': 1, 'alias': load('x._posixsubprocess', os.path.join(dynload, name)),\n"
        "            'copy': load('x._posixsubprocess', 'innocent.so'),\n"
        "            'copy_renamed': load('innocent', os.path.abspath('innocent.so'))}\n"
    )
    result = run_unjailed(code, databases)
    assert result["alias"] == f"{DENIED_PREFIX}: import of _posixsubprocess"
    for name in ("copy", "copy_renamed"):
        assert result[name].startswith(f"{DENIED_PREFIX}: loading the extension module"), result[name]


def test_nothing_that_forks_or_signals_without_an_audit_event_is_left(
    databases: dict[str, str], no_jail: None
) -> None:
    """``subprocess._fork_exec`` stayed reachable once asyncio had imported subprocess (3.11),
    and ``signal.pidfd_send_signal`` killed the server with no audit event. The runner removes
    them (and their kin), and the hook refuses importing their modules afresh."""
    code = (
        "import asyncio, os, signal, sys\n"
        "async def verify(env):\n"
        "    import subprocess\n"
        "    out = {'score': 1, 'left': [name for module, name in ((subprocess, '_fork_exec'),\n"
        "           (signal, 'pidfd_send_signal'), (os, 'pidfd_open'), (os, 'setpriority'))\n"
        "           if hasattr(module, name)], 'posixsubprocess': '_posixsubprocess' in sys.modules}\n"
        "    for name in ('_signal', 'posix'):\n"
        "        sys.modules.pop(name)\n"
        "        try:\n"
        "            __import__(name)\n"
        "            out[name] = 'imported'\n"
        "        except PermissionError as exc:\n"
        "            out[name] = str(exc)\n"
        "    return out\n"
    )
    result = run_unjailed(code, databases)
    assert result["left"] == [] and result["posixsubprocess"] is False
    assert result["_signal"] == f"{DENIED_PREFIX}: import of _signal"
    assert result["posix"] == f"{DENIED_PREFIX}: import of posix"


def test_the_authorizer_cannot_be_stripped_for_attach_or_vacuum_into(
    databases: dict[str, str], no_jail: None, server_db: Path, tmp_path: Path
) -> None:
    """``sqlite3.Connection.set_authorizer(conn, None)``, then ``ATTACH`` or ``VACUUM INTO``
    anywhere: SQLite opens those files itself, unseen by the hook. The verifier's connection is
    a proxy that never hands out the real one."""
    copy = tmp_path / "copied.db"
    code = (
        "import sqlite3\n"
        "def verify(env):\n"
        "    conn = env.db('current').connect()\n"
        "    out = {'score': 1}\n"
        "    attempts = {\n"
        "        'strip': lambda: sqlite3.Connection.set_authorizer(conn, None),\n"
        "        'send': lambda: conn._held.send(('set_authorizer', (None,), {}))[1],\n"
        f"        'attach': lambda: conn.execute(\"ATTACH '{server_db}' AS s\"),\n"
        f"        'vacuum': lambda: conn.execute(\"VACUUM INTO '{copy}'\"),\n"
        "    }\n"
        "    for name, attempt in attempts.items():\n"
        "        try:\n"
        "            out[name] = repr(attempt())\n"
        "        except Exception as exc:\n"
        "            out[name] = type(exc).__name__ + ': ' + str(exc)\n"
        "    return out\n"
    )
    result = run_unjailed(code, databases)
    assert result["strip"].startswith("TypeError: descriptor 'set_authorizer'")
    assert result["send"] == "PermissionError('this database connection does not allow set_authorizer')"
    assert result["attach"] == "DatabaseError: not authorized"
    assert result["vacuum"] == "DatabaseError: authorization denied"
    assert not copy.exists()


async def test_the_async_runner_refuses_the_same_way(databases: dict[str, str], no_jail: None) -> None:
    with pytest.raises(JailUnavailableError):
        await run_sandboxed("def verify(env):\n    return 1\n", databases=databases)


async def test_the_async_runner_reports_the_jail(databases: dict[str, str]) -> None:
    outcome = await run_sandboxed("def verify(env):\n    return 1\n", databases=databases)
    assert outcome.score == 1.0
    assert outcome.sandbox == "os_jail+audit_hook"


async def test_the_async_runner_checks_the_jail_and_cleans_up_off_the_loop(
    databases: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Probing the jail runs bubblewrap (seconds) and cleanup may remove a cgroup or a tree:
    # neither may block the loop the server serves every other request on. A cleanup with
    # only pipe ends to close runs on the loop (tests/sandbox/test_verifier_cleanup_on_loop.py).
    loop_thread = threading.get_ident()
    threads: dict[str, int] = {}
    real_status, real_cleanup = _jail.jail_status, _sandbox._Job.cleanup

    def status() -> _jail.JailStatus:
        threads["jail_status"] = threading.get_ident()
        return real_status()

    def cleanup(job: Any) -> None:
        if job.cgroup is not None or job.root is not None:
            threads["cleanup"] = threading.get_ident()
        else:
            threads["cleanup"] = -1  # nothing on the file system: may run anywhere
        real_cleanup(job)

    monkeypatch.setattr(_sandbox, "jail_status", status)
    monkeypatch.setattr(_sandbox._Job, "cleanup", cleanup)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    outcome = await run_sandboxed(
        "def verify(env):\n    return 1\n", databases=databases, scratch_root=scratch
    )
    assert outcome.score == 1.0
    assert set(threads) == {"jail_status", "cleanup"}
    assert loop_thread not in threads.values()
    assert list(scratch.iterdir()) == []


def test_the_marker_file_of_the_frame_walk_is_nowhere(databases: dict[str, str], tmp_path: Path) -> None:
    """The frame walk stops at ``sys._getframe``, before its ``touch pwned`` runs.

    Inside the jail the verifier can write only its scratch tmpfs and ``/tmp``, which vanish
    with the run; nothing of it is made under ``scratch_root`` (only unjailed runs make their
    directory there). The marker is looked for in the scratch root and the test's own
    directories, which must be left empty.
    """
    scratch_root = tmp_path / "scratch"
    scratch_root.mkdir()
    outcome = run_sandboxed_sync(FRAME_WALK, databases=databases, scratch_root=scratch_root)
    assert outcome.error is not None
    assert outcome.error.message.startswith(f"PermissionError: {DENIED_PREFIX}: sys._getframe")
    assert list(scratch_root.iterdir()) == []
    assert [p for p in tmp_path.rglob("pwned")] == []
    assert not Path("pwned").exists()
