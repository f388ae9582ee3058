"""The runner fixture: the jail-property tests run against both ways a jailed run starts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fleet_local.sandbox import _sandbox, _zygote, jail_status


@pytest.fixture(params=["fresh", "zygote"])
def verifier_runner(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """Run the test's verifiers with a fresh jailed interpreter each, or forked from the zygote.

    For ``zygote`` the test's temporary directories are the database roots, and the test fails if
    any of its runs fell back to a fresh interpreter (the zygote must serve every one itself).
    """
    runner: str = request.param
    if runner == "zygote" and not _sandbox._zygote_serves_here(jail_status()):
        pytest.skip(f"the zygote cannot run here: {jail_status().summary()}")
    _zygote.set_runner(runner)
    _zygote.set_database_roots([tmp_path_factory.getbasetemp()])
    fallbacks = _sandbox._fallback_count[0]
    try:
        yield runner
    finally:
        _zygote.set_runner(None)
    if runner == "zygote":
        assert _sandbox._fallback_count[0] == fallbacks, f"a run fell back: {list(_sandbox._fallbacks)}"
