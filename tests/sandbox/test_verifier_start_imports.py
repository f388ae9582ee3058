"""What a jailed verifier run imports before the verifier's code runs, and that the rest still works.

Every run is a fresh interpreter, so each standard-library module the runner loads is paid on
every episode. A plain run (a verifier reading its databases and returning a number) loads
neither ``ast``'s Python half, ``threading``, ``numbers``, ``signal`` nor ``importlib``, nor any
of the heavier modules only rare paths need. Each of them is still there for verifier code that
imports it, and the paths that need them (a ``Fraction`` score, ``import signal``...) still work
inside the jail, under the audit hook.
"""

from __future__ import annotations

import ast
import sys
from typing import Any

import pytest

from fleet_local.sandbox import run_sandboxed_sync
from fleet_sdk.verifiers._entry import parse_verifier

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="the sandbox child is tested on Linux"),
    pytest.mark.usefixtures("verifier_runner"),
]

# Loaded by no plain run. The first five were loaded by every run until the runner stopped
# needing them at start-up; the rest are heavy modules only rare paths import (pickled
# arguments, zipped bundles, async verifiers, tracebacks...).
NOT_AT_START = (
    "ast",
    "threading",
    "numbers",
    "signal",
    "importlib",
    "asyncio",
    "base64",
    "dataclasses",
    "decimal",
    "fractions",
    "hashlib",
    "inspect",
    "linecache",
    "logging",
    "pathlib",
    "pickle",
    "_pickle",
    "random",
    "selectors",
    "shutil",
    "socket",
    "struct",
    "subprocess",
    "tempfile",
    "tokenize",
    "traceback",
    "urllib",
    "weakref",
    "zipfile",
)

# The names go in as the final answer: "asyncio" in the code's own text would make the runner
# load asyncio before the hook, as for any verifier that mentions async (``_runner._prepare_imports``).
_PLAIN = (
    "import sys\n"
    "def verify(env, final_answer=None):\n"
    "    added = env.db('current').query('SELECT name FROM users WHERE id = ?', [2]).rows\n"
    "    before = env.db('seed').query('SELECT count(*) FROM users', []).rows[0][0]\n"
    "    loaded = [m for m in final_answer if m in sys.modules]\n"
    "    return {'score': float(added == [['Grace Hopper']] and before == 1), 'loaded': loaded}\n"
)


def _run(code: str, databases: dict[str, str], final_answer: Any = None) -> Any:
    outcome = run_sandboxed_sync(code, databases=databases, final_answer=final_answer)
    assert outcome.sandbox == "os_jail+audit_hook"
    assert outcome.error is None, outcome.error
    return outcome


def test_a_plain_run_loads_none_of_the_modules_it_does_not_need(databases: dict[str, str]) -> None:
    """The runner imported ``ast`` (for ``ast.parse``; the builtin ``_ast`` does it), ``threading``
    (for a ``threading.local`` and an async bridge), ``numbers`` (to check a score),
    ``signal`` (for one ``signal.signal`` call) and ``importlib`` (for one ``import_module``)
    on every run; with the collector's passes while the runner loaded (now off meanwhile),
    about 3 ms of CPU of a ~30 ms run, paid per episode."""
    outcome = _run(_PLAIN, databases, final_answer=list(NOT_AT_START))
    assert outcome.score == 1.0
    assert outcome.result["loaded"] == []


def test_a_verifier_that_only_mentions_awaiting_does_not_load_asyncio(databases: dict[str, str]) -> None:
    """Any "await" in the code's text (a bundled verifier's "awaiting this person's response")
    made the runner import asyncio before the hook: about as much CPU as the rest of the run.
    ``await`` cannot be used without ``async def``, so only "async" counts now."""
    code = (
        "import sys\n"
        "def verify(env, final_answer):\n"
        '    """Invitations still awaiting a response; await nothing."""\n'
        "    return {'score': 1, 'loaded': [m for m in final_answer if m in sys.modules]}\n"
    )
    assert _run(code, databases, ["asyncio", "ssl"]).result == {"score": 1, "loaded": []}


def test_async_verifiers_still_get_asyncio_before_the_hook(databases: dict[str, str]) -> None:
    code = (
        "import sys\n"
        "async def verify(env):\n"
        "    await asyncio.sleep(0)\n"
        "    return {'score': 1, 'loaded': 'asyncio' in sys.modules}\n"
        "asyncio = sys.modules['asyncio']\n"
    )
    assert _run(code, databases).result == {"score": 1, "loaded": True}


