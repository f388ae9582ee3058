"""A zygote run's clean-up closes its pipe ends on the loop, without a worker-thread hop.

A jailed run without a cgroup leaves nothing on the file system to remove: its clean-up is a few
``close()`` calls, cheaper than the hop (a thread wake-up, a GIL hand-off, a wake-up of the loop)
it used to take on every verifier run. A run that does leave a directory (unjailed) still removes
it in a worker thread.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _jail_runs import using_runner

from fleet_local.sandbox import _sandbox, jail_status
from fleet_local.sandbox._jail import JailStatus

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="the OS jail is Linux's"),
]


@pytest.fixture
def hops(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the functions run through ``asyncio.to_thread`` while the test runs."""
    names: list[str] = []
    original = asyncio.to_thread

    async def counting(func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        names.append(getattr(func, "__name__", repr(func)))
        return await original(func, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", counting)
    return names


def _prepare(databases: dict[str, str], *, allow_unjailed: bool = False, **kwargs: Any) -> Any:
    return _sandbox._prepare(
        "def verify(env):\n    return 0.5\n",
        databases=databases,
        final_answer=None,
        function_name=None,
        timeout=20.0,
        memory_mb=512,
        allow_unjailed=allow_unjailed,
        **kwargs,
    )


async def test_a_zygote_run_is_cleaned_up_without_a_thread_hop(
    databases: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
    zygote_refused: str | None,
    hops: list[str],
) -> None:
    """The run's result comes back, its pipe ends are closed, and nothing went to a thread."""
    if zygote_refused is not None:
        pytest.skip(zygote_refused)
    if jail_status().cgroup_parent is not None:
        pytest.skip("runs here get a cgroup, removed in a worker thread")
    with using_runner("zygote", tmp_path_factory):
        job = _prepare(databases)
        assert job.zygote is not None and job.cgroup is None and job.root is None
        outcome = await _sandbox._run_job_async(job)
    assert outcome.score == 0.5, outcome.error
    assert job.result_fd is None and job.child_fds == []
    assert "cleanup" not in hops


async def test_a_run_leaving_a_directory_removes_it_in_a_thread(
    databases: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hops: list[str]
) -> None:
    """An unjailed run's temporary directory is removed off the loop, and is gone afterwards."""
    monkeypatch.setattr(_sandbox, "jail_status", lambda: JailStatus(available=False, reason="none here"))
    job = _prepare(databases, allow_unjailed=True, scratch_root=tmp_path)
    assert job.root is not None and job.root.is_dir()
    outcome = await _sandbox._run_job_async(job)
    assert outcome.score == 0.5, outcome.error
    assert not job.root.exists()
    assert "cleanup" in hops
