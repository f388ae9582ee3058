"""The public Fleet SDK's reward path against ``LocalFleet``: episodes as the OpenEnv fork plays them.

The OpenEnv fork's ``FleetTaskEnv`` (and SkyRL's Fleet integration, which wraps it) score an
episode with ``fleet-python``: it makes an instance of the task's environment and version,
resets it, lists and calls the MCP tools, and finally builds a ``fleet`` ``Task`` from the task's
``verifier_code`` and calls ``verify_detailed_async(env, final_answer=...)``. Everything here goes
through ``fleet-python`` 0.2.133 (a pinned dev dependency) and the ``mcp`` client, with only
``FLEET_BASE_URL`` / ``FLEET_API_KEY`` pointed at the local server, as a user of those clients
would run them. One test per fault the public SDK met before (docs/wire-fidelity.md):

1. the entry point the public SDK picks in every bundled verifier is ``verify``;
2. keyword arguments (``final_answer=...``) reach the verifier, in their own types, and arguments
   the server cannot carry are refused, never dropped;
3. verifiers written for the public SDK (``env.instance.load()``, ``db.table(...)``, snapshot
   diffs with ``IgnoreConfig``, a kept ``@verifier`` line, ``from fleet.verifiers import ...``)
   run as written;
4. ``env.verify(fn)`` / ``verify_raw`` (the ``{function_code, function_name}`` body) answer the
   public SDK's ``ExecuteFunctionResponse``.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

# The public SDK is a pinned dev dependency (fleet-python): missing, the suite fails, never skips.
import fleet
import httpx
import pytest
from fleet._async.tasks import Task as AsyncPublicTask
from fleet.exceptions import FleetBadRequestError
from fleet.tasks import Task as PublicTask
from fleet.tasks import verifier_from_string
from fleet.verifiers.parse import extract_function_name
from mcp import ClientSession
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

from fleet_local import LocalFleet
from fleet_local.environments import registry

FINAL_ANSWER = "submit_final_answer"

# Two write tasks and two answer tasks of each environment's kinds; two of them had helpers above
# verify before their verifiers were reordered.
EPISODE_TASKS = [
    "orderdesk-refund-late-order",
    "orderdesk-top-spender",
    "calendar-accept-pending-invites",
    "calendar-count-tuesday-meetings",
]


@pytest.fixture(scope="module")
def server() -> Iterator[LocalFleet]:
    with LocalFleet(api_key=f"rewards-{uuid.uuid4().hex[:8]}") as local:
        yield local


@pytest.fixture()
def public_sdk_env(server: LocalFleet, monkeypatch: pytest.MonkeyPatch) -> LocalFleet:
    """Only the two variables a user of the public SDK sets point it at the local server."""
    monkeypatch.setenv("FLEET_BASE_URL", server.base_url)
    monkeypatch.setenv("FLEET_API_KEY", server.api_key)
    return server


@pytest.fixture(scope="module")
def task_configs(server: LocalFleet) -> dict[str, dict[str, Any]]:
    """The bundled task configs as the server serves them (the fork reads the same JSON)."""
    with httpx.Client(
        base_url=server.base_url, headers={"Authorization": f"Bearer {server.api_key}"}, timeout=30
    ) as raw:
        tasks = raw.get("/v1/tasks").json()["tasks"]
    return {task["task_key"]: task for task in tasks}


@asynccontextmanager
async def mcp_session(url: str, api_key: str) -> AsyncIterator[ClientSession]:
    """An initialized MCP session, authenticated the way the fork's MCP client is."""
    async with (
        create_mcp_http_client(headers={"Authorization": f"Bearer {api_key}"}) as http,
        streamable_http_client(url, http_client=http) as streams,
        ClientSession(streams[0], streams[1]) as session,
    ):
        await session.initialize()
        yield session


def _solution(task: dict[str, Any]) -> tuple[list[dict[str, Any]], str | None]:
    """The reference solution's tool calls, and its final answer (None for a write task)."""
    steps = list(task["metadata"]["reference_solution"])
    answer = None
    if steps and steps[-1]["tool"] == FINAL_ANSWER:
        answer = str(steps.pop()["params"]["answer"])
    return steps, answer


def _wrong(answer: str) -> str:
    return "I could not find it" if not any(ch.isdigit() for ch in answer) else answer + "7"


# -- the episode --------------------------------------------------------------------------------


