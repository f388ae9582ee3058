"""The bundled environments: seeds, tools and tasks, played end to end without a server.

For every task the reference solution is played by calling the tool handlers on a copy of the seed
(the ``current`` database) and the verifier must give 1.0; with no actions it must give 0.0.
"""

from __future__ import annotations

import ast
import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from fleet_local.environments import (
    EnvironmentDefinition,
    TaskDefinition,
    ToolDefinition,
    ToolError,
    UnknownEnvironmentError,
    get_environment,
    registry,
)
from fleet_local.environments._verifier_lib import HELPERS
from fleet_local.sandbox import run_sandboxed_sync
from fleet_sdk.rewards import partial_reward
from fleet_sdk.verifiers import SQLiteEnvironment, VerifierOutcome, run_local_sync

ENVIRONMENTS = registry()
# Tool-use tasks, played here through the tools; browser_use tasks (computer actions) are played in a
# real browser by tests/e2e/test_browser_tasks.py.
ALL_TASKS = [
    (env, task) for env in ENVIRONMENTS.values() for task in env.tasks if task["task_modality"] == "tool_use"
]
BROWSER_TASKS = [
    (env, task)
    for env in ENVIRONMENTS.values()
    for task in env.tasks
    if task["task_modality"] == "browser_use"
]
TASK_IDS = [task["task_key"] for _, task in ALL_TASKS]
FINAL_ANSWER = "submit_final_answer"


# -- helpers ----------------------------------------------------------------------------------------


class Instance:
    """A seed database and its ``current`` copy, as an instance manager would hold them."""

    def __init__(self, env: EnvironmentDefinition, root: Path) -> None:
        self.env = env
        self.seed = env.build_seed(root / "seed.db")
        self.current = root / "current.db"
        shutil.copyfile(self.seed, self.current)

    def call(self, tool: str, params: dict[str, Any] | None = None) -> Any:
        conn = sqlite3.connect(self.current)
        try:
            return self.env.tool(tool).call(conn, params or {})
        finally:
            conn.close()

    def play(self, steps: list[dict[str, Any]]) -> Any:
        """Run the steps (tool calls); return the answer of a ``submit_final_answer`` step."""
        final_answer = None
        conn = sqlite3.connect(self.current)
        try:
            for step in steps:
                if step["tool"] == FINAL_ANSWER:
                    final_answer = step["params"]["answer"]
                    continue
                result = self.env.tool(step["tool"]).call(conn, step["params"])
                json.dumps(result)  # every tool result is JSON-serialisable
        finally:
            conn.close()
        return final_answer

    def verify(self, task: TaskDefinition, final_answer: Any = None) -> VerifierOutcome:
        with SQLiteEnvironment(databases={"seed": self.seed, "current": self.current}) as env:
            return run_local_sync(task["verifier_code"], env, final_answer=final_answer)

    def dump(self, which: str = "current") -> list[str]:
        conn = sqlite3.connect(self.current if which == "current" else self.seed)
        try:
            return list(conn.iterdump())
        finally:
            conn.close()


@pytest.fixture
def instance_factory(tmp_path: Path) -> Iterator[Any]:
    counter = iter(range(1000))

    def make(env: EnvironmentDefinition) -> Instance:
        root = tmp_path / f"{env.env_key}-{next(counter)}"
        root.mkdir()
        return Instance(env, root)

    yield make


def _solution(task: TaskDefinition) -> list[dict[str, Any]]:
    return [dict(step) for step in task["metadata"]["reference_solution"]]


