"""The runner fixture: the jail-property tests run against both ways a jailed run starts."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator

import pytest
from _jail_runs import using_runner

from fleet_local.sandbox import _sandbox, _zygote, jail_status, run_sandboxed_sync


@pytest.fixture(scope="session")
def zygote_refused(tmp_path_factory: pytest.TempPathFactory) -> str | None:
    """Why this host refuses what the zygote's runs need (a kernel or security module refusing
    a nested user namespace, say), or ``None``. Only a refusal of the namespace set-up itself
    counts: any other fallback leaves the zygote on, and the tests below fail on it."""
    if not _sandbox._zygote_serves_here(jail_status()):
        return f"the zygote cannot run here: {jail_status().summary()}"
    root = tmp_path_factory.mktemp("zygote-probe")
    sqlite3.connect(root / "probe.db").close()
    _zygote.set_runner("zygote")
    _zygote.set_database_roots([tmp_path_factory.getbasetemp()])
    try:
        run_sandboxed_sync("def verify(env):\n    return 1\n", databases={"probe": str(root / "probe.db")})
    finally:
        _zygote.set_runner(None)
    reason = _zygote.disabled_reason()
    refusals = ("PermissionError", "OSError: [Errno 1]", "OSError: [Errno 13]", "OSError: [Errno 28]")
    if reason is not None and ("unshare" in reason or reason.startswith(refusals)):
        return f"this host refuses the zygote's namespaces: {reason}"
    return None


@pytest.fixture(params=["fresh", "zygote"])
def verifier_runner(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, zygote_refused: str | None
) -> Iterator[str]:
    """Run the test's verifiers with a fresh jailed interpreter each, or forked from the zygote.

    For ``zygote`` the test's temporary directories are the database roots, and the test fails if
    any of its runs fell back to a fresh interpreter (the zygote must serve every one itself).
    """
    runner: str = request.param
    if runner == "zygote" and zygote_refused is not None:
        pytest.skip(zygote_refused)
    fallbacks = _sandbox._fallback_count[0]
    with using_runner(runner, tmp_path_factory):
        yield runner
    if runner == "zygote":
        assert _sandbox._fallback_count[0] == fallbacks, f"a run fell back: {list(_sandbox._fallbacks)}"
        assert _zygote.disabled_reason() is None, "the zygote turned itself off"
