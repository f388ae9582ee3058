"""Developer and CI entry points:
``nox -s quick|tests|mcp|contracts|fidelity|record|generate|lint|typecheck``.

Each session installs the project with the extra it needs and no more (``pyproject.toml``):
the pytest sessions, ``fidelity`` and ``record`` install ``test`` (``tests`` adds the trainer
frameworks), ``generate`` ``codegen``, ``lint`` ``lint``, ``typecheck`` ``typecheck``. Only
``tests`` installs OpenEnv and SkyRL, and only ``tests`` and ``typecheck`` Ray. The ``codegen``
extra pins the tools whose output is committed (``datamodel-code-generator``, ``ruff``), so
``nox -s generate`` reproduces ``generated/fleet_generated/`` byte for byte on any machine.
"""

from __future__ import annotations

import nox

PYTHON = "3.11"
LINT_TARGETS = (
    "fleet_sdk",
    "fleet_local",
    "codegen",
    "tests",
    "contracts",
    "benchmarks",
    "noxfile.py",
    "conftest.py",
)
QUICK = "not slow and not browser and not integrations and not e2e"
"""The quick subset's marker expression (markers: conftest.py at the root, tests/README.md)."""

nox.options.default_venv_backend = "venv"
nox.options.reuse_venv = "yes"
nox.options.sessions = ["lint", "typecheck", "tests", "contracts"]


def _install(session: nox.Session, *extras: str) -> None:
    session.install("-e", f".[{','.join(extras)}]")


@nox.session(python=PYTHON)
def quick(session: nox.Session) -> None:
    """The fast loop: the tests none of the markers slow, browser, integrations and e2e marks
    (under a minute on two quiet cores); extra arguments go to pytest."""
    _install(session, "test")
    # The trainer frameworks are not installed here: -m leaves tests/integrations out, and the
    # root conftest.py then does not import it at all.
    session.run("pytest", "-m", QUICK, *session.posargs)


@nox.session(python=PYTHON)
def tests(session: nox.Session) -> None:
    """Unit tests (``tests/``); extra arguments go to pytest, e.g. ``nox -s tests -- -k codegen``."""
    _install(session, "test", "openenv", "skyrl", "ray")
    session.run("pytest", *(session.posargs or ["tests"]))


MCP_TESTS = (
    "tests/test_mcp_results.py",
    "tests/test_tool_shapes.py",
    "tests/local/test_mcp.py",
    "tests/local/test_mcp_short_calls.py",
    "tests/local/test_mcp_endpoint_sessions.py",
    "tests/e2e/test_mcp_session_reuse.py",
    "tests/e2e/test_mcp_tool_retries.py",
    # The benchmark's ClientSession transport (benchmarks/_pool_transport.py) on both majors.
    "tests/e2e/test_client_session_on_shared_pool.py",
)


@nox.session(python=PYTHON)
@nox.parametrize("major", ["1", "2"])
def mcp(session: nox.Session, major: str) -> None:
    """MCP client and local MCP server on the latest ``mcp`` of a major: ``nox -s "mcp(major='1')"``.

    The test extra resolves to the latest 2.x (what ``tests`` runs); this keeps 1.x working too.
    """
    _install(session, "test")
    session.install(f"mcp>={major},<{int(major) + 1}")
    session.run("pytest", *(session.posargs or MCP_TESTS))


@nox.session(python=PYTHON)
def contracts(session: nox.Session) -> None:
    """Contract tests (``contracts/``); like any pytest run, it fails when it collects no test."""
    _install(session, "test")
    # The normal test command fuzzes 5 examples per operation; this session digs deeper.
    env = {"FLEET_CONTRACT_EXAMPLES": session.env.get("FLEET_CONTRACT_EXAMPLES", "30")}
    session.run("pytest", "contracts", *session.posargs, env=env)


@nox.session(python=PYTHON)
def fidelity(session: nox.Session) -> None:
    """Diff ``schemas/`` against the public Fleet SDK's models (see ``docs/wire-fidelity.md``).

    Prints every difference; fails on one that ``contracts/fidelity_allowlist.yaml`` does not
    list. The same check runs in the normal test command (``contracts/test_fidelity.py``).
    """
    _install(session, "test")
    session.run("python", "-m", "contracts.fidelity", *session.posargs)


@nox.session(python=PYTHON)
def record(session: nox.Session) -> None:
    """Re-record ``contracts/cassettes/`` (SDK on production URLs, local server in-process, offline).

    ``-- <scenario> ...`` records only those; ``-- --list`` lists them. Not a default session.
    """
    _install(session, "test")
    session.run("python", "-m", "contracts.recording", *session.posargs)


@nox.session(python=PYTHON)
def generate(session: nox.Session) -> None:
    """Regenerate ``generated/fleet_generated`` from ``schemas/`` and print the API changes since the
    previous commit, breaking ones marked (``-- --check`` only diffs, ``-- --against REV``)."""
    _install(session, "codegen")
    session.run("python", "-m", "codegen", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """``ruff check``, ``ruff format --check``, ``lint-imports`` (the packages' layers) and codegen
    determinism (a drift check under another hash seed). Static checks run here and in
    ``.ci/run``, not inside pytest."""
    _install(session, "lint")
    session.run("ruff", "check", *LINT_TARGETS)
    session.run("ruff", "format", "--check", *LINT_TARGETS)
    session.run("lint-imports")
    session.run("python", "-m", "codegen", "--check", env={"PYTHONHASHSEED": "12345"})


@nox.session(python=PYTHON)
def typecheck(session: nox.Session) -> None:
    """Strict ``mypy`` (pyproject config) on ``fleet_sdk``, the generated package and the codegen
    fixture surface."""
    _install(session, "typecheck")
    session.run("mypy", *session.posargs)
    session.run("python", "-m", "codegen.typecheck_fixture")
    session.run("python", "tests/typecheck_readme.py")
