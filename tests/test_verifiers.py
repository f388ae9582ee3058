"""In-process tests of fleet_sdk.verifiers: namespace helpers, entry point, scoring, run_local_sync,
the SQLite environment, bundles and the audit policy (the sandbox child itself is exercised in
tests/sandbox/)."""

from __future__ import annotations

import ast
import asyncio
import functools
import io
import os
import sqlite3
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _dbs import make_db

from fleet_local.sandbox import DENIED_PREFIX, SandboxPolicy, run_sandboxed_sync
from fleet_sdk import FleetError
from fleet_sdk.verifiers import (
    TASK_FAILED_SCORE,
    TASK_SUCCESSFUL_SCORE,
    Environment,
    InvalidResultError,
    QueryResult,
    SQLiteEnvironment,
    UnknownDatabaseError,
    VerifierCodeError,
    VerifierOutcome,
    build_namespace,
    bundle_sha256,
    bundle_verifier,
    contains_number,
    extract_numbers,
    find_entry_point,
    normalized_contains,
    normalized_string_comparison,
    run_local,
    run_local_sync,
    score_from_result,
)

VERIFIERS_DIR = Path(__file__).resolve().parents[1] / "fleet_sdk" / "verifiers"
SANDBOX_DIR = Path(__file__).resolve().parents[1] / "fleet_local" / "sandbox"


# -- fixtures ----------------------------------------------------------------------------------


@pytest.fixture
def env(tmp_path: Path) -> Iterator[SQLiteEnvironment]:
    seed = make_db(tmp_path / "seed.db", [(1, "Ada")])
    current = make_db(tmp_path / "current.db", [(1, "Ada"), (2, "Grace Hopper")])
    with SQLiteEnvironment({"seed": seed, "current": current}) as environment:
        yield environment


# -- namespace helpers -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("needle", "haystack", "expected"),
    [
        ("Dr. O'Neil", "the patient DR ONEIL arrived", True),
        ("hello world", "HELLO,   WORLD!", True),
        ("helloworld", "hello world", True),  # whitespace is removed, not collapsed
        ("goodbye", "hello world", False),
        ({"b": 2, "a": 1}, '{"a": 1, "b": 2, "c": 3}', True),  # dict -> JSON with sorted keys
        (["x", "y"], 'payload: ["x", "y"]', True),
        ({"a": 1}, {"b": 1}, False),
        ("", "anything", True),
        ("none", None, False),  # None is the empty string, not "None"
    ],
)
def test_normalized_contains(needle: Any, haystack: Any, expected: bool) -> None:
    assert normalized_contains(needle, haystack) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Total: $1,234.50 for 3 items", [1234.5, 3.0]),
        ("temperature -5 to 10", [-5.0, 10.0]),
        ("pages 3-5", [3.0, 5.0]),  # a dash between numbers is not a sign
        ("ratio .5 and 2.", [0.5, 2.0]),
        ("1,2,3", [1.0, 2.0, 3.0]),  # commas only as thousands separators
        ("version v2, 10%", [2.0, 10.0]),
        ("no digits here", []),
        (None, []),
    ],
)
def test_extract_numbers(text: Any, expected: list[float]) -> None:
    assert extract_numbers(text) == expected


def test_contains_number() -> None:
    assert contains_number("The invoice total is $1,234.50.", 1234.5)
    assert contains_number("The invoice total is $1,234.50.", "1,234.5")
    assert not contains_number("The invoice total is $1,234.50.", 1234.0)
    assert contains_number("about 3.14159", 3.14, tolerance=0.01)
    assert not contains_number("about 3.14159", 3.14)
    with pytest.raises(ValueError, match="no number"):
        contains_number("x", "abc")


def test_normalized_string_comparison() -> None:
    assert normalized_string_comparison("Hello,   World!", "hello world")
    assert normalized_string_comparison("  New-York ", "new york")
    assert not normalized_string_comparison("ab", "a b")
    assert not normalized_string_comparison("hello world", "hello")