def test_the_garbage_collector_is_on_when_the_verifier_runs(databases: dict[str, str]) -> None:
    """The child loads the runner with the collector off (nearly all the runner's modules make is
    kept); the verifier must get it on, as in any interpreter, or its cyclic garbage would count
    against its memory limit until it ended."""
    code = (
        "import gc\n"
        "def verify(env):\n"
        "    return {'score': 1, 'enabled': gc.isenabled(), 'threshold': list(gc.get_threshold())}\n"
    )
    result = _run(code, databases).result
    assert result["enabled"] is True
    assert result["threshold"][0] > 0


def test_signal_is_importable_with_the_file_size_signal_still_ignored(databases: dict[str, str]) -> None:
    """The runner ignores SIGXFSZ (so writing past the file-size limit fails with an error
    instead of killing the run) through ``_signal``: a verifier importing ``signal`` sees the
    same disposition, and still no ``pidfd_send_signal`` (it raises no audit event)."""
    code = (
        "import signal\n"
        "def verify(env):\n"
        "    return {'score': 1, 'ignored': signal.getsignal(signal.SIGXFSZ) is signal.SIG_IGN,\n"
        "            'pidfd': hasattr(signal, 'pidfd_send_signal'),\n"
        "            'enum': type(signal.SIGTERM).__name__}\n"
    )
    assert _run(code, databases).result == {"score": 1, "ignored": True, "pidfd": False, "enum": "Signals"}


def test_what_the_runner_no_longer_loads_is_importable_by_the_verifier(databases: dict[str, str]) -> None:
    code = (
        "import ast, importlib, threading\n"
        "def verify(env):\n"
        "    tree = ast.parse('x = 1')\n"
        "    seen = []\n"
        "    json = importlib.import_module('json')\n"
        "    worker = threading.Thread(target=lambda: seen.append(json.dumps(1)))\n"
        "    worker.start()\n"
        "    worker.join()\n"
        "    return {'score': 1, 'tree': type(tree.body[0]).__name__, 'thread': seen}\n"
    )
    assert _run(code, databases).result == {"score": 1, "tree": "Assign", "thread": ["1"]}


@pytest.mark.parametrize(
    ("returned", "score"),
    [
        ("Fraction(1, 2)", 0.5),
        ("Decimal('0.25')", None),  # a numbers.Number but not a Real: refused, as it always was
        ("Half(1)", 1.0),  # an int subclass: numbers.Real, not one of the plain types
        ("{'score': Fraction(3, 4)}", 0.75),
        ("Scored()", 0.125),  # an object with a .score attribute
    ],
)
def test_scores_that_need_numbers_are_read_inside_the_jail(
    databases: dict[str, str], returned: str, score: float | None
) -> None:
    """``numbers`` now loads while the result is scored, after the audit hook is on, and only
    for a result that is not a plain ``int``, ``float`` or ``bool``."""
    code = (
        "from decimal import Decimal\n"
        "from fractions import Fraction\n"
        "class Half(int):\n"
        "    pass\n"
        "class Scored:\n"
        "    score = 0.125\n"
        "def verify(env):\n"
        f"    return {returned}\n"
    )
    outcome = run_sandboxed_sync(code, databases=databases)
    if score is None:
        assert outcome.error is not None and outcome.error.type == "invalid_result", outcome.error
    else:
        assert outcome.error is None and outcome.score == score, outcome.error


def test_a_string_result_is_still_refused(databases: dict[str, str]) -> None:
    outcome = run_sandboxed_sync("def verify(env):\n    return '1.0'\n", databases=databases)
    assert outcome.error is not None and outcome.error.type == "invalid_result"
    assert "got str" in outcome.error.message


@pytest.mark.parametrize(
    "code",
    [
        "def verify(env: Environment, final_answer: str | None = None) -> float:\n    return 1.0\n",
        "async def check(env):\n    async with env as e:\n        return [x async for x in e]\n",
        "match x:\n    case {'a': [1, *rest]} if rest:\n        y = f'{rest!r:>{width}}'\n",
        "from __future__ import annotations\nclass A:\n    x: 'B' = 1  # type: ignore\n",
        "lambda: (yield)\nglobal g\ntry:\n    pass\nexcept* ValueError:\n    pass\n",
    ],
)
def test_the_verifier_is_parsed_as_ast_parse_parses_it(code: str) -> None:
    """``parse_verifier`` calls ``compile(..., PyCF_ONLY_AST)`` itself instead of ``ast.parse``;
    the tree is the same, positions included (no compiler flag of the runtime is inherited)."""
    ours = parse_verifier(code)
    assert isinstance(ours, ast.Module)
    expected = ast.parse(code, filename="<verifier>")
    assert ast.dump(ours, include_attributes=True) == ast.dump(expected, include_attributes=True)
