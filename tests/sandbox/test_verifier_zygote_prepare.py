"""What the server makes for a run the zygote serves: no bubblewrap command line and no seccomp
pipe (the zygote's run loads the filter itself), until the run falls back to a fresh one, which
then gets both, and with them every limit of a fresh run."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from _jail_runs import probes, using_runner

from fleet_local.sandbox import _runner_choice, _sandbox, _zygote, jail_status
from fleet_local.sandbox._zygote_child import RESULT_FD

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="the OS jail is Linux's"),
    pytest.mark.skipif(
        not _sandbox._zygote_serves_here(jail_status()), reason="the zygote needs every part of the jail"
    ),
]

NO_USER_NAMESPACE = """
import ctypes, errno
def verify(env):
    libc = ctypes.CDLL(None, use_errno=True)
    result = libc.unshare(0x10000000)  # CLONE_NEWUSER
    return {"score": 1, "unshare": result, "errno": errno.errorcode.get(ctypes.get_errno())}
"""


@pytest.fixture(autouse=True)
def zygote(tmp_path_factory: pytest.TempPathFactory, zygote_refused: str | None) -> Any:
    if zygote_refused is not None:
        pytest.skip(zygote_refused)
    with using_runner("zygote", tmp_path_factory):
        yield


def prepare(code: str, databases: dict[str, str], *, audit_hook: bool = True) -> Any:
    return _sandbox._prepare(
        code,
        databases=databases,
        final_answer=None,
        function_name=None,
        timeout=20.0,
        memory_mb=512,
        allow_unjailed=False,
        audit_hook=audit_hook,
    )


async def test_a_run_the_zygote_serves_gets_no_fresh_command_line(databases: dict[str, str]) -> None:
    """The job holds the zygote's payload (its result on descriptor 3) and only the result
    pipe's write end; it runs in the zygote to the verifier's result."""
    job = prepare("def verify(env):\n    return 0.5\n", databases)
    assert job.zygote is not None
    assert job.argv == [] and job.payload == b""
    assert len(job.child_fds) == 1  # the result pipe's write end; no seccomp pipe
    assert json.loads(job.zygote.payload)["result_fd"] == RESULT_FD
    fallbacks = _sandbox._fallback_count[0]
    outcome = await _sandbox._run_job_async(job)
    assert outcome.score == 0.5, outcome.error
    assert _sandbox._fallback_count[0] == fallbacks


def test_a_fresh_run_still_gets_its_command_line_and_filter(databases: dict[str, str]) -> None:
    _zygote.set_runner("fresh")
    job = prepare("def verify(env):\n    return 1\n", databases)
    try:
        assert job.zygote is None
        assert job.argv[0] == jail_status().bwrap and "--seccomp" in job.argv
        assert len(job.child_fds) == 2  # the result pipe's write end and the filter
        assert json.loads(job.payload)["result_fd"] == job.child_fds[0]
    finally:
        job.cleanup()


def test_a_run_falling_back_is_made_fresh_with_its_filter(databases: dict[str, str], tmp_path: Path) -> None:
    """A run the zygote cannot set up (a "database" that is a directory) runs fresh with the
    command line made only then: with the seccomp filter, which refuses a user namespace even
    with the audit hook off."""
    folder = tmp_path / "folder.db"
    folder.mkdir()
    fallbacks = _sandbox._fallback_count[0]
    job = prepare(NO_USER_NAMESPACE, {**databases, "odd": str(folder)}, audit_hook=False)
    try:
        assert job.zygote is not None and job.argv == []
        outcome = _sandbox._run_job(job)
        assert _sandbox._fallback_count[0] == fallbacks + 1
        assert "--seccomp" in job.argv
        assert probes(outcome) == {"score": 1, "unshare": -1, "errno": "EPERM"}
        assert outcome.sandbox == "os_jail"
    finally:
        _sandbox._fallback_count[0] = fallbacks
        _runner_choice._settings.pop("disabled", None)