def _is_multi_app(task: TaskDefinition) -> bool:
    """Whether ``verify`` itself reports per-app results (the shared prelude defines the helpers)."""
    tree = ast.parse(task["verifier_code"])
    verify = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "verify")
    called = {
        node.func.id
        for node in ast.walk(verify)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    return {"report_app", "report_combined"} <= called


def _top_level_functions(code: str) -> list[str]:
    return [node.name for node in ast.parse(code).body if isinstance(node, ast.FunctionDef)]


# -- every task: the reference solution passes, doing nothing fails ----------------------------------


@pytest.mark.parametrize(("env", "task"), ALL_TASKS, ids=TASK_IDS)
def test_reference_solution_passes(
    env: EnvironmentDefinition, task: TaskDefinition, instance_factory: Any
) -> None:
    instance = instance_factory(env)
    final_answer = instance.play(_solution(task))
    outcome = instance.verify(task, final_answer)
    assert outcome.error is None, outcome.error
    assert outcome.score == 1.0, outcome.stdout


@pytest.mark.parametrize(
    ("env", "task"), ALL_TASKS + BROWSER_TASKS, ids=TASK_IDS + [t["task_key"] for _, t in BROWSER_TASKS]
)
def test_empty_episode_fails(env: EnvironmentDefinition, task: TaskDefinition, instance_factory: Any) -> None:
    instance = instance_factory(env)
    outcome = instance.verify(task, final_answer=None)
    assert outcome.error is None, outcome.error
    assert outcome.score == 0.0, outcome.stdout


@pytest.mark.parametrize(("env", "task"), ALL_TASKS, ids=TASK_IDS)
def test_only_the_final_answer_step_is_not_a_tool(env: EnvironmentDefinition, task: TaskDefinition) -> None:
    steps = _solution(task)
    assert steps, "a reference solution has at least one step"
    names = [step["tool"] for step in steps]
    uses_answer = FINAL_ANSWER in names
    assert uses_answer == ("submit_final_answer" in task["prompt"])
    if uses_answer:
        assert names[-1] == FINAL_ANSWER and names.count(FINAL_ANSWER) == 1
        assert set(steps[-1]["params"]) == {"answer"}
        assert _top_level_functions(task["verifier_code"])[0] == "verify"
    assert FINAL_ANSWER not in env.tool_names()
    for name in names:
        if name != FINAL_ANSWER:
            env.tool(name)


# -- task configs -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("env", "task"), ALL_TASKS, ids=TASK_IDS)
def test_task_config_shape(env: EnvironmentDefinition, task: TaskDefinition) -> None:
    assert set(task) == {
        "task_key",
        "prompt",
        "env_key",
        "env_version",
        "data_key",
        "data_version",
        "env_variables",
        "verifier_code",
        "task_modality",
        "metadata",
    }
    assert task["task_key"].startswith(f"{env.env_key}-")
    assert task["env_key"] == env.env_key
    assert task["env_version"] in env.versions
    assert task["task_modality"] == "tool_use"
    assert task["env_variables"]["CURRENT_DATE"]
    assert task["env_variables"]["LOGGED_IN_USER"]
    assert json.loads(json.dumps(task)) == task
    functions = _top_level_functions(task["verifier_code"])
    assert "verify" in functions
    verify_node = next(
        n
        for n in ast.parse(task["verifier_code"]).body
        if isinstance(n, ast.FunctionDef) and n.name == "verify"
    )
    assert [a.arg for a in verify_node.args.args] == ["env", "final_answer"]
    assert verify_node.args.defaults and isinstance(verify_node.args.defaults[0], ast.Constant)


@pytest.mark.parametrize("env", list(ENVIRONMENTS.values()), ids=list(ENVIRONMENTS))
def test_environment_coverage(env: EnvironmentDefinition) -> None:
    assert len(env.tools) >= 8
    assert any(not tool.read_only for tool in env.tools)
    assert any(tool.read_only for tool in env.tools)
    assert len(env.tasks) >= 12
    assert sum(task["task_modality"] == "browser_use" for task in env.tasks) >= 3
    assert len({task["task_key"] for task in env.tasks}) == len(env.tasks)
    assert sum(_is_multi_app(task) for task in env.tasks) >= 2
    answers = [
        task
        for _, task in ALL_TASKS
        if task["env_key"] == env.env_key and any(s["tool"] == FINAL_ANSWER for s in _solution(task))
    ]
    assert answers
    # verify comes first (the public SDK calls the first function); some define helpers of their own
    assert all(_top_level_functions(t["verifier_code"])[0] == "verify" for t in env.tasks)
    shared = {"verify", *_top_level_functions(HELPERS)}
    assert any(set(_top_level_functions(t["verifier_code"])) - shared for t in env.tasks)
    # every write tool is used by some reference solution
    used = {
        step["tool"] for _, task in ALL_TASKS if task["env_key"] == env.env_key for step in _solution(task)
    }
    assert {tool.name for tool in env.tools if not tool.read_only} <= used


def test_final_answer_tasks_across_environments() -> None:
    count = sum(any(s["tool"] == FINAL_ANSWER for s in _solution(task)) for _, task in ALL_TASKS)
    assert count >= 3


# -- registry ---------------------------------------------------------------------------------------


def test_registry_and_lookup() -> None:
    assert {"orderdesk", "calendar"} <= set(ENVIRONMENTS)
    assert len({env.env_key for env in ENVIRONMENTS.values()}) == len(ENVIRONMENTS)
    for key, env in ENVIRONMENTS.items():
        assert env.env_key == key
        assert get_environment(key) is env
        assert env.default_version in env.versions
        summary = env.summary()
        assert set(summary) == {"env_key", "name", "description", "default_version", "versions"}
    registry().clear()  # a copy: the registry itself is untouched
    assert set(registry()) == set(ENVIRONMENTS)


def test_unknown_environment_is_a_clear_key_error() -> None:
    with pytest.raises(KeyError) as info:
        get_environment("nope")
    assert isinstance(info.value, UnknownEnvironmentError)
    message = str(info.value)
    assert "nope" in message and "orderdesk" in message and "calendar" in message


def test_unknown_tool_and_task_lookup() -> None:
    env = get_environment("orderdesk")
    with pytest.raises(KeyError, match="get_order"):
        env.tool("no_such_tool")
    with pytest.raises(KeyError):
        env.task("no-such-task")
    assert env.task("orderdesk-refund-late-order")["env_key"] == "orderdesk"


# -- seeds ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("env", list(ENVIRONMENTS.values()), ids=list(ENVIRONMENTS))
def test_seed_build_is_deterministic(env: EnvironmentDefinition, tmp_path: Path) -> None:
    first = env.build_seed(tmp_path / "a" / "seed.db")
    second = env.build_seed(tmp_path / "b" / "seed.db")

    def dump(path: Path) -> str:
        conn = sqlite3.connect(path)
        try:
            return "\n".join(conn.iterdump())
        finally:
            conn.close()

    assert dump(first) == dump(second)
    assert first.read_bytes() == second.read_bytes()
    # rebuilding over an existing file replaces it and leaves no temporary file behind
    env.build_seed(first)
    assert dump(first) == dump(second)
    assert sorted(p.name for p in first.parent.iterdir()) == ["seed.db"]


@pytest.mark.parametrize("env", list(ENVIRONMENTS.values()), ids=list(ENVIRONMENTS))
def test_seed_is_realistic_and_consistent(env: EnvironmentDefinition, tmp_path: Path) -> None:
    conn = sqlite3.connect(env.build_seed(tmp_path / "seed.db"))
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        assert len(tables) >= 5
        total_rows = sum(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in tables)
        assert total_rows >= 60
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        settings = dict(conn.execute("SELECT key, value FROM app_settings").fetchall())
    finally:
        conn.close()
    assert settings["current_date"] == env.env_variables["CURRENT_DATE"]
    assert settings["logged_in_user"] == env.env_variables["LOGGED_IN_USER"]


def test_orderdesk_order_totals_match_items(tmp_path: Path) -> None:
    conn = sqlite3.connect(get_environment("orderdesk").build_seed(tmp_path / "seed.db"))
    try:
        mismatched = conn.execute(
            "SELECT o.id FROM orders o JOIN order_items i ON i.order_id = o.id GROUP BY o.id "
            "HAVING SUM(i.quantity * i.unit_price_cents) != o.total_cents"
        ).fetchall()
    finally:
        conn.close()
    assert mismatched == []


# -- tool schemas -----------------------------------------------------------------------------------

ALL_TOOLS = [(env, tool) for env in ENVIRONMENTS.values() for tool in env.tools]
TOOL_IDS = [f"{env.env_key}.{tool.name}" for env, tool in ALL_TOOLS]


@pytest.mark.parametrize(("env", "tool"), ALL_TOOLS, ids=TOOL_IDS)
def test_tool_schema_is_valid_json_schema(env: EnvironmentDefinition, tool: ToolDefinition) -> None:
    schema = tool.input_schema
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) <= set(schema["properties"])
    assert tool.description and len(tool.description) > 20
    for name, prop in schema["properties"].items():
        assert prop.get("description"), f"{tool.name}.{name} has no description"
    mcp = tool.to_mcp()
    assert mcp["name"] == tool.name and mcp["inputSchema"] is schema
    assert mcp["annotations"]["readOnlyHint"] is tool.read_only
    json.dumps(mcp)