def test_build_namespace_contents() -> None:
    ns = build_namespace()
    assert ns["TASK_SUCCESSFUL_SCORE"] == TASK_SUCCESSFUL_SCORE == 1
    assert ns["TASK_FAILED_SCORE"] == TASK_FAILED_SCORE == 0
    assert ns["Environment"] is Environment
    assert ns["json"].__name__ == "json"
    assert ns["re"].__name__ == "re"
    assert ns["string"].__name__ == "string"
    for helper in (
        "normalized_contains",
        "extract_numbers",
        "contains_number",
        "normalized_string_comparison",
    ):
        assert callable(ns[helper])
    assert build_namespace() is not ns  # fresh for every run


def test_helpers_are_reachable_inside_verify() -> None:
    """Regression: the public SDK put the helpers in exec's *locals*, so a ``verify`` body that
    used ``normalized_contains`` (or ``Environment`` in an annotation) raised NameError."""
    code = (
        "def verify(env: Environment, final_answer=None) -> float:\n"
        "    if normalized_contains('grace hopper', final_answer) and contains_number(final_answer, 2):\n"
        "        return TASK_SUCCESSFUL_SCORE\n"
        "    return TASK_FAILED_SCORE\n"
    )
    outcome = run_local_sync(code, env=None, final_answer="User #2 is GRACE-HOPPER.")
    assert outcome.error is None
    assert outcome.score == 1.0


# -- entry point -------------------------------------------------------------------------------


def test_entry_point_is_verify_even_below_a_helper() -> None:
    """Regression: the public SDK called "the first function defined", i.e. a helper written
    above ``verify``."""
    code = "def helper(env):\n    return 0.0\n\ndef verify(env):\n    return helper(env) + 1.0\n"
    assert find_entry_point(code) == "verify"
    assert run_local_sync(code, env=None).score == 1.0


def test_entry_point_single_function_with_another_name() -> None:
    code = "def check_task(env, final_answer):\n    return final_answer == 'ok'\n"
    assert find_entry_point(code) == "check_task"
    assert run_local_sync(code, env=None, final_answer="ok").score == 1.0


def test_entry_point_ambiguous_names_every_function() -> None:
    code = "def first(env):\n    return 1\n\nasync def second(env):\n    return 0\n"
    with pytest.raises(VerifierCodeError) as raised:
        find_entry_point(code)
    assert raised.value.error_type == "no_entry_point"
    assert raised.value.functions == ("first", "second")
    assert "first, second" in raised.value.message
    assert isinstance(raised.value, FleetError)

    outcome = run_local_sync(code, env=None)
    assert outcome.success is False and outcome.score is None
    assert outcome.error is not None and outcome.error.type == "no_entry_point"
    assert "first, second" in outcome.error.message


def test_entry_point_none_defined() -> None:
    outcome = run_local_sync("x = 1\n", env=None)
    assert outcome.error is not None and outcome.error.type == "no_entry_point"
    assert "defines no top-level function" in outcome.error.message


def test_entry_point_explicit_function_name() -> None:
    code = "def a(env):\n    return 0.25\n\ndef b(env):\n    return 0.75\n"
    assert run_local_sync(code, env=None, function_name="b").score == 0.75
    outcome = run_local_sync(code, env=None, function_name="verify")
    assert outcome.error is not None and outcome.error.type == "no_entry_point"
    assert outcome.error.message == "no top-level function named 'verify'; functions found: a, b"


def test_nested_functions_do_not_count() -> None:
    code = "def verify(env):\n    def inner():\n        return 0.5\n    return inner()\n"
    assert run_local_sync(code, env=None).score == 0.5


def test_syntax_error_is_reported_as_such() -> None:
    outcome = run_local_sync("def verify(env):\n    return (1 +\n", env=None)
    assert outcome.success is False
    assert outcome.error is not None and outcome.error.type == "syntax_error"
    assert outcome.error.message.startswith("line 2: ")
    assert outcome.error.traceback is not None and "SyntaxError" in outcome.error.traceback
    with pytest.raises(VerifierCodeError) as raised:
        find_entry_point("def verify(:\n")
    assert raised.value.error_type == "syntax_error" and raised.value.lineno == 1