@pytest.mark.parametrize("task_key", EPISODE_TASKS)
async def test_an_episode_as_the_openenv_fork_plays_it_scores_one_and_a_wrong_one_zero(
    task_key: str, public_sdk_env: LocalFleet, task_configs: dict[str, dict[str, Any]]
) -> None:
    task = task_configs[task_key]
    steps, answer = _solution(task)
    client = fleet.AsyncFleet()  # FLEET_BASE_URL and FLEET_API_KEY, nothing else
    env = await client.make(
        env_key=f"{task['env_key']}:{task['env_version']}",
        data_key=f"{task['data_key']}:{task['data_version']}",
        env_variables=task["env_variables"],
        ttl_seconds=600,
    )
    try:
        assert (env.env_key, env.version) == (task["env_key"], task["env_version"])
        assert (await env.reset()).success
        # The fork lists the tools of both MCP endpoints of a tool_use instance and unions them.
        listed = []
        for url in (f"{env.urls.root}mcp", f"{env.urls.root}api/v1/mcp"):
            async with mcp_session(url, public_sdk_env.api_key) as session:
                listed.append(sorted(tool.name for tool in (await session.list_tools()).tools))
        assert listed[0] == listed[1] and {step["tool"] for step in steps} <= set(listed[0])

        fleet_task = AsyncPublicTask(
            key=task["task_key"],
            prompt=task["prompt"],
            env_id=task["env_key"],
            verifier_func=task["verifier_code"],
        )
        # Before any work: a write task is not done yet; an answer task gets a wrong answer.
        before = await fleet_task.verify_detailed_async(
            env, **({"final_answer": _wrong(answer)} if answer else {})
        )
        assert (before.success, before.error) == (True, None)
        assert float(before.result) == 0.0

        async with mcp_session(f"{env.urls.root}mcp", public_sdk_env.api_key) as session:
            for step in steps:
                # mcp 1.x names it isError, 2.x is_error: read the wire form.
                result = (await session.call_tool(step["tool"], step["params"])).model_dump(by_alias=True)
                assert not result["isError"], (step, result["content"])
        response = await fleet_task.verify_detailed_async(env, **({"final_answer": answer} if answer else {}))
        assert (response.success, response.error) == (True, None), response.stdout
        assert float(response.result) == 1.0
        assert response.execution_id and response.execution_id != before.execution_id
        if answer is not None:
            wrong = await fleet_task.verify_detailed_async(env, final_answer=_wrong(answer))
            assert (wrong.success, float(wrong.result)) == (True, 0.0)
    finally:
        await env.close()


def test_the_sync_task_and_its_verifier_remote_score_an_answer(
    public_sdk_env: LocalFleet, task_configs: dict[str, dict[str, Any]]
) -> None:
    """``Task.verify_detailed`` and the task verifier's ``.remote`` of the blocking client."""
    task = task_configs["calendar-count-tuesday-meetings"]
    _, answer = _solution(task)
    assert answer is not None
    client = fleet.Fleet()
    env = client.make(f"{task['env_key']}:{task['env_version']}")
    try:
        public_task = PublicTask(
            key=task["task_key"],
            prompt=task["prompt"],
            env_id=task["env_key"],
            verifier_func=task["verifier_code"],
        )
        detailed = public_task.verify_detailed(env, final_answer=answer)
        assert (detailed.success, float(detailed.result)) == (True, 1.0)
        assert public_task.verify(env, final_answer=_wrong(answer)) == 0.0
        assert public_task.verifier is not None
        assert public_task.verifier.remote(env, final_answer=answer) == 1.0
    finally:
        env.close()


# -- 1. the entry point -------------------------------------------------------------------------

BUNDLED = [task for environment in registry().values() for task in environment.tasks]


@pytest.mark.parametrize("task", BUNDLED, ids=[task["task_key"] for task in BUNDLED])
def test_the_public_sdk_picks_verify_in_every_bundled_verifier(task: dict[str, Any]) -> None:
    """The public SDK calls the first function of a verifier's code; the bundled verifiers had their
    helpers first, so it sent ``function_name: "table_rows"`` and every episode failed."""
    code = task["verifier_code"]
    loaded = verifier_from_string(code, verifier_id=task["task_key"], verifier_key=task["task_key"])
    assert loaded.func.__name__ == "verify"
    assert extract_function_name(code) == "verify"


# -- 2. keyword arguments -----------------------------------------------------------------------


def verify_arguments(env: Any, expected: Any, final_answer: Any = None, **extra: Any) -> float:
    """Scores 1.0 when the answer matches and the extra keywords arrived in their own types."""
    shapes = {name: type(value).__name__ for name, value in extra.items()}
    wanted = {"pair": "tuple", "tags": "set", "blob": "bytes"}
    return 1.0 if final_answer == expected and all(shapes.get(k) == v for k, v in wanted.items()) else 0.0


def test_keyword_arguments_reach_the_verifier(public_sdk_env: LocalFleet) -> None:
    """``final_answer`` travels only in the pickled ``args``; the server ignored it, every answer
    was ``None`` and the verifier scored 0.0 with ``success: true``."""
    client = fleet.Fleet()
    env = client.make("orderdesk:v1.0.0")
    try:
        checker = fleet.verifier_sync(key=f"arguments-{uuid.uuid4().hex[:6]}")(verify_arguments)
        extra = {"pair": (1, 2), "tags": {"a", "b"}, "blob": b"\x00\xff"}
        assert checker.remote(env, "42", final_answer="42", **extra) == 1.0
        assert checker.remote(env, "42", final_answer="41", **extra) == 0.0
        missing = checker.remote_with_response(
            env, "42", final_answer="42", pair=[1, 2], tags={"a", "b"}, blob=b""
        )
        assert (missing.success, missing.result) == (True, 0.0)  # a list is not a tuple
    finally:
        env.close()


