"""Every sync API is its async source's twin: the same public methods, parameters and types.

Sync methods are derived with ``fleet_sdk._twin`` (``sync_method``/``sync_view``/
``sync_function``); this test compares each pair as a user sees it, so a method added to one
side only, or a signature that drifts, fails here.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from fleet_local.sandbox import run_sandboxed, run_sandboxed_sync
from fleet_sdk import AsyncDatabase, AsyncEnv, AsyncFleet, Database, Env, Fleet, TaskEnv
from fleet_sdk._tasks_resource import AsyncTasks, Tasks
from fleet_sdk._twin import sync_annotation
from fleet_sdk.episodes import play_episode, play_episode_sync
from fleet_sdk.evaluation import evaluate_job, evaluate_job_sync, run_evaluation, run_evaluation_sync
from fleet_sdk.remote_verifier import run_remote, run_remote_sync
from fleet_sdk.traces import AsyncTraces, Traces
from fleet_sdk.verifiers import run_local, run_local_sync

CLASS_PAIRS = [
    (Fleet, AsyncFleet),
    (Env, AsyncEnv),
    (Database, AsyncDatabase),
    (Traces, AsyncTraces),
    (Tasks, AsyncTasks),
]

# Context-manager protocols differ by design (``with`` vs ``async with``).
_PROTOCOLS = {"__enter__", "__exit__", "__aenter__", "__aexit__"}


def _public_methods(cls: type) -> dict[str, Callable[..., Any]]:
    methods = {}
    for name in dir(cls):
        if name.startswith("_") or name in _PROTOCOLS:
            continue
        value = inspect.getattr_static(cls, name)
        if isinstance(value, property):
            continue
        member = getattr(cls, name)
        if callable(member):
            methods[name] = member
    return methods


def _expected_sync(signature: inspect.Signature) -> inspect.Signature:
    """The async signature as its sync twin must read: ``Async*`` names mapped to their twins."""
    parameters = [p.replace(annotation=sync_annotation(p.annotation)) for p in signature.parameters.values()]
    return signature.replace(
        parameters=parameters, return_annotation=sync_annotation(signature.return_annotation)
    )


def _same(sync: Callable[..., Any], source: Callable[..., Any]) -> None:
    expected = _expected_sync(inspect.signature(source))
    actual = inspect.signature(sync)
    assert actual == expected, f"{sync.__qualname__}{actual} != {expected}"


@pytest.mark.parametrize(("sync_cls", "async_cls"), CLASS_PAIRS, ids=lambda c: c.__name__)
def test_sync_class_has_every_async_method_with_the_same_signature(sync_cls: type, async_cls: type) -> None:
    sync_methods, async_methods = _public_methods(sync_cls), _public_methods(async_cls)
    assert sorted(sync_methods) == sorted(async_methods)
    for name, source in async_methods.items():
        _same(sync_methods[name], source)


@pytest.mark.parametrize(("sync_cls", "async_cls"), CLASS_PAIRS, ids=lambda c: c.__name__)
def test_sync_class_has_every_async_property(sync_cls: type, async_cls: type) -> None:
    def properties(cls: type) -> set[str]:
        return {
            n
            for n in dir(cls)
            if not n.startswith("_") and isinstance(inspect.getattr_static(cls, n), property)
        }

    assert properties(async_cls) <= properties(sync_cls)


def test_task_env_sync_methods_mirror_their_async_forms() -> None:
    for name in ("reset", "step", "close"):
        _same(getattr(TaskEnv, name), getattr(TaskEnv, f"{name}_async"))
    assert TaskEnv.reset.__doc__ == TaskEnv.reset_async.__doc__


@pytest.mark.parametrize(
    ("sync", "source"),
    [
        (run_remote_sync, run_remote),
        (run_sandboxed_sync, run_sandboxed),
        (run_local_sync, run_local),
        (run_evaluation_sync, run_evaluation),
        (evaluate_job_sync, evaluate_job),
        (play_episode_sync, play_episode),
    ],
    ids=lambda f: f.__name__,
)
def test_sync_functions_mirror_their_async_forms(
    sync: Callable[..., Any], source: Callable[..., Any]
) -> None:
    _same(sync, source)
    assert sync.__name__ == f"{source.__name__}_sync"


def test_a_drifted_twin_is_caught() -> None:
    """Guards the comparison itself: a hand-written twin with a lost keyword fails it."""

    class AsyncThing:
        async def get(self, key: str, *, fresh: bool = False) -> AsyncThing:
            return self

    class Thing:
        def get(self, key: str) -> Thing:
            return self

    with pytest.raises(AssertionError):
        _same(Thing.get, AsyncThing.get)


class _CountingAsyncClient(httpx.AsyncClient):
    created = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        type(self).created += 1
        super().__init__(*args, **kwargs)


class _CountingClient(httpx.Client):
    created = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        type(self).created += 1
        super().__init__(*args, **kwargs)


def test_with_options_shares_the_one_pool_of_each_kind(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counted from where this test starts: other tests count on the same classes."""
    monkeypatch.setattr(httpx, "AsyncClient", _CountingAsyncClient)
    monkeypatch.setattr(httpx, "Client", _CountingClient)
    before = (_CountingClient.created, _CountingAsyncClient.created)
    fleet = Fleet(api_key="sk-test", base_url="http://127.0.0.1:9")
    assert fleet.async_fleet is not None  # the async side the facades run on
    pools = (_CountingClient.created, _CountingAsyncClient.created)
    assert (pools[0] - before[0], pools[1] - before[1]) == (1, 1)

    quick = fleet.with_options(deadline=5.0)
    assert quick.async_fleet is not None
    assert quick.api.control_plane is not None  # the sync typed clients
    assert quick.tasks._inner is not None  # a facade's async side

    assert (_CountingClient.created, _CountingAsyncClient.created) == pools
    assert quick.http_client is fleet.http_client
    assert quick.async_fleet.http_client is fleet.async_fleet.http_client
    assert quick.async_fleet.call_policy.deadline == 5.0
    quick.close()  # a copy closes nothing it shares
    assert not fleet.http_client.is_closed and not fleet.async_fleet.http_client.is_closed
    fleet.close()
    assert fleet.http_client.is_closed


async def test_async_with_options_shares_the_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(httpx, "AsyncClient", _CountingAsyncClient)
    fleet = AsyncFleet(api_key="sk-test", base_url="http://127.0.0.1:9")
    before = _CountingAsyncClient.created
    copy = fleet.with_options(retry=None, deadline=3.0)
    assert _CountingAsyncClient.created == before
    assert copy.http_client is fleet.http_client
    await copy.close()
    assert not fleet.http_client.is_closed
    await fleet.close()