@pytest.mark.parametrize(("env", "task"), ALL_TASKS, ids=TASK_IDS)
def test_reference_params_validate_against_schemas(env: EnvironmentDefinition, task: TaskDefinition) -> None:
    for step in _solution(task):
        if step["tool"] == FINAL_ANSWER:
            continue
        validator = jsonschema.Draft202012Validator(env.tool(step["tool"]).input_schema)
        errors = [e.message for e in validator.iter_errors(step["params"])]
        assert errors == [], (step, errors)


@pytest.mark.parametrize(("env", "task"), BROWSER_TASKS, ids=[t["task_key"] for _, t in BROWSER_TASKS])
def test_browser_solutions_are_computer_actions(env: EnvironmentDefinition, task: TaskDefinition) -> None:
    from fleet_local._computer import COMPUTER_TOOL

    validator = jsonschema.Draft202012Validator(COMPUTER_TOOL["input_schema"])
    steps = _solution(task)
    assert steps and {step["tool"] for step in steps} == {"computer"}
    for step in steps:
        assert [e.message for e in validator.iter_errors(step["params"])] == [], step


# -- tool errors ------------------------------------------------------------------------------------

# (env, tool) -> cases of (arguments, the argument the message must name)
ERROR_CASES: dict[tuple[str, str], list[tuple[dict[str, Any], str]]] = {
    ("orderdesk", "search_customers"): [({"tier": "diamond"}, "tier"), ({"limit": 0}, "limit")],
    ("orderdesk", "get_customer"): [({"customer_id": 999}, "customer_id"), ({}, "customer_id")],
    ("orderdesk", "update_customer"): [
        ({"customer_id": 1, "email": "not-an-email"}, "email"),
        ({"customer_id": 1, "email": "marcus.bell@example.com"}, "email"),
        ({"customer_id": 1}, "email"),
    ],
    ("orderdesk", "search_products"): [({"in_stock_only": "yes"}, "in_stock_only")],
    ("orderdesk", "update_product"): [
        ({"sku": "NOPE-1", "stock": 3}, "sku"),
        ({"sku": "DOCK-TB4", "stock": -1}, "stock"),
    ],
    ("orderdesk", "list_orders"): [
        ({"placed_from": "01/10/2026"}, "placed_from"),
        ({"status": "lost"}, "status"),
    ],
    ("orderdesk", "get_order"): [({"order_id": 999}, "order_id"), ({"order_id": "1001"}, "order_id")],
    ("orderdesk", "create_order"): [
        ({"customer_id": 1, "items": []}, "items"),
        ({"customer_id": 1, "items": [{"sku": "NOPE", "quantity": 1}]}, "items[0].sku"),
        ({"customer_id": 1, "items": [{"sku": "HS-WIRED-BASIC", "quantity": 1}]}, "items[0].sku"),
        ({"customer_id": 1, "items": [{"sku": "DOCK-TB4", "quantity": 6}]}, "items"),
        ({"customer_id": 1, "items": [{"sku": "DOCK-TB4"}]}, "items[0].quantity"),
    ],
    ("orderdesk", "update_order_status"): [
        ({"order_id": 1014, "status": "shipped"}, "status"),
        ({"order_id": 1014, "status": "cancelled"}, "status"),
    ],
    ("orderdesk", "cancel_order"): [
        ({"order_id": 1001, "reason": "x"}, "order_id"),
        ({"order_id": 1014}, "reason"),
    ],
    ("orderdesk", "issue_refund"): [
        ({"order_id": 1014, "amount_cents": 100, "reason": "x"}, "order_id"),
        ({"order_id": 1008, "amount_cents": 38901, "reason": "x"}, "amount_cents"),
        ({"order_id": 1008, "amount_cents": 0, "reason": "x"}, "amount_cents"),
    ],
    ("orderdesk", "export_inventory_ledger"): [({"days": 0}, "days"), ({"days": 366}, "days")],
    ("orderdesk", "add_order_note"): [
        ({"order_id": 5, "body": "hi"}, "order_id"),
        ({"order_id": 1001, "body": ""}, "body"),
    ],
    ("calendar", "list_users"): [({"query": ""}, "query"), ({"team": "x"}, "team")],
    ("calendar", "list_calendars"): [({"owner_email": "nobody@northwind.example"}, "owner_email")],
    ("calendar", "list_rooms"): [({"min_capacity": "big"}, "min_capacity")],
    ("calendar", "find_free_rooms"): [
        ({"start_at": "tomorrow", "end_at": "2026-11-04 11:00"}, "start_at"),
        ({"start_at": "2026-11-04 11:00", "end_at": "2026-11-04 10:00"}, "end_at"),
    ],
    ("calendar", "list_events"): [
        ({"calendar_id": 99}, "calendar_id"),
        ({"date_to": "2026-02-30"}, "date_to"),
    ],
    ("calendar", "get_event"): [({"event_id": 999}, "event_id")],
    ("calendar", "check_availability"): [
        (
            {
                "emails": ["ghost@northwind.example"],
                "start_at": "2026-11-04 10:00",
                "end_at": "2026-11-04 11:00",
            },
            "emails[0]",
        ),
    ],
    ("calendar", "create_event"): [
        (
            {"calendar_id": 99, "title": "x", "start_at": "2026-11-04 10:00", "end_at": "2026-11-04 11:00"},
            "calendar_id",
        ),
        (
            {
                "calendar_id": 1,
                "title": "x",
                "start_at": "2026-11-04 10:00",
                "end_at": "2026-11-04 11:00",
                "room_id": 1,
            },
            "room_id",
        ),
        (
            {
                "calendar_id": 1,
                "title": "x",
                "start_at": "2026-11-04 12:00",
                "end_at": "2026-11-04 13:00",
                "room_id": 5,
                "attendee_emails": ["omar.farouk@northwind.example", "sam.patel@northwind.example"],
            },
            "room_id",
        ),
        (
            {
                "calendar_id": 1,
                "title": "x",
                "start_at": "2026-11-04 12:00",
                "end_at": "2026-11-04 13:00",
                "attendee_emails": ["nobody@x.example"],
            },
            "attendee_emails[0]",
        ),
    ],
    ("calendar", "update_event"): [
        ({"event_id": 20, "title": "x"}, "event_id"),
        (
            {"event_id": 9, "room_id": 1, "start_at": "2026-11-04 10:00", "end_at": "2026-11-04 11:00"},
            "room_id",
        ),
        ({"event_id": 9}, "title"),
        ({"event_id": 9, "end_at": "2026-11-04 12:00"}, "end_at"),
    ],
    ("calendar", "cancel_event"): [({"event_id": 20}, "event_id"), ({"event_id": 0}, "event_id")],
    ("calendar", "add_attendees"): [
        ({"event_id": 7, "emails": ["maya.chen@northwind.example"]}, "emails[0]"),
        ({"event_id": 7, "emails": []}, "emails"),
        (
            {
                "event_id": 7,
                "emails": [
                    f"{n}@northwind.example"
                    for n in ("lena.vogel", "sam.patel", "omar.farouk", "hiro.watanabe")
                ],
            },
            "emails",
        ),
    ],
    ("calendar", "remove_attendee"): [
        ({"event_id": 12, "email": "maya.chen@northwind.example"}, "email"),
        ({"event_id": 12, "email": "ana.souza@northwind.example"}, "email"),
    ],
    ("calendar", "respond_to_event"): [
        ({"event_id": 7, "email": "maya.chen@northwind.example", "response": "maybe"}, "response"),
        ({"event_id": 7, "email": "omar.farouk@northwind.example", "response": "accepted"}, "email"),
    ],
}