def test_called_with_env_only_when_verify_takes_one_parameter() -> None:
    seen: list[Any] = []
    ns_env = object()
    code = "def verify(env):\n    SEEN.append(env)\n    return 1\n"
    namespace = build_namespace()
    namespace["SEEN"] = seen
    from fleet_sdk.verifiers._entry import execute

    assert execute(code, ns_env, "answer", namespace=namespace).score == 1.0
    assert seen == [ns_env]


def test_called_with_final_answer_when_verify_takes_two() -> None:
    code = "def verify(env, final_answer):\n    return {'score': 1.0 if final_answer == 42 else 0.0}\n"
    assert run_local_sync(code, env=None, final_answer=42).score == 1.0
    assert run_local_sync(code, env=None, final_answer=41).score == 0.0


# -- results and scores ------------------------------------------------------------------------


class _Scored:
    def __init__(self, score: Any) -> None:
        self.score = score


@pytest.mark.parametrize(
    ("result", "score"),
    [
        (None, 1.0),
        (True, 1.0),
        (False, 0.0),
        (1, 1.0),
        (0, 0.0),
        (0.25, 0.25),
        ({"score": 0.5, "details": "x"}, 0.5),
        ({"score": True}, 1.0),
        (_Scored(0.75), 0.75),
    ],
)
def test_score_from_result(result: Any, score: float) -> None:
    assert score_from_result(result) == score


@pytest.mark.parametrize(
    "result",
    [
        "1.0",
        [1],
        {"passed": True},
        {"score": None},
        {"score": "high"},
        _Scored(None),
        float("nan"),
        float("inf"),
    ],
)
def test_score_from_result_rejects(result: Any) -> None:
    with pytest.raises(InvalidResultError):
        score_from_result(result)


def test_verifier_returning_none_scores_one() -> None:
    outcome = run_local_sync("def verify(env):\n    pass\n", env=None)
    assert outcome == VerifierOutcome(
        success=True,
        score=1.0,
        result=None,
        stdout="",
        error=None,
        execution_time_ms=outcome.execution_time_ms,
    )


def test_invalid_result() -> None:
    outcome = run_local_sync("def verify(env):\n    return 'passed'\n", env=None)
    assert outcome.success is False
    assert outcome.score is None
    assert outcome.result == "passed"
    assert outcome.error is not None and outcome.error.type == "invalid_result"
    assert "got str: 'passed'" in outcome.error.message


def test_exception_keeps_stdout_and_a_traceback_of_the_verifier() -> None:
    code = "def verify(env):\n    print('checking')\n    return 1 / 0\n"
    outcome = run_local_sync(code, env=None)
    assert outcome.success is False and outcome.score is None
    assert outcome.stdout == "checking\n"
    assert outcome.error is not None
    assert outcome.error.type == "exception"
    assert outcome.error.message == "ZeroDivisionError: division by zero"
    assert outcome.error.traceback is not None
    assert 'File "<verifier>", line 3, in verify' in outcome.error.traceback
    assert "return 1 / 0" in outcome.error.traceback  # the source line is shown
    assert "_entry.py" not in outcome.error.traceback  # the runner's own frames are not


def test_module_level_exception_is_an_exception() -> None:
    outcome = run_local_sync("import no_such_module_xyz\ndef verify(env):\n    return 1\n", env=None)
    assert outcome.error is not None and outcome.error.type == "exception"
    assert "ModuleNotFoundError" in outcome.error.message


def test_sys_exit_in_verifier_is_an_exception_not_an_exit() -> None:
    outcome = run_local_sync("import sys\ndef verify(env):\n    sys.exit(3)\n", env=None)
    assert outcome.error is not None and outcome.error.type == "exception"
    assert outcome.error.message == "SystemExit: 3"


def test_memory_error_is_memory_limit() -> None:
    outcome = run_local_sync("def verify(env):\n    raise MemoryError()\n", env=None)
    assert outcome.error is not None and outcome.error.type == "memory_limit"


def test_run_local_captures_stdout_and_restores_it() -> None:
    before = sys.stdout
    outcome = run_local_sync("def verify(env):\n    print('a')\n    print('b')\n    return 0\n", env=None)
    assert outcome.stdout == "a\nb\n"
    assert outcome.score == 0.0 and outcome.success is True
    assert sys.stdout is before
    assert outcome.execution_time_ms > 0


