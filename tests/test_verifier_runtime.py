"""The verifier runtime's public-SDK helpers: the query builder, snapshot diffs, ``IgnoreConfig``,
``env.instance``, a kept ``@verifier`` line, ``from fleet.verifiers import ...``, the call forms
(``args``/``kwargs``, ``"snapshots"``), the plain-data pickle, and the same results in process
and in the sandbox (docs/verifier-runtime.md)."""

from __future__ import annotations

import datetime
import os
import pickle
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fleet_local.sandbox import PlainDataError, SandboxError, dump_plain, load_plain, run_sandboxed_sync
from fleet_sdk.verifiers import (
    DatabaseSnapshot,
    IgnoreConfig,
    QueryBuilder,
    SnapshotDiff,
    SQLiteEnvironment,
    run_local_sync,
)

SCHEMA = """
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, email TEXT);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER, status TEXT, total INTEGER, meta TEXT);
CREATE TABLE lines (order_id INTEGER, sku TEXT, qty INTEGER, PRIMARY KEY (order_id, sku));
CREATE TABLE log (message TEXT);
CREATE TABLE "order" ("the id" INTEGER PRIMARY KEY, "select" TEXT);
INSERT INTO customers VALUES (1, 'Ada Lovelace', 'ada@example.com'), (2, 'Grace Hopper', NULL),
    (3, 'Alan Turing', 'alan@example.com');
INSERT INTO orders VALUES (10, 1, 'pending', 100, '{"a": 1, "b": [1, 2]}'), (11, 2, 'shipped', 50, NULL),
    (12, 1, 'delivered', 75, NULL);
INSERT INTO lines VALUES (10, 'A', 1), (10, 'B', 2);
INSERT INTO log VALUES ('start');
INSERT INTO "order" VALUES (1, 'reserved words');
"""


def _database(path: Path, changes: str = "") -> str:
    conn = sqlite3.connect(path)
    conn.executescript(SCHEMA + changes)
    conn.close()
    return str(path)


@pytest.fixture
def paths(tmp_path: Path) -> Callable[[str], dict[str, str]]:
    """``paths(changes)``: a seed database and a current one with ``changes`` (SQL) applied."""

    def make(changes: str = "") -> dict[str, str]:
        folder = tmp_path / f"dbs{len(list(tmp_path.iterdir()))}"
        folder.mkdir()
        return {"seed": _database(folder / "seed.db"), "current": _database(folder / "current.db", changes)}

    return make


@pytest.fixture
def env(paths: Callable[[str], dict[str, str]]) -> Iterator[SQLiteEnvironment]:
    with SQLiteEnvironment(paths()) as environment:
        yield environment


def diff_of(
    paths: Callable[[str], dict[str, str]], changes: str, ignore: IgnoreConfig | None = None
) -> SnapshotDiff:
    environment = SQLiteEnvironment(paths(changes))
    return environment.db("seed").diff(environment.db("current"), ignore)


# -- the query builder --------------------------------------------------------------------------


def test_conditions_select_sort_and_limit(env: SQLiteEnvironment) -> None:
    orders = env.db("current").table("orders")
    assert orders.eq("id", 10).first() == {
        "id": 10,
        "customer_id": 1,
        "status": "pending",
        "total": 100,
        "meta": '{"a": 1, "b": [1, 2]}',
    }
    ids = lambda query: [row["id"] for row in query.select("id").sort("id").all()]  # noqa: E731
    assert ids(orders.neq("status", "pending")) == [11, 12]
    assert ids(orders.gt("total", 50)) == [10, 12]
    assert ids(orders.gte("total", 75)) == [10, 12]
    assert ids(orders.lt("total", 75)) == [11]
    assert ids(orders.lte("total", 75)) == [11, 12]
    assert ids(orders.in_("status", ["shipped", "delivered"])) == [11, 12]
    assert ids(orders.in_("status", [])) == []
    assert ids(orders.not_in("status", ["shipped"])) == [10, 12]
    assert ids(orders.is_null("meta")) == [11, 12]
    assert ids(orders.not_null("meta")) == [10]
    assert ids(orders.where({"customer_id": 1}, status="delivered")) == [12]
    assert [r["id"] for r in orders.select("id").sort("total", desc=True).limit(2).all()] == [10, 12]
    assert orders.select("COUNT(*) AS n", "MAX(total) AS top").first() == {"n": 3, "top": 100}
    assert orders.eq("id", 99).first() is None