def test_every_tool_has_error_cases() -> None:
    assert {(env.env_key, tool.name) for env, tool in ALL_TOOLS} == set(ERROR_CASES)


@pytest.mark.parametrize(("env", "tool"), ALL_TOOLS, ids=TOOL_IDS)
def test_tool_errors_name_the_bad_argument(
    env: EnvironmentDefinition, tool: ToolDefinition, instance_factory: Any
) -> None:
    instance = instance_factory(env)
    before = instance.dump()
    for arguments, argument in ERROR_CASES[(env.env_key, tool.name)]:
        with pytest.raises(ToolError) as info:
            instance.call(tool.name, arguments)
        assert f"'{argument}'" in info.value.message, (arguments, info.value.message)
        assert str(info.value) == info.value.message
    # generic checks every tool makes before its handler runs
    with pytest.raises(ToolError, match="Unknown argument 'bogus'"):
        instance.call(tool.name, {"bogus": 1})
    required = tool.input_schema["required"]
    if required:
        with pytest.raises(ToolError, match=f"Missing required argument '{required[0]}'"):
            instance.call(tool.name, {})
    assert instance.dump() == before, "a failed tool call changed the database"


def test_write_tool_rolls_back_when_it_fails(tmp_path: Path) -> None:
    env = get_environment("orderdesk")
    seed = env.build_seed(tmp_path / "seed.db")

    def half_done(conn: sqlite3.Connection, args: dict[str, Any]) -> Any:
        conn.execute("UPDATE products SET stock = 0")
        raise ToolError("Invalid argument 'sku': gave up halfway")

    tool = ToolDefinition(
        "half_done", "Fails after writing.", env.tool("update_product").input_schema, half_done, False
    )
    for isolation_level in ("", None):
        conn = sqlite3.connect(seed, isolation_level=isolation_level)
        try:
            with pytest.raises(ToolError):
                tool.call(conn, {"sku": "DOCK-TB4"})
            conn.commit()
            assert conn.execute("SELECT SUM(stock) FROM products").fetchone()[0] > 0
            assert not conn.in_transaction
        finally:
            conn.close()