# -- the verifier's module ---------------------------------------------------------------------

DATACLASS_CODE = (
    "import pickle, sys, typing\n"
    "from dataclasses import dataclass\n"
    "from typing import ClassVar\n"
    "@dataclass\n"
    "class Row:\n"
    "    name: 'str'\n"
    "    limit: ClassVar[int] = 1\n"
    "class Box:\n"
    "    row: 'Row'\n"
    "def verify(env):\n"
    "    row = pickle.loads(pickle.dumps(Row('a')))\n"
    "    assert typing.get_type_hints(Box) == {'row': Row}\n"
    "    return {'score': 1, 'row': repr(row), 'module': type(sys.modules[__name__]).__name__}\n"
)


def test_run_local_registers_the_verifier_module_only_while_it_runs() -> None:
    outcome = run_local_sync(DATACLASS_CODE, env=None)
    assert outcome.error is None, outcome.error
    assert outcome.result == {"score": 1, "row": "Row(name='a')", "module": "_ModuleView"}
    assert "verifier" not in sys.modules


async def test_awaited_run_local_registers_the_verifier_module_too() -> None:
    outcome = await run_local(DATACLASS_CODE, env=None)
    assert outcome.error is None, outcome.error
    assert "verifier" not in sys.modules


def test_a_real_module_of_the_same_name_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    real = type(sys)("verifier")
    monkeypatch.setitem(sys.modules, "verifier", real)
    code = (
        "import sys\n"
        "def verify(env):\n"
        "    return {'score': 1, 'own': vars(sys.modules['verifier']) is globals()}\n"
    )
    outcome = run_local_sync(code, None)
    assert outcome.result == {"score": 1, "own": False}
    assert sys.modules["verifier"] is real


# -- async verifiers ---------------------------------------------------------------------------

ASYNC_CODE = (
    "import asyncio\n"
    "async def verify(env, final_answer=None):\n"
    "    await asyncio.sleep(0)\n"
    "    return 1.0 if final_answer == 'yes' else 0.0\n"
)


def test_run_local_awaits_async_verify_without_a_loop() -> None:
    assert run_local_sync(ASYNC_CODE, env=None, final_answer="yes").score == 1.0


async def test_run_local_inside_a_running_loop_does_not_nest_asyncio_run() -> None:
    """Regression: the SDK's sync verify called ``asyncio.run`` inside a running loop (a
    notebook, a trainer's loop) and failed with "cannot be called from a running event loop"."""
    asyncio.get_running_loop()
    outcome = run_local_sync(ASYNC_CODE, env=None, final_answer="yes")
    assert outcome.error is None, outcome.error
    assert outcome.score == 1.0


class _AsyncDatabase:
    def __init__(self, rows: list[list[Any]]) -> None:
        self._rows = rows

    async def query(self, sql: str, args: Any = None) -> QueryResult:
        await asyncio.sleep(0)
        return QueryResult(columns=["n"], rows=self._rows)


class _AsyncEnv:
    def db(self, name: str = "current") -> _AsyncDatabase:
        return _AsyncDatabase([[2]] if name == "current" else [[1]])


async def test_awaited_run_local_with_an_async_env() -> None:
    code = (
        "async def verify(env):\n"
        "    before = (await env.db('seed').query('select count(*)')).rows[0][0]\n"
        "    after = (await env.db('current').query('select count(*)')).rows[0][0]\n"
        "    print('users', before, '->', after)\n"
        "    return after == before + 1\n"
    )
    outcome = await run_local(code, env=_AsyncEnv())
    assert outcome.score == 1.0
    assert outcome.stdout == "users 1 -> 2\n"


async def test_awaited_run_local_reports_faults() -> None:
    outcome = await run_local("async def verify(env):\n    raise KeyError('x')\n", env=None)
    assert outcome.error is not None and outcome.error.type == "exception"
    assert outcome.error.message == "KeyError: 'x'"


# -- SQLite environment ------------------------------------------------------------------------