def test_ilike_ignores_case_and_join_reads_both_tables(env: SQLiteEnvironment) -> None:
    customers = env.db("current").table("customers")
    assert [r["name"] for r in customers.ilike("name", "%LOVE%").all()] == ["Ada Lovelace"]
    joined = (
        env.db("current")
        .table("orders")
        .join("customers", {"customer_id": "id"})
        .select("orders.id", "customers.name")
        .eq("orders.status", "shipped")
        .all()
    )
    assert joined == [{"id": 11, "name": "Grace Hopper"}]


def test_a_builder_is_immutable_and_eq_none_matches_nothing(env: SQLiteEnvironment) -> None:
    """``eq(col, None)`` is SQL's ``= NULL`` (no row), as in the public SDK; ``is_null`` finds them."""
    customers = env.db("current").table("customers")
    ada = customers.eq("id", 1)
    both = ada.eq("name", "Grace Hopper")
    assert ada.count() == 1 and both.count() == 0
    assert customers.eq("email", None).count() == 0
    assert customers.is_null("email").count() == 1


def test_count_is_an_int_that_asserts(env: SQLiteEnvironment) -> None:
    count = env.db("current").table("orders").limit(1).count()
    assert count == 3 and isinstance(count, int) and count.value == 3
    assert count.assert_eq(3).assert_gt(2).assert_between(1, 3) is count
    for check in (lambda: count.assert_eq(2), lambda: count.assert_gt(3), lambda: count.assert_between(4, 9)):
        with pytest.raises(AssertionError, match="3"):
            check()


def test_assertions_name_the_query(env: SQLiteEnvironment) -> None:
    orders = env.db("current").table("orders")
    assert orders.eq("id", 10).assert_exists().assert_eq("status", "pending") is not None
    orders.eq("id", 99).assert_none()
    with pytest.raises(AssertionError, match=r"(?s)expected a row.*SELECT \* FROM `orders` WHERE `id` = \?"):
        orders.eq("id", 99).assert_exists()
    with pytest.raises(AssertionError, match="expected no row"):
        orders.eq("id", 10).assert_none()
    with pytest.raises(AssertionError, match=r"orders\.status is 'pending', expected 'cancelled'"):
        orders.eq("id", 10).assert_eq("status", "cancelled")
    assert orders.eq("id", 10).explain() == "SQL: SELECT * FROM `orders` WHERE `id` = ?\nParams: [10]"


def test_names_are_quoted_and_values_bound(env: SQLiteEnvironment) -> None:
    """Reserved words and spaces work as names; a value is never SQL."""
    db = env.db("current")
    assert db.table("order").eq("the id", 1).select("select").first() == {"select": "reserved words"}
    assert db.table("customers").eq("name", "x' OR '1'='1").count() == 0
    for misspelled in ("id = 1 OR 1", "nmae"):  # an error, never a name read as a string
        with pytest.raises(sqlite3.OperationalError, match="no such column"):
            db.table("customers").eq(misspelled, 1).all()
    with pytest.raises(ValueError, match="limit"):
        db.table("customers").limit(-1)


def test_database_helpers(env: SQLiteEnvironment) -> None:
    db = env.db("current")
    assert db.tables() == ["customers", "lines", "log", "order", "orders"]
    assert db.snapshot() is db and isinstance(db.table("log"), QueryBuilder)
    db.expect_row("customers", {"id": 1}, {"name": "Ada Lovelace"})
    db.expect_rows("orders", {"customer_id": 1}, count=2, contains=[{"id": 12, "status": "delivered"}])
    db.expect_absent_row("customers", {"name": "Nobody"})
    with pytest.raises(AssertionError):
        db.expect_rows("orders", {"customer_id": 1}, contains=[{"id": 11}])


# -- snapshot diffs -----------------------------------------------------------------------------

CANCEL_10 = "UPDATE orders SET status = 'cancelled' WHERE id = 10;"