def test_write_tool_commits_on_success(tmp_path: Path) -> None:
    env = get_environment("orderdesk")
    seed = env.build_seed(tmp_path / "seed.db")
    conn = sqlite3.connect(seed)
    try:
        env.tool("update_product").call(conn, {"sku": "DOCK-TB4", "stock": 99})
        assert not conn.in_transaction
    finally:
        conn.close()
    other = sqlite3.connect(seed)
    try:
        assert other.execute("SELECT stock FROM products WHERE sku = 'DOCK-TB4'").fetchone()[0] == 99
    finally:
        other.close()


def test_read_only_tools_cannot_write(tmp_path: Path) -> None:
    env = get_environment("calendar")
    seed = env.build_seed(tmp_path / "seed.db")

    def sneaky(conn: sqlite3.Connection, args: dict[str, Any]) -> Any:
        conn.execute("DELETE FROM events")

    tool = ToolDefinition(
        "sneaky", "Claims to read but writes.", env.tool("get_event").input_schema, sneaky, True
    )
    conn = sqlite3.connect(seed)
    try:
        with pytest.raises(sqlite3.OperationalError):
            tool.call(conn, {"event_id": 1})
        conn.rollback()
        # query_only is switched off again afterwards
        env.tool("cancel_event").call(conn, {"event_id": 1})
        assert conn.execute("SELECT COUNT(*) FROM events").fetchone()[0] == 28
    finally:
        conn.close()