def test_sqlite_environment_query_rows_scalar(env: SQLiteEnvironment) -> None:
    current = env.db("current")
    result = current.query("SELECT id, name FROM users WHERE id >= ? ORDER BY id", [1])
    assert result == QueryResult(columns=["id", "name"], rows=[[1, "Ada"], [2, "Grace Hopper"]])
    assert current.rows("SELECT name FROM users WHERE id = ?", (2,)) == [{"name": "Grace Hopper"}]
    assert current.scalar("SELECT COUNT(*) FROM users") == 2
    assert current.scalar("SELECT name FROM users WHERE id = 99") is None
    assert env.db() is current  # "current" is the default and stays open


def test_sqlite_environment_is_read_only(env: SQLiteEnvironment) -> None:
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        env.db("current").query("DELETE FROM users")
    assert env.db("current").scalar("SELECT COUNT(*) FROM users") == 2


def test_sqlite_environment_writable_when_asked(tmp_path: Path) -> None:
    path = make_db(tmp_path / "w.db", [])
    with SQLiteEnvironment({"current": path}, read_only=False) as writable:
        writable.db().query("INSERT INTO users VALUES (1, 'x')")
    assert sqlite3.connect(path).execute("SELECT COUNT(*) FROM users").fetchone() == (1,)


def test_unknown_database_lists_known_names(env: SQLiteEnvironment) -> None:
    with pytest.raises(UnknownDatabaseError) as raised:
        env.db("staging")
    assert str(raised.value) == "no database named 'staging'; known databases: 'current', 'seed'"
    assert isinstance(raised.value, FleetError) and isinstance(raised.value, LookupError)


def test_missing_database_file(tmp_path: Path) -> None:
    environment = SQLiteEnvironment({"current": tmp_path / "absent.db"})
    with pytest.raises(FileNotFoundError, match="'current'"):
        environment.db().query("SELECT 1")
    assert not (tmp_path / "absent.db").exists()  # mode=ro never creates the file


def test_sqlite_environment_satisfies_the_protocol(env: SQLiteEnvironment) -> None:
    assert isinstance(env, Environment)


def test_local_verifier_compares_seed_and_current(env: SQLiteEnvironment) -> None:
    code = (
        "def verify(env: Environment, final_answer=None):\n"
        "    seed = {r['id'] for r in env.db('seed').rows('SELECT id FROM users')}\n"
        "    new = [r for r in env.db('current').rows('SELECT * FROM users') if r['id'] not in seed]\n"
        "    return len(new) == 1 and normalized_contains('grace hopper', new[0]['name'])\n"
    )
    assert run_local_sync(code, env).score == 1.0


# -- bundles -----------------------------------------------------------------------------------