def test_arguments_the_server_cannot_carry_are_refused_naming_them(public_sdk_env: LocalFleet) -> None:
    """A pickled object other than plain data is a 400 naming it; the verifier does not run."""
    client = fleet.Fleet()
    env = client.make("orderdesk:v1.0.0")
    try:
        checker = fleet.verifier_sync(key=f"refused-{uuid.uuid4().hex[:6]}")(verify_arguments)
        with pytest.raises(FleetBadRequestError, match=r"datetime\.datetime"):
            checker.remote(env, "42", final_answer="42", when=datetime.datetime(2026, 11, 3))
    finally:
        env.close()


# -- 3. the verifier runtime --------------------------------------------------------------------

PUBLIC_SDK_STYLE = """
from fleet.verifiers import IgnoreConfig, SnapshotDiff
from fleet.verifiers.db import DatabaseSnapshot

KINDS = (DatabaseSnapshot, IgnoreConfig, SnapshotDiff)


@verifier(key="cancel-order-1021")
async def verify(env, final_answer=None):
    env.instance.load()
    current = env.db("current")
    order = current.table("orders").eq("id", 1021).first()
    if order is None or order["status"] != "cancelled":
        return TASK_FAILED_SCORE
    current.table("orders").eq("id", 1021).assert_eq("cancel_reason", "duplicate")
    if current.table("orders").eq("status", "cancelled").count() < 1:
        return TASK_FAILED_SCORE
    diff = env.db("seed").diff(current, IgnoreConfig(tables={"order_notes"}, fields={"updated_at"}))
    assert isinstance(diff, SnapshotDiff)
    try:
        diff.expect_only([
            {"table": "orders", "pk": 1021, "field": "status", "after": "cancelled"},
            {"table": "orders", "pk": 1021, "field": "cancel_reason", "after": "duplicate"},
        ])
    except AssertionError as exc:
        print("unexpected:", exc)
        return TASK_FAILED_SCORE
    return TASK_SUCCESSFUL_SCORE
"""


def test_verifiers_written_for_the_public_sdk_run_remotely(public_sdk_env: LocalFleet) -> None:
    """``env.instance.load()``, ``db.table(...)``, ``diff(..., IgnoreConfig())``, bare
    ``IgnoreConfig`` / ``DatabaseSnapshot``, ``from fleet.verifiers import ...`` and a kept
    ``@verifier`` line all failed with ``AttributeError`` or ``NameError`` on the server."""
    client = fleet.Fleet()
    env = client.make("orderdesk:v1.0.0")
    try:
        key = f"public-sdk-style-{uuid.uuid4().hex[:6]}"
        checker = verifier_from_string(PUBLIC_SDK_STYLE, verifier_id=key, verifier_key=key)
        untouched = checker.remote_with_response(env)
        assert (untouched.success, untouched.error, untouched.result) == (True, None, 0)
        env.instance.load()  # the public SDK finds env.db(name) among the loaded resources
        env.db("current").exec(
            "UPDATE orders SET status = 'cancelled', cancel_reason = 'duplicate' WHERE id = 1021"
        )
        assert checker.remote(env) == 1.0
        env.db("current").exec("UPDATE products SET stock = stock + 1 WHERE id = 1")
        off_task = checker.remote_with_response(env)
        assert (off_task.success, off_task.result) == (True, 0)
        assert "products" in (off_task.stdout or "")
    finally:
        env.close()


# -- 4. execute_verifier_function with the public SDK's body -----------------------------------


def orders_unchanged(before: Any, after: Any, transcript: Any = None) -> int:
    before.diff(after).expect_only([])
    return 1 if transcript in (None, "fine") else 0


def test_env_verify_and_verify_raw_get_the_public_sdks_response(public_sdk_env: LocalFleet) -> None:
    """``env.verify(fn)`` posts ``{function_code, function_name}``; the server answered 422 asking
    for ``key``/``sha256`` and the SDK failed to parse the error as an ``ExecuteFunctionResponse``."""
    client = fleet.Fleet()
    env = client.make("orderdesk:v1.0.0")
    try:
        passed = env.verify(orders_unchanged)
        assert (passed.success, passed.result, passed.error) == (True, 1, None)
        assert "orders_unchanged" in passed.message

        old_style = (
            "def count_orders(env: Environment, final_answer: str | None = None) -> int:\n"
            '    rows = env.db("current").query("SELECT count(*) FROM orders").rows\n'
            '    same = env.db("seed").table("orders").count() == rows[0][0]\n'
            "    return TASK_SUCCESSFUL_SCORE if same else TASK_FAILED_SCORE\n"
        )
        converted = env.verify_raw(old_style)  # the SDK rewrites it to (before, after, transcript)
        assert (converted.success, converted.result) == (True, 1)

        failing = env.verify_raw("def broken(before, after, transcript=None):\n    raise ValueError('no')\n")
        assert failing.success is False and failing.result is None
        assert failing.error is not None and "ValueError: no" in failing.error and "broken" in failing.message

        env.instance.load()
        env.db("current").exec("DELETE FROM order_notes")
        changed = env.verify(orders_unchanged)
        assert changed.success is False and "AssertionError" in (changed.error or "")
    finally:
        env.close()