def test_tool_spec_rejects_open_schemas() -> None:
    with pytest.raises(ValueError, match="closed object"):
        ToolDefinition(
            "t", "d", {"type": "object", "properties": {}, "required": []}, lambda c, a: None, True
        )
    with pytest.raises(ValueError, match="not properties"):
        ToolDefinition(
            "t",
            "d",
            {"type": "object", "properties": {}, "required": ["x"], "additionalProperties": False},
            lambda c, a: None,
            True,
        )


def test_tools_accept_iso_t_separator_and_normalise(instance_factory: Any) -> None:
    instance = instance_factory(get_environment("calendar"))
    result = instance.call(
        "create_event",
        {"calendar_id": 1, "title": "Focus", "start_at": "2026-11-04T07:00", "end_at": "2026-11-04T08:00:00"},
    )
    assert (result["start_at"], result["end_at"]) == ("2026-11-04 07:00", "2026-11-04 08:00")
    assert result["attendees"] == [
        {"user_id": 1, "name": "Maya Chen", "email": "maya.chen@northwind.example", "response": "accepted"}
    ]


# -- verifiers punish wrong or excess work ----------------------------------------------------------

MAYA = "maya.chen@northwind.example"


def _do(tool: str, **params: Any) -> dict[str, Any]:
    return {"tool": tool, "params": params}