def test_changes_are_matched_by_key(paths: Callable[[str], dict[str, str]]) -> None:
    diff = diff_of(
        paths,
        CANCEL_10
        + "INSERT INTO orders VALUES (13, 3, 'pending', 5, NULL); DELETE FROM orders WHERE id = 11;"
        + "UPDATE lines SET qty = 3 WHERE order_id = 10 AND sku = 'B'; INSERT INTO log VALUES ('more');"
        # The same JSON written differently is not a change.
        + 'UPDATE orders SET meta = \'{"b": [1, 2], "a": 1}\' WHERE id = 10;',
    )
    orders = diff.changes["orders"]
    assert orders["primary_key"] == ["id"] and orders["total_changes"] == 3 and orders["unchanged_count"] == 1
    assert [row["row_id"] for row in orders["added_rows"]] == [13]
    assert [row["row_id"] for row in orders["removed_rows"]] == [11]
    assert orders["modified_rows"] == [
        {
            "row_id": 10,
            "changes": {"status": {"before": "pending", "after": "cancelled"}},
            "data": {
                "id": 10,
                "customer_id": 1,
                "status": "cancelled",
                "total": 100,
                "meta": '{"b": [1, 2], "a": 1}',
            },
        }
    ]
    assert diff.changes["lines"]["modified_rows"][0]["row_id"] == (10, "B")
    assert diff.changes["log"]["primary_key"] == ["rowid"]
    assert diff.changes["log"]["added_rows"] == [{"row_id": 2, "data": {"message": "more"}}]
    assert diff.changes["customers"]["total_changes"] == 0


def test_ignore_config_leaves_tables_and_fields_out(paths: Callable[[str], dict[str, str]]) -> None:
    changes = CANCEL_10 + "UPDATE orders SET total = 1 WHERE id = 11; INSERT INTO log VALUES ('x');"
    ignore = IgnoreConfig(tables={"log"}, fields={"total"})
    assert ignore.should_ignore_table("log") and ignore.should_ignore_field("orders", "total")
    diff = diff_of(paths, changes, ignore)
    assert "log" not in diff.changes
    assert [row["row_id"] for row in diff.changes["orders"]["modified_rows"]] == [10]
    diff.expect_only([{"table": "orders", "pk": 10, "field": "status", "after": "cancelled"}])
    by_table = IgnoreConfig(table_fields={"orders": {"status", "total"}}, tables={"log"})
    diff_of(paths, changes, by_table).expect_only([])


def test_expect_only_allows_the_listed_changes_and_names_the_others(
    paths: Callable[[str], dict[str, str]],
) -> None:
    changes = CANCEL_10 + "INSERT INTO orders VALUES (13, 3, 'pending', 5, NULL); DELETE FROM log;"
    allowed = [
        {"table": "orders", "pk": "10", "field": "status", "before": "pending", "after": "cancelled"},
        {"table": "orders", "pk": 13, "field": None, "after": "__added__"},
        {"table": "log", "pk": 1, "field": None, "after": "__removed__"},
        {"table": "customers", "pk": 1, "field": "name", "after": "unused"},  # allowed, not required
    ]
    diff = diff_of(paths, changes)
    assert diff.expect_only(allowed) is diff
    with pytest.raises(AssertionError) as failed:
        diff.expect_only(allowed[:1])
    message = str(failed.value)
    assert message.startswith("unexpected database changes (2):")
    assert "row 13 added to 'orders'" in message and "row 1 removed from 'log'" in message
    with pytest.raises(AssertionError, match="status changed from 'pending' to 'cancelled'"):
        diff.expect_only([{"table": "orders", "pk": 10, "field": "status", "after": "shipped"}, *allowed[1:]])
    with pytest.raises(AssertionError, match="no spec allows it"):
        diff.expect_only([{**allowed[0], "before": "shipped"}, *allowed[1:]])
    diff_of(paths, "").expect_only([])
    with pytest.raises(AssertionError, match=r"unexpected database changes \(3\)"):
        diff.expect_only([])