def test_bundle_is_deterministic_regardless_of_the_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: the public SDK's bundle embedded the zip time, so the same code got a new
    sha256 on every call and the server never recognised an already-uploaded verifier."""
    code = "def verify(env):\n    return 1\n"
    first = bundle_verifier(code)
    fake_now = time.time() + 86_400 * 400
    monkeypatch.setattr(time, "time", lambda: fake_now)
    monkeypatch.setattr(time, "localtime", lambda secs=None: time.gmtime(fake_now))
    second = bundle_verifier(code)
    assert first == second
    assert bundle_sha256(code) == bundle_sha256(code)
    assert bundle_sha256(code) != bundle_sha256(code + "\n")
    assert len(bundle_sha256(code)) == 64


def test_bundle_contents() -> None:
    code = "def verify(env):\n    return 'é'\n"
    with zipfile.ZipFile(io.BytesIO(bundle_verifier(code))) as archive:
        (info,) = archive.infolist()
        assert info.filename == "verifier.py"
        assert info.date_time == (1980, 1, 1, 0, 0, 0)
        assert info.external_attr >> 16 == 0o100644
        assert info.compress_type == zipfile.ZIP_STORED
        assert archive.read("verifier.py").decode("utf-8") == code


# -- audit policy (unit level; the installed hook is tested in the sandbox tests) ----------------


@pytest.fixture
def policy(tmp_path: Path) -> SandboxPolicy:
    work = tmp_path / "work"
    work.mkdir()
    db = make_db(tmp_path / "current.db", [])
    stdlib = os.path.dirname(os.__file__)
    return SandboxPolicy(workdir=str(work), databases=[str(db)], read_roots=[stdlib])


def test_policy_open_rules(policy: SandboxPolicy, tmp_path: Path) -> None:
    work = tmp_path / "work"
    db = str(tmp_path / "current.db")
    assert policy.check("open", (str(work / "scratch.txt"), "w", 0)) is None
    assert policy.check("open", (db, "r", 0)) is None
    assert policy.check("open", (db + "-wal", "rb", 0)) is None
    assert policy.check("open", (db, "w", 0)) == f"open({db!r}, for writing)"
    assert policy.check("open", (os.__file__, "r", 0)) is None
    assert policy.check("open", (os.__file__, None, os.O_WRONLY)) is not None
    assert policy.check("open", ("/etc/passwd", "r", 0)) == "open('/etc/passwd')"
    assert policy.check("open", (str(tmp_path / "other.db"), "r", 0)) is not None
    assert policy.check("open", (3, "r", 0)) is None  # an already-open descriptor


def test_policy_resolves_symlinks(policy: SandboxPolicy, tmp_path: Path) -> None:
    link = tmp_path / "work" / "innocent.txt"
    link.symlink_to("/etc/passwd")
    assert policy.check("open", (str(link), "r", 0)) == "open('/etc/passwd')"
    assert policy.check("os.symlink", ("/etc/passwd", str(link), -1)) is not None


@pytest.mark.parametrize(
    "event",
    [
        "subprocess.Popen",
        "os.system",
        "os.exec",
        "os.fork",
        "os.posix_spawn",
        "os.kill",
        "socket.connect",
        "socket.bind",
        "socket.getaddrinfo",
        "ctypes.dlopen",
        "resource.setrlimit",
        "sqlite3.connect",
        "gc.get_objects",
    ],
)
def test_policy_denies(policy: SandboxPolicy, event: str) -> None:
    assert policy.check(event, ("x",)) is not None


def test_policy_allows_harmless_events(policy: SandboxPolicy, tmp_path: Path) -> None:
    assert policy.check("socket.__new__", (None, 1, 1, 0)) is None  # asyncio's socketpair
    assert policy.check("import", ("json", None, [], [], [])) is None
    assert policy.check("import", ("_posixsubprocess", None, [], [], [])) == "import of _posixsubprocess"
    assert policy.check("os.listdir", (str(tmp_path / "work"),)) is None
    assert policy.check("os.listdir", ("/etc",)) is not None
    assert policy.check("os.remove", (str(tmp_path / "work" / "f"), -1)) is None
    assert policy.check("os.remove", (str(tmp_path / "current.db"), -1)) is not None
    assert DENIED_PREFIX == "denied by the verifier sandbox"


# -- package hygiene ---------------------------------------------------------------------------

RUNTIME_STDLIB_ONLY = ["_compat.py", "_namespace.py", "_sqlite.py", "_entry.py", "_query.py", "_snapshot.py"]
"""The verifier runtime's modules the sandbox child loads (as ``fleet_sdk.verifiers``, by path)."""
SANDBOX_STDLIB_ONLY = [
    *("_audit.py", "_runner.py", "_child.py", "_plain_pickle.py"),
    *("_zygote_main.py", "_zygote_child.py", "_seccomp.py", "_pickled_args.py"),
]
"""The sandbox's own modules the child loads (``fleet_local/sandbox``)."""
STDLIB_ONLY = [
    *(VERIFIERS_DIR / name for name in RUNTIME_STDLIB_ONLY),
    *(SANDBOX_DIR / name for name in SANDBOX_STDLIB_ONLY),
]
OURS = [*RUNTIME_STDLIB_ONLY, "_outcome.py", "_local.py", "_bundle.py", "__init__.py"]


def _imported_roots(path: Path) -> set[str]:
    """Top-level packages ``path`` imports; the runtime's stdlib-only modules count as the stdlib."""
    child_modules = {f"fleet_sdk.verifiers.{name.removesuffix('.py')}" for name in RUNTIME_STDLIB_ONLY}
    roots: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module not in child_modules:
            roots.add(str(node.module).split(".")[0])
    return roots