WRONG_EPISODES: list[tuple[str, list[dict[str, Any]]]] = [
    # refund an on-time order
    ("orderdesk-refund-late-order", [_do("issue_refund", order_id=1002, amount_cents=1000, reason="late")]),
    # the right refund, plus an unrequested tier change
    (
        "orderdesk-refund-late-order",
        [
            _do("issue_refund", order_id=1008, amount_cents=38900, reason="late delivery"),
            _do("update_customer", customer_id=6, tier="gold"),
        ],
    ),
    # ship every paid order, not only the overdue ones
    (
        "orderdesk-ship-overdue-paid-orders",
        [
            _do("update_order_status", order_id=oid, status="shipped")
            for oid in (1013, 1016, 1019, 1020, 1027)
        ],
    ),
    # upgrade the near miss too (Omar Haddad: $99.97)
    (
        "orderdesk-upgrade-loyal-customers",
        [_do("update_customer", customer_id=cid, tier="gold") for cid in (2, 6, 8, 12)],
    ),
    ("orderdesk-count-pending-orders", [_do(FINAL_ANSWER, answer="5")]),
    ("orderdesk-top-spender", [_do(FINAL_ANSWER, answer="Marcus Bell")]),
    # the right answer, but the agent changed data on the way
    (
        "orderdesk-top-spender",
        [_do("update_customer", customer_id=11, tier="gold"), _do(FINAL_ANSWER, answer="Sofia Rossi")],
    ),
    # accept next week's invitation too
    (
        "calendar-accept-pending-invites",
        [
            _do("respond_to_event", event_id=eid, email=MAYA, response="accepted")
            for eid in (7, 8, 10, 13, 26)
        ],
    ),
    # move the wrong meeting out of Dune
    ("calendar-fix-room-double-booking", [_do("update_event", event_id=8, room_id=2)]),
    ("calendar-largest-free-video-room", [_do(FINAL_ANSWER, answer="Fjord")]),
    ("calendar-count-tuesday-meetings", [_do(FINAL_ANSWER, answer="6")]),
]