def test_typed_specs_check_values(paths: Callable[[str], dict[str, str]]) -> None:
    changes = CANCEL_10 + "UPDATE orders SET total = 90 WHERE id = 10;"
    changes += (
        "INSERT INTO customers VALUES (4, 'Katherine Johnson', NULL); DELETE FROM lines WHERE sku = 'A';"
    )
    diff = diff_of(paths, changes)
    insert = {
        "table": "customers",
        "pk": 4,
        "type": "insert",
        "fields": [("id", 4), ("name", ...), ("email", None)],
    }
    delete = {"table": "lines", "pk": [10, "A"], "type": "delete", "fields": [("qty", 1)]}
    modify = {
        "table": "orders",
        "pk": 10,
        "type": "modify",
        "resulting_fields": [("status", "cancelled")],
        "no_other_changes": False,
    }
    diff.expect_only_v2([insert, delete, modify])
    with pytest.raises(AssertionError, match="total changed, and it is not in resulting_fields"):
        diff.expect_only_v2([insert, delete, {**modify, "no_other_changes": True}])
    with pytest.raises(AssertionError, match="email is None, expected 'x'"):
        diff.expect_only_v2(
            [{**insert, "fields": [("id", 4), ("name", ...), ("email", "x")]}, delete, modify]
        )
    with pytest.raises(AssertionError, match="field 'email' is not in the spec's fields"):
        diff.expect_only_v2([{**insert, "fields": [("id", 4), ("name", ...)]}, delete, modify])
    with pytest.raises(ValueError, match="no_other_changes"):
        diff.expect_only_v2([insert, delete, {k: v for k, v in modify.items() if k != "no_other_changes"}])


def test_expect_exactly_needs_every_spec_to_happen(paths: Callable[[str], dict[str, str]]) -> None:
    diff = diff_of(paths, CANCEL_10)
    modify = {"table": "orders", "pk": 10, "type": "modify", "resulting_fields": None}
    diff.expect_exactly([modify])
    with pytest.raises(AssertionError, match=r"expected delete of row 11 in 'orders' did not happen"):
        diff.expect_exactly([modify, {"table": "orders", "pk": 11, "type": "delete"}])
    with pytest.raises(AssertionError, match="no spec allows it"):
        diff.expect_exactly([])
    with pytest.raises(ValueError, match="needs type"):
        diff.expect_exactly([{"table": "orders", "pk": 10, "field": "status", "after": "cancelled"}])


def test_expect_allows_and_forbids_columns(paths: Callable[[str], dict[str, str]]) -> None:
    diff = diff_of(paths, CANCEL_10 + "INSERT INTO log VALUES ('x');")
    diff.expect(allow=[{"table": "orders", "field": "status"}])
    with pytest.raises(AssertionError, match=r"orders\.status changed .* and is forbidden"):
        diff.expect(forbid=[{"table": "orders", "field": "status"}])
    with pytest.raises(AssertionError, match="is not allowed"):
        diff.expect(allow=[{"table": "orders", "field": "total"}])
    with pytest.raises(AssertionError, match="rows were added to or removed from 'log'"):
        diff.expect(forbid=[{"table": "log"}])


# -- verifier code written for the public SDK ---------------------------------------------------

PUBLIC_SDK_VERIFIER = """
import fleet
import fleet.verifiers.db as db_module
from fleet.verifiers import IgnoreConfig, TASK_SUCCESSFUL_SCORE as OK
from fleet.verifiers.db import DatabaseSnapshot, SnapshotDiff
from fleet import verifier as register

assert db_module.IgnoreConfig is IgnoreConfig is fleet.verifiers.IgnoreConfig
KINDS = (DatabaseSnapshot, SnapshotDiff)


@register(key="cancel-order-10", extra_requirements=["x"])
async def verify(env, final_answer=None):
    env.instance.load()
    assert env.instance.db("seed").table("orders").eq("id", 10).first()["status"] == "pending"
    order = env.db("current").table("orders").eq("id", 10).first()
    diff = env.db("seed").diff(env.db("current"), IgnoreConfig(tables={"log"}))
    diff.expect_only([{"table": "orders", "pk": 10, "field": "status", "after": "cancelled"}])
    print("status", order["status"])
    return OK if final_answer == "done" else 0
"""


