"""The verifier sandbox: a real ``python -I -S`` child per test, with its limits and audit hook."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import pytest
from _dbs import make_db
from _procs import descendants, processes
from _waits import PATIENCE, wait_until_async

from fleet_local.sandbox import (
    DENIED_PREFIX,
    OUTPUT_LIMIT_BYTES,
    SandboxError,
    run_sandboxed,
    run_sandboxed_sync,
)
from fleet_sdk import FleetError
from fleet_sdk.verifiers import VerifierOutcome

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="the sandbox child is tested on Linux"),
    pytest.mark.usefixtures("verifier_runner"),
]

PROJECT_FILE = Path(__file__).resolve().parents[2] / "pyproject.toml"


def sandbox_children() -> list[int]:
    """Pids of sandbox children of this process (zombies included: they were not reaped), and
    of the runs of its zygote (each run is its own session, below the zygote's ``bwrap``)."""
    found = [p.pid for p in processes() if p.ppid == os.getpid() and b"_child.py" in p.cmdline()]
    mine = descendants(os.getpid())
    for proc in processes():
        argv = proc.cmdline().split(b"\0")
        zygote_run = any(a.endswith(b"/_zygote_main.py") for a in argv[1:]) and not argv[0].endswith(b"bwrap")
        if proc.pid in mine and proc.session == proc.pid and zygote_run:
            found.append(proc.pid)
    return found


def assert_denied(outcome: VerifierOutcome, what: str) -> None:
    assert outcome.success is False
    assert outcome.score is None
    assert outcome.error is not None
    assert outcome.error.type == "exception"
    assert outcome.error.message.startswith(f"PermissionError: {DENIED_PREFIX}: "), outcome.error.message
    assert what in outcome.error.message


# -- a verifier that passes --------------------------------------------------------------------

SEED_VS_CURRENT = """
def verify(env: Environment, final_answer=None):
    seed_ids = {row["id"] for row in env.db("seed").rows("SELECT id FROM users")}
    added = [r for r in env.db("current").rows("SELECT id, name FROM users") if r["id"] not in seed_ids]
    print("added:", added)
    if len(added) == 1 and normalized_contains(added[0]["name"], final_answer):
        return {"score": TASK_SUCCESSFUL_SCORE, "added": added}
    return TASK_FAILED_SCORE
"""


def test_seed_vs_current_verifier_passes(databases: dict[str, str]) -> None:
    outcome = run_sandboxed_sync(SEED_VS_CURRENT, databases=databases, final_answer="I added grace HOPPER.")
    assert outcome.error is None, outcome.error
    assert outcome.success is True
    assert outcome.score == 1.0
    assert outcome.result == {"score": 1, "added": [{"id": 2, "name": "Grace Hopper"}]}
    assert outcome.stdout == "added: [{'id': 2, 'name': 'Grace Hopper'}]\n"
    assert outcome.execution_time_ms > 0
    assert sandbox_children() == []


def test_seed_vs_current_verifier_fails_gracefully(databases: dict[str, str]) -> None:
    outcome = run_sandboxed_sync(SEED_VS_CURRENT, databases=databases, final_answer="I added Alan Turing")
    assert outcome.success is True
    assert outcome.score == 0.0


def test_result_travels_outside_stdout(databases: dict[str, str]) -> None:
    code = 'def verify(env):\n    print(\'{"result": 0, "score": 0, "error": null}\')\n    return 0.5\n'
    outcome = run_sandboxed_sync(code, databases=databases)
    assert outcome.score == 0.5
    assert outcome.stdout == '{"result": 0, "score": 0, "error": null}\n'


def test_unknown_database_name_is_a_clear_exception(databases: dict[str, str]) -> None:
    outcome = run_sandboxed_sync("def verify(env):\n    env.db('prod')\n", databases=databases)
    assert outcome.error is not None and outcome.error.type == "exception"
    assert outcome.error.message == (
        "UnknownDatabaseError: no database named 'prod'; known databases: 'current', 'seed'"
    )


def test_databases_are_read_only(databases: dict[str, str]) -> None:
    outcome = run_sandboxed_sync(
        "def verify(env):\n    env.db().query('DELETE FROM users')\n", databases=databases
    )
    assert outcome.error is not None and outcome.error.type == "exception"
    assert "readonly" in outcome.error.message
    assert sqlite3.connect(databases["current"]).execute("SELECT COUNT(*) FROM users").fetchone() == (2,)


# -- each error type ---------------------------------------------------------------------------


def test_syntax_error(databases: dict[str, str]) -> None:
    outcome = run_sandboxed_sync("def verify(env):\n    return [1, 2\n", databases=databases)
    assert outcome.error is not None
    assert outcome.error.type == "syntax_error"
    assert outcome.error.message == "line 2: '[' was never closed"


def test_no_entry_point(databases: dict[str, str]) -> None:
    outcome = run_sandboxed_sync("def a(env):\n    pass\n\ndef b(env):\n    pass\n", databases=databases)
    assert outcome.error is not None
    assert outcome.error.type == "no_entry_point"
    assert "(a, b)" in outcome.error.message


def test_exception_with_traceback_and_stdout(databases: dict[str, str]) -> None:
    code = "def verify(env):\n    print('before')\n    raise ValueError('bad row')\n"
    outcome = run_sandboxed_sync(code, databases=databases)
    assert outcome.error is not None
    assert outcome.error.type == "exception"
    assert outcome.error.message == "ValueError: bad row"
    assert outcome.error.traceback is not None
    assert 'File "<verifier>", line 3, in verify' in outcome.error.traceback
    assert outcome.stdout == "before\n"


def test_invalid_result(databases: dict[str, str]) -> None:
    outcome = run_sandboxed_sync("def verify(env):\n    return object()\n", databases=databases)
    assert outcome.error is not None
    assert outcome.error.type == "invalid_result"
    assert outcome.score is None
    assert isinstance(outcome.result, str) and outcome.result.startswith("<object object at")


def test_infinite_loop_is_killed_at_the_timeout_and_output_is_capped(databases: dict[str, str]) -> None:
    code = (
        "import os\n"
        "def verify(env):\n"
        "    print('pid', os.getpid())\n"
        "    while True:\n"
        "        print('x' * 1000)\n"
    )
    start = time.monotonic()
    outcome = run_sandboxed_sync(code, databases=databases, timeout=1.5)
    elapsed = time.monotonic() - start
    assert outcome.error is not None
    assert outcome.error.type == "timeout"
    assert outcome.error.message == "the verifier did not finish within 1.5s and was killed"
    assert elapsed >= 1.5  # killed at the timeout, not before (the type says it was killed)
    # It printed far more than the cap; only the first MiB was kept, and the rest was counted.
    assert outcome.stdout.startswith("pid ")
    assert len(outcome.stdout.encode()) <= OUTPUT_LIMIT_BYTES + 100
    assert "output truncated" in outcome.stdout.splitlines()[-1]
    # It ran in its own PID namespace (bwrap is pid 1 there): nothing of it survives the jail.
    assert int(outcome.stdout.split()[1]) == 2
    assert sandbox_children() == []


def test_one_gigabyte_allocation_hits_the_memory_limit(databases: dict[str, str]) -> None:
    code = "def verify(env):\n    data = bytearray(1024 * 1024 * 1024)\n    return len(data)\n"
    outcome = run_sandboxed_sync(code, databases=databases)  # the default 512 MiB
    assert outcome.error is not None
    assert outcome.error.type == "memory_limit"
    assert outcome.score is None


@pytest.mark.parametrize(
    ("signal_name", "error_type", "message"),
    [
        ("SIGKILL", "memory_limit", "killed by SIGKILL, most likely at its 512 MiB memory limit"),
        ("SIGXCPU", "timeout", "used up its CPU time"),
    ],
)
def test_a_killed_child_is_classified(
    databases: dict[str, str], signal_name: str, error_type: str, message: str
) -> None:
    code = f"import signal\ndef verify(env):\n    signal.raise_signal(signal.{signal_name})\n"
    outcome = run_sandboxed_sync(code, databases=databases)
    assert outcome.error is not None
    assert outcome.error.type == error_type
    assert message in outcome.error.message


def test_a_child_that_exits_without_a_result(databases: dict[str, str]) -> None:
    outcome = run_sandboxed_sync("import os\ndef verify(env):\n    os._exit(3)\n", databases=databases)
    assert outcome.error is not None
    assert outcome.error.type == "exception"
    assert outcome.error.message == "the verifier process exited with status 3 without a result"


def test_threads_left_running_do_not_hold_the_result(databases: dict[str, str]) -> None:
    code = (
        "import threading, time\n"
        "def verify(env):\n"
        "    threading.Thread(target=time.sleep, args=(3600,)).start()\n"
        "    return 1\n"
    )
    outcome = run_sandboxed_sync(code, databases=databases, timeout=PATIENCE)
    # A result held until the timeout would be a timeout error, not a score.
    assert outcome.score == 1.0, outcome.error
    assert sandbox_children() == []


def test_stdout_is_capped_on_success(databases: dict[str, str]) -> None:
    code = "def verify(env):\n    print('y' * (3 * 1024 * 1024))\n    return 1\n"
    outcome = run_sandboxed_sync(code, databases=databases)
    assert outcome.score == 1.0
    kept, marker = outcome.stdout.rsplit("\n", 1)
    assert kept == "y" * OUTPUT_LIMIT_BYTES
    assert (
        marker
        == f"[fleet_sdk: output truncated, {3 * 1024 * 1024 + 1 - OUTPUT_LIMIT_BYTES} more bytes dropped]"
    )


# -- audit hook denials ------------------------------------------------------------------------


def test_reading_etc_passwd_is_denied(databases: dict[str, str]) -> None:
    outcome = run_sandboxed_sync(
        "def verify(env):\n    return open('/etc/passwd').read()\n", databases=databases
    )
    assert_denied(outcome, "open('/etc/passwd')")


def test_reading_a_file_of_the_project_is_denied(databases: dict[str, str]) -> None:
    code = f"import pathlib\ndef verify(env):\n    return pathlib.Path({str(PROJECT_FILE)!r}).read_text()\n"
    outcome = run_sandboxed_sync(code, databases=databases)
    assert_denied(outcome, f"open({str(PROJECT_FILE)!r})")


def test_reading_the_sandbox_own_code_is_denied(databases: dict[str, str]) -> None:
    code = "import sys\ndef verify(env):\n    return open(sys.modules['__main__'].__file__).read()\n"
    assert_denied(run_sandboxed_sync(code, databases=databases), "_child.py")


def test_subprocess_run_is_denied(databases: dict[str, str]) -> None:
    code = "import subprocess\ndef verify(env):\n    subprocess.run(['id'])\n    return 1\n"
    assert_denied(run_sandboxed_sync(code, databases=databases), "_posixsubprocess")


def test_subprocess_run_is_denied_in_an_async_verifier(databases: dict[str, str]) -> None:
    code = (
        "import asyncio, subprocess\n"
        "async def verify(env):\n"
        "    await asyncio.sleep(0)\n"
        "    subprocess.run(['id'])\n"
        "    return 1\n"
    )
    assert_denied(run_sandboxed_sync(code, databases=databases), "subprocess.Popen")


@pytest.mark.parametrize(
    ("call", "what"),
    [("os.system('id')", "os.system"), ("os.fork()", "os.fork"), ("os.execv('/bin/id', ['id'])", "os.exec")],
)
def test_process_creation_is_denied(databases: dict[str, str], call: str, what: str) -> None:
    outcome = run_sandboxed_sync(f"import os\ndef verify(env):\n    {call}\n", databases=databases)
    assert_denied(outcome, what)


def test_socket_connection_to_localhost_is_denied(databases: dict[str, str]) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        server.settimeout(0.2)
        port = server.getsockname()[1]
        code = (
            "import socket\n"
            "def verify(env):\n"
            f"    socket.create_connection(('127.0.0.1', {port}), timeout=1)\n"
        )
        outcome = run_sandboxed_sync(code, databases=databases)
        assert_denied(outcome, "socket.")
        with pytest.raises(TimeoutError):
            server.accept()  # nothing ever connected

        raw = f"import socket\ndef verify(env):\n    socket.socket().connect(('127.0.0.1', {port}))\n"
        assert_denied(run_sandboxed_sync(raw, databases=databases), "socket.connect")


def test_binding_a_socket_is_denied(databases: dict[str, str]) -> None:
    code = "import socket\ndef verify(env):\n    socket.socket().bind(('127.0.0.1', 0))\n"
    assert_denied(run_sandboxed_sync(code, databases=databases), "socket.bind")


def test_other_sqlite_files_cannot_be_opened_or_attached(databases: dict[str, str], tmp_path: Path) -> None:
    other = make_db(tmp_path / "other.db", [(7, "secret")])
    connect = f"import sqlite3\ndef verify(env):\n    sqlite3.connect({other!r})\n"
    assert_denied(run_sandboxed_sync(connect, databases=databases), "sqlite3.connect")
    attach = f'def verify(env):\n    env.db().query("ATTACH DATABASE {other} AS o")\n'
    outcome = run_sandboxed_sync(attach.replace(other, f"'{other}'"), databases=databases)
    assert outcome.error is not None and outcome.error.type == "exception"
    assert "not authorized" in outcome.error.message


def test_the_environment_is_empty(databases: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEET_API_KEY", "sk-should-never-leak")
    outcome = run_sandboxed_sync(
        "import os\ndef verify(env):\n    print(dict(os.environ))\n", databases=databases
    )
    assert outcome.success is True
    assert "sk-should-never-leak" not in outcome.stdout
    assert "FLEET_API_KEY" not in outcome.stdout


def test_cwd_is_a_fresh_writable_scratch_dir_that_is_removed(
    databases: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    code = (
        "import os\n"
        "def verify(env):\n"
        "    with open('notes.txt', 'w') as f:\n"
        "        f.write('ok')\n"
        "    print(os.getcwd())\n"
        "    return open('notes.txt').read() == 'ok' and os.listdir('.') == ['notes.txt']\n"
    )
    outcome = run_sandboxed_sync(code, databases=databases)
    assert outcome.score == 1.0, outcome.error
    # The jail mounts the run's scratch dir at /scratch; on the host it is gone after the run.
    assert outcome.stdout.strip() == "/scratch"
    assert not any(p.name.startswith("fleet-verifier-") for p in tmp_path.iterdir())


def test_the_child_loads_neither_fleet_sdk_nor_site_packages(databases: dict[str, str]) -> None:
    code = (
        "import sys\n"
        "def verify(env):\n"
        "    heavy = {'fleet_sdk', 'pydantic', 'httpx', 'anyio'}\n"
        "    return {'score': 1, 'loaded': sorted(m for m in sys.modules if m.split('.')[0] in heavy),\n"
        "            'site': [p for p in sys.path if 'site-packages' in p]}\n"
    )
    outcome = run_sandboxed_sync(code, databases=databases)
    assert outcome.result == {"score": 1, "loaded": [], "site": []}


def test_the_child_starts_without_the_modules_only_rare_paths_need(databases: dict[str, str]) -> None:
    """Every verifier run starts a fresh interpreter: inspect, dataclasses, traceback and pathlib
    (about a third of the runner's start-up) load only where a rare path needs them."""
    code = (
        "import sys\n"
        "def verify(env, final_answer=None):\n"
        "    rare = ('inspect', 'dataclasses', 'traceback', 'linecache', 'pathlib', 'urllib.parse')\n"
        "    return {'score': 1, 'loaded': [m for m in rare if m in sys.modules]}\n"
    )
    outcome = run_sandboxed_sync(code, databases=databases)
    assert outcome.result == {"score": 1, "loaded": []}
    failing = code.replace("return {", "raise ValueError('boom'); return {")
    outcome = run_sandboxed_sync(failing, databases=databases)
    assert outcome.error is not None and "ValueError: boom" in outcome.error.message
    assert 'File "<verifier>"' in (outcome.error.traceback or "")


# A verifier module that needs ``sys.modules[cls.__module__]``: @dataclass (string annotations
# and ClassVar), typing.get_type_hints on its own classes, and pickling them.
MODULE_NEEDING_VERIFIER = """
from __future__ import annotations

import pickle
import sys
import typing
from dataclasses import asdict, dataclass, field
from typing import ClassVar


@dataclass(frozen=True)
class Row:
    id: int
    name: str


@dataclass
class Check:
    rows: list[Row] = field(default_factory=list)
    threshold: ClassVar[int] = 1


def verify(env):
    check = Check([Row(**r) for r in env.db("current").rows("SELECT id, name FROM users")])
    hints = typing.get_type_hints(Check)
    copy = pickle.loads(pickle.dumps(check))
    return {
        "score": 1.0 if len(check.rows) > Check.threshold else 0.0,
        "fields": sorted(asdict(check)),
        "hint": repr(hints["rows"]),
        "round_trip": copy == check and type(copy.rows[0]) is Row,
        "module_is_globals": vars(sys.modules[__name__]) is globals(),
    }
"""


def test_verifier_may_define_dataclasses_and_pickle_its_classes(databases: dict[str, str]) -> None:
    outcome = run_sandboxed_sync(MODULE_NEEDING_VERIFIER, databases=databases)
    assert outcome.error is None, outcome.error
    assert outcome.sandbox is not None and "audit_hook" in outcome.sandbox
    assert outcome.result == {
        "score": 1.0,
        "fields": ["rows"],
        "hint": "list[verifier.Row]",
        "round_trip": True,
        "module_is_globals": True,
    }


def test_the_verifier_module_entry_opens_nothing_new(databases: dict[str, str]) -> None:
    """The entry is the verifier's own globals: the sandbox's modules stay out of reach."""
    code = (
        "import sys\n"
        "def verify(env):\n"
        "    sys.modules[__name__].TASK_FAILED_SCORE = 7\n"
        "    return {'score': 1, 'seen': TASK_FAILED_SCORE,\n"
        "            'sandbox': sorted(m for m in sys.modules if 'sandbox' in m)}\n"
        "def verify_reads(env):\n"
        "    open('/etc/passwd').read()\n"
    )
    outcome = run_sandboxed_sync(code, databases=databases)
    assert outcome.result == {"score": 1, "seen": 7, "sandbox": []}
    assert_denied(run_sandboxed_sync(code, databases=databases, function_name="verify_reads"), "/etc/passwd")


# -- arguments ---------------------------------------------------------------------------------


def test_invalid_arguments_raise_sandbox_error(databases: dict[str, str]) -> None:
    with pytest.raises(SandboxError, match="JSON-serializable"):
        run_sandboxed_sync("def verify(env): pass", databases=databases, final_answer=object())
    with pytest.raises(SandboxError, match="timeout"):
        run_sandboxed_sync("def verify(env): pass", databases=databases, timeout=0)
    with pytest.raises(SandboxError, match="memory_mb"):
        run_sandboxed_sync("def verify(env): pass", databases=databases, memory_mb=1)
    assert issubclass(SandboxError, FleetError)


def test_function_name_is_honoured(databases: dict[str, str]) -> None:
    code = "def a(env):\n    return 0.25\n\ndef b(env):\n    return 0.75\n"
    assert run_sandboxed_sync(code, databases=databases, function_name="b").score == 0.75


# -- async twin --------------------------------------------------------------------------------


async def test_async_run_passes_without_blocking_the_loop(databases: dict[str, str]) -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    task = asyncio.create_task(ticker())
    code = SEED_VS_CURRENT + "\nimport time\n_sleep = time.sleep\n"
    slow = code.replace('print("added:", added)', 'print("added:", added); _sleep(0.5)')
    try:
        outcome = await run_sandboxed(slow, databases=databases, final_answer="grace hopper")
    finally:
        task.cancel()
    assert outcome.score == 1.0, outcome.error
    assert outcome.result == {"score": 1, "added": [{"id": 2, "name": "Grace Hopper"}]}
    # The loop kept ticking while the verifier slept 0.5 s; a run that blocked the loop would leave
    # at most one tick, however fast or loaded the machine.
    assert ticks >= 3


async def test_async_run_times_out(databases: dict[str, str]) -> None:
    outcome = await run_sandboxed("def verify(env):\n    while True: pass\n", databases=databases, timeout=1)
    assert outcome.error is not None and outcome.error.type == "timeout"
    assert sandbox_children() == []


async def test_async_run_reports_denials_and_async_verifiers(databases: dict[str, str]) -> None:
    code = (
        "import asyncio\n"
        "async def verify(env):\n"
        "    await asyncio.sleep(0)\n"
        "    return open('/etc/passwd').read()\n"
    )
    assert_denied(await run_sandboxed(code, databases=databases), "open('/etc/passwd')")


async def test_cancelling_the_async_run_kills_the_child(databases: dict[str, str]) -> None:
    task = asyncio.create_task(
        run_sandboxed("import time\ndef verify(env):\n    time.sleep(30)\n", databases=databases)
    )
    await wait_until_async(sandbox_children, "the verifier's child process started")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sandbox_children() == []


def test_sandbox_outcome_is_json_round_trippable(databases: dict[str, str]) -> None:
    outcome = run_sandboxed_sync(SEED_VS_CURRENT, databases=databases, final_answer="grace hopper")
    assert VerifierOutcome.model_validate(json.loads(outcome.model_dump_json())) == outcome