@pytest.mark.parametrize("path", STDLIB_ONLY, ids=lambda path: path.name)
def test_child_modules_import_only_the_stdlib(path: Path) -> None:
    roots = _imported_roots(path)
    assert roots <= set(sys.stdlib_module_names) | {"__future__"}, roots - set(sys.stdlib_module_names)


@pytest.mark.parametrize("name", OURS)
def test_verifier_modules_stay_light(name: str) -> None:
    roots = _imported_roots(VERIFIERS_DIR / name)
    assert roots <= set(sys.stdlib_module_names) | {"__future__", "pydantic"}


def _decorated(fn):  # type: ignore[no-untyped-def]
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
        return fn(*args, **kwargs)

    return wrapper


class _CallableVerifier:
    def __call__(self, env: object, final_answer: object = None) -> float:
        return 1.0


def _posonly(env, /):  # type: ignore[no-untyped-def]
    return env


@pytest.mark.parametrize(
    "entry",
    [
        lambda: None,
        lambda env: None,
        lambda env, final_answer=None: None,
        lambda env, final_answer, extra=1: None,
        lambda *args: None,
        lambda env, *args: None,
        lambda env, *, final_answer=None: None,
        lambda **kwargs: None,
        _posonly,
        _decorated(lambda env: None),
        functools.partial(lambda a, env, final_answer: None, 1),
        _CallableVerifier(),
    ],
)
def test_entry_point_arguments_match_inspect_signature(entry: Any) -> None:
    """The plain-function path reads the code object; it must agree with ``inspect.signature``."""
    import inspect

    from fleet_sdk.verifiers._entry import _positional

    parameters = list(inspect.signature(entry).parameters.values())
    if any(p.kind is p.VAR_POSITIONAL for p in parameters):
        expected = 3
    else:
        expected = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in parameters)
    candidates = ("before", "after", "transcript")
    assert _positional(entry, candidates) == candidates[:expected]
    assert _positional(entry, candidates[:2]) == candidates[: min(2, expected)]


def test_query_result_is_an_immutable_value() -> None:
    from fleet_sdk.verifiers import QueryResult

    result = QueryResult(["id", "name"], [[1, "a"]])
    assert result == QueryResult(columns=["id", "name"], rows=[[1, "a"]])
    assert result != QueryResult(["id", "name"])
    assert QueryResult(["id"]).rows == []
    assert repr(result) == "QueryResult(columns=['id', 'name'], rows=[[1, 'a']])"
    assert result.as_dicts() == [{"id": 1, "name": "a"}]
    with pytest.raises(AttributeError, match="immutable"):
        result.rows = []  # type: ignore[misc]
    with pytest.raises(TypeError):
        hash(result)


@pytest.mark.parametrize("name", ["plain.db", "with space?#%.db", "ünï.db"])
def test_the_read_only_uri_is_pathlibs(tmp_path: Path, name: str) -> None:
    """The sandbox builds the ``file:`` URI without pathlib; it must be the one pathlib makes."""
    from fleet_sdk.verifiers import SQLiteDatabase
    from fleet_sdk.verifiers._sqlite import _file_uri

    path = tmp_path / name
    make_db(path, [(7, "a")])
    assert _file_uri(str(path.resolve())) == path.resolve().as_uri()
    database = SQLiteDatabase(path)
    assert database.path == path
    assert database.query("SELECT id FROM users").rows == [[7]]
    database.close()


def test_verifier_annotations_are_not_evaluated() -> None:
    """Verifiers written for the public SDK annotate with names they never import (``env: Any``);
    their annotations stay unevaluated, in process and in the sandbox alike."""
    code = (
        "def verify(env: Any, final_answer: Optional[str] = None) -> float:\n"
        "    return {'score': 1.0, 'annotation': verify.__annotations__['env']}\n"
    )
    assert run_local_sync(code, env=None).result == {"score": 1.0, "annotation": "Any"}
    assert run_sandboxed_sync(code, databases={}).result == {"score": 1.0, "annotation": "Any"}