@pytest.mark.parametrize("where", ["in_process", "sandbox"])
def test_a_public_sdk_verifier_runs_as_written(where: str, paths: Callable[[str], dict[str, str]]) -> None:
    databases = paths(CANCEL_10 + "INSERT INTO log VALUES ('x');")
    if where == "sandbox":
        outcome = run_sandboxed_sync(
            PUBLIC_SDK_VERIFIER, databases=databases, kwargs={"final_answer": "done"}
        )
    else:
        with SQLiteEnvironment(databases) as environment:
            outcome = run_local_sync(PUBLIC_SDK_VERIFIER, environment, kwargs={"final_answer": "done"})
    assert (outcome.score, outcome.error, outcome.stdout) == (1.0, None, "status cancelled\n")


@pytest.mark.parametrize(
    ("line", "name"),
    [
        ("from fleet.tasks import Task", "fleet.tasks"),
        ("import fleet.judge", "fleet.judge"),
    ],
)
def test_other_public_sdk_modules_are_not_there(line: str, name: str, env: SQLiteEnvironment) -> None:
    outcome = run_local_sync(f"{line}\ndef verify(env):\n    return 1\n", env)
    assert outcome.error is not None and outcome.error.message.startswith("ModuleNotFoundError")
    assert repr(name) in outcome.error.message and "fleet.verifiers.db" in outcome.error.message


def test_a_bare_verifier_decorator_and_plain_imports_still_work(env: SQLiteEnvironment) -> None:
    code = "import json\n@verifier\ndef verify(env):\n    return json.loads('1')\n"
    assert run_local_sync(code, env).score == 1.0


def test_a_database_snapshot_opens_a_file_in_process(paths: Callable[[str], dict[str, str]]) -> None:
    databases = paths()
    snapshot = DatabaseSnapshot(databases["seed"], name="seed")
    assert (snapshot.name, snapshot.db_path, snapshot.read_only) == ("seed", databases["seed"], True)
    assert snapshot.table("customers").count() == 3


# -- the call forms -----------------------------------------------------------------------------

ARGUMENTS_VERIFIER = """
def verify(env, first, *rest, final_answer=None, **extra):
    kinds = {name: type(value).__name__ for name, value in extra.items()}
    first = type(first).__name__
    return {"score": 1, "first": first, "rest": len(rest), "answer": final_answer, "kinds": kinds}
"""
EXTRA = {"pair": (1, 2), "tags": frozenset({"a"}), "blob": b"\x00", "number": 2 + 3j}
KINDS = {"pair": "tuple", "tags": "frozenset", "blob": "bytes", "number": "complex"}


@pytest.mark.parametrize("where", ["in_process", "sandbox"])
def test_args_and_kwargs_arrive_in_their_own_types(
    where: str, paths: Callable[[str], dict[str, str]]
) -> None:
    databases = paths()
    kwargs = {"final_answer": "42", **EXTRA}
    if where == "sandbox":
        outcome = run_sandboxed_sync(
            ARGUMENTS_VERIFIER, databases=databases, args=[{1, 2}, None], kwargs=kwargs
        )
    else:
        with SQLiteEnvironment(databases) as environment:
            outcome = run_local_sync(ARGUMENTS_VERIFIER, environment, args=[{1, 2}, None], kwargs=kwargs)
    assert outcome.score == 1.0, outcome.error
    result = dict(outcome.result) if where == "in_process" else outcome.result
    assert (result["first"], result["rest"], result["answer"], result["kinds"]) == ("set", 1, "42", KINDS)


def test_a_keyword_the_verifier_does_not_take_is_an_error_not_dropped(env: SQLiteEnvironment) -> None:
    outcome = run_local_sync("def verify(env):\n    return 1\n", env, kwargs={"final_answer": "42"})
    assert outcome.error is not None and "unexpected keyword argument 'final_answer'" in outcome.error.message


@pytest.mark.parametrize("where", ["in_process", "sandbox"])
def test_the_snapshots_convention_passes_before_after_and_the_answer(
    where: str, paths: Callable[[str], dict[str, str]]
) -> None:
    code = (
        "def validate(before, after, transcript=None):\n"
        "    change = {'table': 'orders', 'pk': 10, 'field': 'status', 'after': 'cancelled'}\n"
        "    before.diff(after).expect_only([change])\n"
        "    return [before.name, after.name, transcript]\n"
    )
    databases = paths(CANCEL_10)
    if where == "sandbox":
        outcome = run_sandboxed_sync(code, databases=databases, final_answer="t", convention="snapshots")
    else:
        with SQLiteEnvironment(databases) as environment:
            outcome = run_local_sync(code, environment, final_answer="t", convention="snapshots")
    assert outcome.result == ["seed", "current", "t"]