@pytest.mark.parametrize(
    ("task_key", "steps"), WRONG_EPISODES, ids=[f"{k}-{i}" for i, (k, _) in enumerate(WRONG_EPISODES)]
)
def test_wrong_episodes_fail(task_key: str, steps: list[dict[str, Any]], instance_factory: Any) -> None:
    env = get_environment(task_key.split("-", 1)[0])
    task = env.task(task_key)
    instance = instance_factory(env)
    final_answer = instance.play(steps)
    outcome = instance.verify(task, final_answer)
    assert outcome.error is None, outcome.error
    assert outcome.score == 0.0, outcome.stdout


# -- multi-app verifiers print per-app blocks for partial reward -------------------------------------

MULTI_APP = [(env, task) for env, task in ALL_TASKS if _is_multi_app(task)]


@pytest.mark.parametrize(("env", "task"), MULTI_APP, ids=[t["task_key"] for _, t in MULTI_APP])
def test_multi_app_blocks(env: EnvironmentDefinition, task: TaskDefinition, instance_factory: Any) -> None:
    instance = instance_factory(env)
    empty = instance.verify(task)
    apps = [line.split()[1].rstrip(":") for line in empty.stdout.splitlines() if line.startswith("App ")]
    assert len(apps) >= 2
    for app in apps:
        assert f"<<< VERIFY_{app} <<<" in empty.stdout and f">>> VERIFY_{app} >>>" in empty.stdout
        assert f"App {app}: 0" in empty.stdout
    assert f"Combined result: 0/{len(apps)} apps passed" in empty.stdout
    assert partial_reward(empty.stdout) == 0.0

    instance.play(_solution(task))
    done = instance.verify(task)
    assert done.score == 1.0
    assert f"Combined result: {len(apps)}/{len(apps)} apps passed" in done.stdout
    assert partial_reward(done.stdout) == 1.0


def test_multi_app_partial_progress(instance_factory: Any) -> None:
    env = get_environment("orderdesk")
    task = env.task("orderdesk-damaged-speaker-resolution")
    instance = instance_factory(env)
    instance.play(
        [{"tool": "issue_refund", "params": {"order_id": 1007, "amount_cents": 3999, "reason": "damaged"}}]
    )
    outcome = instance.verify(task)
    assert outcome.score == 0.0
    assert "App refunds: 1" in outcome.stdout
    assert "Combined result: 1/3 apps passed" in outcome.stdout
    assert partial_reward(outcome.stdout) == pytest.approx(1 / 3)


# -- the verifiers also run in the sandbox the local server uses -------------------------------------

SANDBOXED = [
    "orderdesk-damaged-speaker-resolution",
    "orderdesk-october-refund-total",
    "calendar-onboard-new-hire",
    "calendar-all-hands-organizer",
]


@pytest.mark.parametrize("task_key", SANDBOXED)
def test_verifiers_run_sandboxed(task_key: str, instance_factory: Any) -> None:
    env = get_environment(task_key.split("-", 1)[0])
    task = env.task(task_key)
    instance = instance_factory(env)
    databases = {"seed": instance.seed, "current": instance.current}
    empty = run_sandboxed_sync(task["verifier_code"], databases=databases)
    assert (empty.error, empty.score) == (None, 0.0), empty.stdout
    final_answer = instance.play(_solution(task))
    done = run_sandboxed_sync(task["verifier_code"], databases=databases, final_answer=final_answer)
    assert (done.error, done.score) == (None, 1.0), done.stdout