def test_arguments_go_with_the_env_convention_and_without_a_final_answer(
    env: SQLiteEnvironment, paths: Callable[[str], dict[str, str]]
) -> None:
    code = "def verify(env, *a, **k):\n    return 1\n"
    with pytest.raises(ValueError, match="not both"):
        run_local_sync(code, env, "answer", kwargs={"x": 1})
    with pytest.raises(ValueError, match="'env' convention"):
        run_local_sync(code, env, args=[1], convention="snapshots")
    with pytest.raises(SandboxError, match="not both"):
        run_sandboxed_sync(code, databases=paths(), final_answer="a", args=[1])
    with pytest.raises(SandboxError, match=r"datetime\.date"):
        run_sandboxed_sync(code, databases=paths(), kwargs={"when": datetime.date(2026, 1, 1)})


# -- the plain-data pickle ----------------------------------------------------------------------

PLAIN = {
    "args": (None, "42", [1, 2.5, None, True], {"env": "inst_1"}),
    "kwargs": {
        "final_answer": "x",
        "s": {1, 2},
        "f": frozenset({"a"}),
        "b": b"\xff",
        "c": 1j,
        "ba": bytearray(b"z"),
    },
}


@pytest.mark.parametrize("protocol", range(2, pickle.HIGHEST_PROTOCOL + 1))
def test_plain_data_round_trips_in_every_protocol(protocol: int) -> None:
    value = (
        PLAIN
        if protocol >= 5
        else {**PLAIN, "kwargs": {k: v for k, v in PLAIN["kwargs"].items() if k != "ba"}}
    )
    if protocol < 3:  # bytes go through codecs.encode before protocol 3, which is refused
        value = {**value, "kwargs": {k: v for k, v in value["kwargs"].items() if k != "b"}}
    assert load_plain(pickle.dumps(value, protocol=protocol)) == value
    assert load_plain(dump_plain(PLAIN)) == PLAIN


class _RunsACommand:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


def test_a_pickle_that_would_run_code_is_refused_before_anything_runs(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    with pytest.raises(PlainDataError) as refused:
        load_plain(pickle.dumps({"kwargs": {"x": _RunsACommand(marker)}}))
    assert refused.value.offending in {"posix.system", "os.system"} and not marker.exists()


@pytest.mark.parametrize(
    ("value", "offending"),
    [
        (datetime.datetime(2026, 1, 1), "datetime.datetime"),
        ({"when": datetime.date(2026, 1, 1)}, "datetime.date"),
        ([Path("/x")], "pathlib.PosixPath"),
    ],
)
def test_objects_are_refused_by_name(value: Any, offending: str) -> None:
    with pytest.raises(PlainDataError, match=offending.replace(".", r"\.")) as refused:
        load_plain(pickle.dumps(value))
    assert refused.value.offending == offending
    with pytest.raises(PlainDataError, match=offending.replace(".", r"\.")):
        dump_plain(value)


class _Count(int):
    pass


def test_subclasses_cycles_depth_size_and_garbage_are_refused() -> None:
    with pytest.raises(PlainDataError, match="_Count"):
        dump_plain([_Count(1)])
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(PlainDataError, match="contains itself"):
        load_plain(pickle.dumps(loop))
    deep: list[Any] = []
    for _ in range(70):
        deep = [deep]
    with pytest.raises(PlainDataError, match="64 containers deep"):
        load_plain(pickle.dumps(deep))
    shared = [0] * 10
    wide = [shared] * 20_000  # 200,000 values reached from a small pickle
    with pytest.raises(PlainDataError, match="more than 100000 values"):
        load_plain(pickle.dumps(wide))
    with pytest.raises(PlainDataError, match="not a readable pickle"):
        load_plain(b"not a pickle")
    with pytest.raises(PlainDataError, match=r"__builtin__\.bytearray"):  # Python 2's name in protocol 2
        load_plain(pickle.dumps(bytearray(b"x"), protocol=2))
