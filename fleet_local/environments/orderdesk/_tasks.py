"""Tasks of ``orderdesk``, each with a verifier and a reference solution."""

from __future__ import annotations

from .._definition import TaskDefinition
from .._verifier_lib import TaskFactory, step
from ._seed import CURRENT_DATE, LOGGED_IN_USER, TABLES

ENV_KEY = "orderdesk"
ENV_VERSION = "v1.0.0"
ENV_VARIABLES = {"CURRENT_DATE": CURRENT_DATE, "LOGGED_IN_USER": LOGGED_IN_USER}


_step = step
_task = TaskFactory(
    ENV_KEY,
    ENV_VERSION,
    ENV_VARIABLES,
    TABLES,
)


_REFUND_LATE_ORDER = r'''
def verify(env, final_answer=None):
    successes, errors = [], []
    late = late_delivered_orders(env, "Liam O'Connor")
    added, removed, modified = table_diff(env, "refunds")
    if removed or modified:
        errors.append("existing refunds were changed or removed")
    if len(added) != 1:
        errors.append("expected exactly one new refund, found %d" % len(added))
    else:
        refund = added[0]
        if refund["order_id"] not in late:
            errors.append("refund is on order %s, not a late order %s" % (refund["order_id"], sorted(late)))
        elif refund["amount_cents"] != late[refund["order_id"]]:
            full = late[refund["order_id"]]
            errors.append("refund of %s cents is not the full %s" % (refund["amount_cents"], full))
        else:
            successes.append("full refund issued on late order %s" % refund["order_id"])
        if "late" not in (refund["reason"] or "").lower():
            errors.append("refund reason %r does not mention the late delivery" % refund["reason"])
        if refund["status"] != "approved":
            errors.append("refund status is %r" % refund["status"])
    errors.extend(unexpected_changes(env, allowed=("refunds", "order_notes")))
    return report_single(successes, errors)


def late_delivered_orders(env, customer_name):
    """Ids and totals of the customer's orders delivered after their promised date (seed data)."""
    result = env.db("seed").query(
        "SELECT o.id, o.total_cents FROM orders o JOIN customers c ON c.id = o.customer_id "
        "WHERE c.name = ? AND o.status = 'delivered' AND o.delivered_at > o.promised_by",
        [customer_name],
    )
    return {row[0]: row[1] for row in result.rows}
'''

_CANCEL_PENDING = r"""
def verify(env, final_answer=None):
    successes, errors = [], []
    orders = table_rows(env, "current", "orders")
    order = orders.get(1021)
    if order is None or order["status"] != "cancelled":
        errors.append("order 1021 is not cancelled")
    else:
        successes.append("order 1021 cancelled")
        if "mistake" not in (order["cancel_reason"] or "").lower():
            errors.append("cancel reason %r does not say it was ordered by mistake" % order["cancel_reason"])
    _, _, modified = table_diff(env, "orders")
    others = [after["id"] for before, after in modified if after["id"] != 1021]
    if others:
        errors.append("other orders changed: %s" % others)
    stock_sql = "SELECT stock FROM products WHERE sku = 'KB-MECH-87'"
    stock_before = env.db("seed").query(stock_sql, []).rows[0][0]
    stock_after = env.db("current").query(stock_sql, []).rows[0][0]
    if stock_after != stock_before + 1:
        errors.append("keyboard stock is %s, expected %s after restocking" % (stock_after, stock_before + 1))
    _, _, product_changes = table_diff(env, "products")
    if [after["sku"] for before, after in product_changes if after["sku"] != "KB-MECH-87"]:
        errors.append("other products changed")
    errors.extend(unexpected_changes(env, allowed=("orders", "products", "order_notes")))
    return report_single(successes, errors)
"""

_CREATE_ORDER = r"""
def verify(env, final_answer=None):
    successes, errors = [], []
    added, removed, modified = table_diff(env, "orders")
    if removed or modified:
        errors.append("existing orders were changed or removed")
    if len(added) != 1:
        errors.append("expected exactly one new order, found %d" % len(added))
        return report_single(successes, errors)
    order = added[0]
    customer = env.db("current").query("SELECT name FROM customers WHERE id = ?", [order["customer_id"]]).rows
    if not customer or customer[0][0] != "Hannah Lee":
        errors.append("new order is not for Hannah Lee")
    if order["status"] != "pending":
        errors.append("new order status is %r" % order["status"])
    if not normalized_contains("88 Palm Ave", order["shipping_address"]):
        errors.append("shipping address %r is not 88 Palm Ave" % order["shipping_address"])
    items = env.db("current").query(
        "SELECT p.sku, i.quantity, i.unit_price_cents, p.price_cents FROM order_items i "
        "JOIN products p ON p.id = i.product_id WHERE i.order_id = ?",
        [order["id"]],
    ).rows
    quantities = {}
    for sku, quantity, unit_price, price in items:
        quantities[sku] = quantities.get(sku, 0) + quantity
        if unit_price != price:
            errors.append("%s charged %s instead of the list price %s" % (sku, unit_price, price))
    if quantities != {"SSD-1TB-EXT": 2, "CAB-HDMI-2M": 1}:
        errors.append("order items are %s" % quantities)
    else:
        successes.append("order has 2 x SSD-1TB-EXT and 1 x CAB-HDMI-2M")
    if order["total_cents"] != 2 * 10900 + 1299:
        errors.append("order total is %s cents" % order["total_cents"])
    item_added, item_removed, item_modified = table_diff(env, "order_items")
    if item_removed or item_modified or any(i["order_id"] != order["id"] for i in item_added):
        errors.append("items of other orders changed")
    before = table_rows(env, "seed", "products")
    after = table_rows(env, "current", "products")
    expected_stock = {"SSD-1TB-EXT": -2, "CAB-HDMI-2M": -1}
    for pid, row in before.items():
        want = dict(row, stock=row["stock"] + expected_stock.get(row["sku"], 0))
        if after.get(pid) != want:
            errors.append("product %s is %r, expected %r" % (row["sku"], after.get(pid), want))
    errors.extend(unexpected_changes(env, allowed=("orders", "order_items", "products", "order_notes")))
    if not errors:
        successes.append("stock reserved and nothing else changed")
    return report_single(successes, errors)
"""

_DEACTIVATE_OUT_OF_STOCK = r"""
def verify(env, final_answer=None):
    successes, errors = [], []
    before = table_rows(env, "seed", "products")
    after = table_rows(env, "current", "products")
    for pid, row in before.items():
        should_deactivate = row["stock"] == 0 and row["active"] == 1
        want = dict(row, active=0) if should_deactivate else row
        if after.get(pid) != want:
            errors.append("product %s is %r, expected %r" % (row["sku"], after.get(pid), want))
        elif should_deactivate:
            successes.append("%s deactivated" % row["sku"])
    if len(after) != len(before):
        errors.append("products were added or removed")
    errors.extend(unexpected_changes(env, allowed=("products",)))
    return report_single(successes, errors)
"""

_SHIP_OVERDUE = r'''
def verify(env, final_answer=None):
    successes, errors = [], []
    today, overdue = overdue_paid_orders(env)
    before = table_rows(env, "seed", "orders")
    after = table_rows(env, "current", "orders")
    for oid, row in before.items():
        if oid in overdue:
            want = dict(row, status="shipped", shipped_at=today)
            if after.get(oid) != want:
                errors.append("order %s should be shipped today, is %r" % (oid, after.get(oid)))
            else:
                successes.append("order %s shipped" % oid)
        elif after.get(oid) != row:
            errors.append("order %s changed but was not overdue" % oid)
    errors.extend(unexpected_changes(env, allowed=("orders", "order_notes")))
    return report_single(successes, errors)


def overdue_paid_orders(env):
    """Paid orders whose promised date is today or earlier, from the seed."""
    today = env.db("seed").query("SELECT value FROM app_settings WHERE key = 'current_date'", []).rows[0][0]
    result = env.db("seed").query(
        "SELECT id FROM orders WHERE status = 'paid' AND promised_by <= ? ORDER BY id", [today]
    )
    return today, [row[0] for row in result.rows]
'''

_UPDATE_EMAIL = r"""
def verify(env, final_answer=None):
    before = table_rows(env, "seed", "customers")
    after = table_rows(env, "current", "customers")
    grace = [cid for cid, row in before.items() if row["name"] == "Grace Kim"][0]
    for cid, row in before.items():
        current = after.get(cid)
        if cid == grace:
            if current is None or (current["email"] or "").lower() != "grace.kim@newmail.example":
                print("email of Grace Kim is not updated")
                return TASK_FAILED_SCORE
            if dict(current, email=row["email"]) != row:
                print("other fields of Grace Kim changed")
                return TASK_FAILED_SCORE
        elif current != row:
            print("customer %s changed" % cid)
            return TASK_FAILED_SCORE
    problems = unexpected_changes(env, allowed=("customers",))
    if problems:
        print(problems)
        return TASK_FAILED_SCORE
    return TASK_SUCCESSFUL_SCORE
"""

_DOCK_PRICE = r"""
def verify(env, final_answer=None):
    successes, errors = [], []
    before = table_rows(env, "seed", "products")
    after = table_rows(env, "current", "products")
    for pid, row in before.items():
        if row["sku"] == "DOCK-TB4":
            want = dict(row, price_cents=22900, stock=row["stock"] + 10)
            if after.get(pid) != want:
                errors.append("DOCK-TB4 is %r, expected %r" % (after.get(pid), want))
            else:
                successes.append("DOCK-TB4 repriced to 22900 and restocked by 10")
        elif after.get(pid) != row:
            errors.append("product %s changed" % row["sku"])
    errors.extend(unexpected_changes(env, allowed=("products",)))
    return report_single(successes, errors)
"""

_UPGRADE_LOYAL = r'''
def verify(env, final_answer=None):
    successes, errors = [], []
    upgrades = expected_upgrades(env, 10000)
    if not upgrades:
        errors.append("verifier found no customer to upgrade")
    before = table_rows(env, "seed", "customers")
    after = table_rows(env, "current", "customers")
    for cid, row in before.items():
        want = dict(row, tier="gold") if cid in upgrades else row
        if after.get(cid) != want:
            errors.append("customer %s (%s) is %r, expected tier %s" % (
                cid, row["name"], (after.get(cid) or {}).get("tier"), want["tier"]))
        elif cid in upgrades:
            successes.append("%s upgraded to gold" % row["name"])
    errors.extend(unexpected_changes(env, allowed=("customers",)))
    return report_single(successes, errors)


def expected_upgrades(env, threshold_cents):
    """Standard-tier customers whose delivered orders total more than the threshold (seed data)."""
    result = env.db("seed").query(
        "SELECT c.id FROM customers c JOIN orders o ON o.customer_id = c.id "
        "WHERE c.tier = 'standard' AND o.status = 'delivered' "
        "GROUP BY c.id HAVING SUM(o.total_cents) > ? ORDER BY c.id",
        [threshold_cents],
    )
    return [row[0] for row in result.rows]
'''

_COUNT_PENDING = r"""
def verify(env, final_answer=None):
    expected = env.db("seed").query("SELECT COUNT(*) FROM orders WHERE status = 'pending'", []).rows[0][0]
    numbers = answer_numbers(final_answer)
    problems = unexpected_changes(env)
    if problems:
        print("the database changed: %s" % problems)
        return TASK_FAILED_SCORE
    if not numbers or numbers[0] != expected:
        print("expected %d pending orders, answer was %r" % (expected, final_answer))
        return TASK_FAILED_SCORE
    return TASK_SUCCESSFUL_SCORE
"""

_OCTOBER_REFUNDS = r"""
def verify(env, final_answer=None):
    total_cents = env.db("seed").query(
        "SELECT COALESCE(SUM(amount_cents), 0) FROM refunds "
        "WHERE status = 'approved' AND created_at BETWEEN '2026-10-01' AND '2026-10-31'",
        [],
    ).rows[0][0]
    numbers = answer_numbers(final_answer)
    if unexpected_changes(env):
        print("the database changed")
        return TASK_FAILED_SCORE
    if total_cents / 100.0 in numbers or float(total_cents) in numbers:
        return TASK_SUCCESSFUL_SCORE
    print("expected $%.2f, answer was %r" % (total_cents / 100.0, final_answer))
    return TASK_FAILED_SCORE
"""

_TOP_SPENDER = r"""
def verify(env, final_answer=None):
    totals = delivered_totals(env)
    winner = totals[0][0]
    answer = answer_text(final_answer)
    named = [name for name, _ in totals if normalized_contains(name, answer)]
    if unexpected_changes(env):
        print("the database changed")
        return TASK_FAILED_SCORE
    if named != [winner]:
        print("expected %s, the answer names %s" % (winner, named))
        return TASK_FAILED_SCORE
    return TASK_SUCCESSFUL_SCORE


def delivered_totals(env):
    result = env.db("seed").query(
        "SELECT c.name, SUM(o.total_cents) FROM customers c JOIN orders o ON o.customer_id = c.id "
        "WHERE o.status = 'delivered' GROUP BY c.id ORDER BY SUM(o.total_cents) DESC",
        [],
    )
    return [(row[0], row[1]) for row in result.rows]
"""

_DAMAGED_SPEAKER = r"""
def verify(env, final_answer=None):
    results = []

    # refunds: one new $39.99 refund on order 1007 for the damaged speaker
    successes, errors = [], []
    added, removed, modified = table_diff(env, "refunds")
    if removed or modified:
        errors.append("existing refunds changed")
    mine = [r for r in added if r["order_id"] == 1007]
    if len(added) != 1 or len(mine) != 1:
        errors.append("expected one new refund on order 1007, found %d new refunds" % len(added))
    else:
        refund = mine[0]
        if refund["amount_cents"] != 3999:
            errors.append("refund amount is %s cents, expected 3999" % refund["amount_cents"])
        elif "damag" not in (refund["reason"] or "").lower():
            errors.append("refund reason %r does not mention the damage" % refund["reason"])
        else:
            successes.append("[C] speaker refunded")
    results.append(report_app("refunds", successes, errors))

    # notes: a note on order 1007 mentions the damaged speaker; the order itself is unchanged
    successes, errors = [], []
    added, removed, modified = table_diff(env, "order_notes")
    notes = [n for n in added if n["order_id"] == 1007]
    if removed or modified or len(added) != len(notes):
        errors.append("notes other than a new one on order 1007 changed")
    bodies = [(n["body"] or "").lower() for n in notes]
    if not any("damaged" in body and "speaker" in body for body in bodies):
        errors.append("no new note on order 1007 says the speaker arrived damaged")
    else:
        successes.append("[C] note added to order 1007")
    errors.extend(unexpected_changes(env, allowed=("refunds", "order_notes", "customers")))
    results.append(report_app("notes", successes, errors))

    # customers: Marcus Bell is gold, nobody else changed
    successes, errors = [], []
    before = table_rows(env, "seed", "customers")
    after = table_rows(env, "current", "customers")
    for cid, row in before.items():
        want = dict(row, tier="gold") if row["name"] == "Marcus Bell" else row
        if after.get(cid) != want:
            errors.append("customer %s is %r, expected %r" % (row["name"], after.get(cid), want))
        elif row["name"] == "Marcus Bell":
            successes.append("[C] Marcus Bell upgraded to gold")
    results.append(report_app("customers", successes, errors))

    return report_combined(results)
"""

_RECALL_SPEAKER = r'''
def verify(env, final_answer=None):
    results = []
    to_cancel = open_orders_with(env, "SPK-MINI-BT")

    # catalog: the speaker is inactive; other products only got stock back from cancelled orders
    successes, errors = [], []
    before = table_rows(env, "seed", "products")
    after = table_rows(env, "current", "products")
    restock = {}
    for oid in to_cancel:
        for pid, quantity in env.db("seed").query(
            "SELECT product_id, quantity FROM order_items WHERE order_id = ?", [oid]
        ).rows:
            restock[pid] = restock.get(pid, 0) + quantity
    for pid, row in before.items():
        want = dict(row, stock=row["stock"] + restock.get(pid, 0))
        if row["sku"] == "SPK-MINI-BT":
            want["active"] = 0
        if after.get(pid) != want:
            errors.append("product %s is %r, expected %r" % (row["sku"], after.get(pid), want))
        elif row["sku"] == "SPK-MINI-BT":
            successes.append("[C] SPK-MINI-BT deactivated")
    results.append(report_app("catalog", successes, errors))

    # orders: every open order with the speaker is cancelled for the recall, nothing else
    successes, errors = [], []
    before = table_rows(env, "seed", "orders")
    after = table_rows(env, "current", "orders")
    for oid, row in before.items():
        current = after.get(oid) or {}
        if oid in to_cancel:
            if current.get("status") != "cancelled":
                errors.append("order %s is %s, expected cancelled" % (oid, current.get("status")))
            elif "recall" not in (current.get("cancel_reason") or "").lower():
                errors.append("order %s cancel reason %r does not mention the recall" % (
                    oid, current.get("cancel_reason")))
            else:
                successes.append("[C] order %s cancelled" % oid)
        elif current != row:
            errors.append("order %s changed" % oid)
    errors.extend(unexpected_changes(env, allowed=("products", "orders", "order_notes")))
    results.append(report_app("orders", successes, errors))

    return report_combined(results)


def open_orders_with(env, sku):
    """Pending or paid orders containing the product (seed data)."""
    result = env.db("seed").query(
        "SELECT DISTINCT o.id FROM orders o JOIN order_items i ON i.order_id = o.id "
        "JOIN products p ON p.id = i.product_id WHERE p.sku = ? AND o.status IN ('pending', 'paid') "
        "ORDER BY o.id",
        [sku],
    )
    return [row[0] for row in result.rows]
'''


_LEDGER_REFERENCE = r"""
def verify(env, final_answer=None):
    successes, errors = [], []
    reference = ledger_reference(env)
    added, removed, modified = table_diff(env, "order_notes")
    if removed or modified:
        errors.append("existing order notes were changed or removed")
    notes = [note for note in added if note["order_id"] == 1012]
    if len(added) != 1 or len(notes) != 1:
        errors.append("expected exactly one new note, on order 1012; found %d new notes" % len(added))
    elif reference not in notes[0]["body"]:
        errors.append("the note %r does not quote the export reference %s" % (notes[0]["body"], reference))
    else:
        successes.append("order 1012 notes ledger export %s" % reference)
    errors.extend(unexpected_changes(env, allowed=("order_notes",)))
    return report_single(successes, errors)


def ledger_reference(env):
    # The reference the inventory ledger prints last: total units in stock and product count.
    units, count = env.db("seed").query("SELECT SUM(stock), COUNT(*) FROM products", []).rows[0]
    return "INV-%d-%d" % (units, count)
"""

TASKS: list[TaskDefinition] = [
    _task(
        "refund-late-order",
        "Liam O'Connor emailed us that his monitor order arrived late. Find his delivered order that "
        "was delivered after its promised date and refund it in full with the reason 'late delivery'.",
        _REFUND_LATE_ORDER,
        [
            _step("search_customers", query="Liam"),
            _step("list_orders", customer_id=6, status="delivered"),
            _step("get_order", order_id=1008),
            _step("issue_refund", order_id=1008, amount_cents=38900, reason="late delivery"),
        ],
        ["refunds", "write"],
    ),
    _task(
        "cancel-pending-order",
        "Ben Carter placed his pending order by mistake. Cancel it with the reason 'ordered by mistake'.",
        _CANCEL_PENDING,
        [
            _step("search_customers", query="Ben Carter"),
            _step("list_orders", customer_id=16, status="pending"),
            _step("cancel_order", order_id=1021, reason="ordered by mistake"),
        ],
        ["orders", "write"],
    ),
    _task(
        "create-order",
        "Hannah Lee (hannah.lee@example.com) called in an order: 2 External SSD 1TB and 1 HDMI Cable 2m, "
        "shipped to '88 Palm Ave, Phoenix, AZ 85004' instead of her usual address. Place the order.",
        _CREATE_ORDER,
        [
            _step("search_customers", query="hannah.lee@example.com"),
            _step("search_products", query="External SSD"),
            _step("search_products", query="HDMI"),
            _step(
                "create_order",
                customer_id=13,
                items=[{"sku": "SSD-1TB-EXT", "quantity": 2}, {"sku": "CAB-HDMI-2M", "quantity": 1}],
                shipping_address="88 Palm Ave, Phoenix, AZ 85004",
            ),
        ],
        ["orders", "write"],
    ),
    _task(
        "deactivate-out-of-stock",
        "Hide every active product that has no stock left by marking it inactive. Leave everything "
        "else (prices, stock levels, other products) as it is.",
        _DEACTIVATE_OUT_OF_STOCK,
        [
            _step("search_products"),
            _step("update_product", sku="MON-24-FHD", active=False),
            _step("update_product", sku="SPK-MINI-BT", active=False),
            _step("update_product", sku="SSD-2TB-EXT", active=False),
        ],
        ["catalog", "write", "bulk"],
    ),
    _task(
        "ship-overdue-paid-orders",
        "Some paid orders have reached their promised date without shipping. Mark every paid order "
        "whose promised date is today or earlier as shipped. Don't touch the other orders.",
        _SHIP_OVERDUE,
        [
            _step("list_orders", status="paid"),
            _step("update_order_status", order_id=1019, status="shipped"),
            _step("update_order_status", order_id=1020, status="shipped"),
        ],
        ["orders", "write", "bulk"],
    ),
    _task(
        "update-customer-email",
        "Grace Kim has a new email address: grace.kim@newmail.example. Update her customer record.",
        _UPDATE_EMAIL,
        [
            _step("search_customers", query="Grace Kim"),
            _step("update_customer", customer_id=9, email="grace.kim@newmail.example"),
        ],
        ["customers", "write"],
    ),
    _task(
        "reprice-and-restock-dock",
        "We received 10 more Thunderbolt 4 Docks (DOCK-TB4) and the supplier lowered the price: it now "
        "sells for $229.00. Update the catalog: add the 10 units to the stock and set the new price.",
        _DOCK_PRICE,
        [
            _step("search_products", query="DOCK-TB4"),
            _step("update_product", sku="DOCK-TB4", price_cents=22900, stock=15),
        ],
        ["catalog", "write"],
    ),
    _task(
        "upgrade-loyal-customers",
        "Loyalty review: promote to gold tier every standard-tier customer whose delivered orders add "
        "up to more than $100.00 (order totals, before refunds). Don't change anyone else.",
        _UPGRADE_LOYAL,
        [
            _step("search_customers", tier="standard"),
            _step("list_orders", status="delivered"),
            _step("update_customer", customer_id=2, tier="gold"),
            _step("update_customer", customer_id=6, tier="gold"),
            _step("update_customer", customer_id=8, tier="gold"),
        ],
        ["customers", "write", "bulk", "reasoning"],
    ),
    _task(
        "count-pending-orders",
        "How many orders are currently in pending status? Don't change anything, then call "
        "submit_final_answer with the number.",
        _COUNT_PENDING,
        [
            _step("list_orders", status="pending"),
            _step("submit_final_answer", answer="6"),
        ],
        ["orders", "read_only", "final_answer"],
    ),
    _task(
        "october-refund-total",
        "What is the total amount of approved refunds created in October 2026? Rejected and pending "
        "refunds don't count. Look it up, then call submit_final_answer with the amount in dollars.",
        _OCTOBER_REFUNDS,
        [
            _step("list_orders", status="delivered"),
            _step("get_order", order_id=1011),
            _step("get_order", order_id=1012),
            _step("get_order", order_id=1025),
            _step("submit_final_answer", answer="$253.50"),
        ],
        ["refunds", "read_only", "final_answer", "reasoning"],
    ),
    _task(
        "top-spender",
        "Which customer has the highest total value of delivered orders? Then call submit_final_answer "
        "with that customer's full name.",
        _TOP_SPENDER,
        [
            _step("list_orders", status="delivered"),
            _step("get_customer", customer_id=11),
            _step("submit_final_answer", answer="Sofia Rossi"),
        ],
        ["orders", "read_only", "final_answer", "reasoning"],
    ),
    _task(
        "damaged-speaker-resolution",
        "Marcus Bell reports that the Mini Bluetooth Speaker from his order #1007 arrived damaged. "
        "Resolve it: refund the speaker's price ($39.99) on that order with a reason mentioning the "
        "damage, add a note to the order saying the speaker arrived damaged, and upgrade Marcus to gold "
        "tier as a goodwill gesture.",
        _DAMAGED_SPEAKER,
        [
            _step("get_order", order_id=1007),
            _step("issue_refund", order_id=1007, amount_cents=3999, reason="damaged item"),
            _step("add_order_note", order_id=1007, body="Speaker arrived damaged; refunded $39.99."),
            _step("update_customer", customer_id=2, tier="gold"),
        ],
        ["refunds", "customers", "write", "multi_app"],
    ),
    _task(
        "recall-speaker",
        "The Mini Bluetooth Speaker (SPK-MINI-BT) has been recalled. Mark it inactive in the catalog "
        "and cancel every pending or paid order that contains it, with the reason 'product recall'. "
        "Orders that already shipped or were delivered stay as they are.",
        _RECALL_SPEAKER,
        [
            _step("update_product", sku="SPK-MINI-BT", active=False),
            _step("list_orders", status="pending"),
            _step("list_orders", status="paid"),
            _step("get_order", order_id=1016),
            _step("get_order", order_id=1026),
            _step("cancel_order", order_id=1016, reason="product recall"),
            _step("cancel_order", order_id=1026, reason="product recall"),
        ],
        ["catalog", "orders", "write", "multi_app"],
    ),
    _task(
        "ledger-reference",
        "Finance wants today's inventory ledger export on file. Export the full inventory ledger "
        "(the whole year) and add a note to order 1012 that says 'Ledger export <reference>', with "
        "the export reference printed at the very end of the ledger. Don't change anything else.",
        _LEDGER_REFERENCE,
        [
            _step("export_inventory_ledger", days=365),
            _step("add_order_note", order_id=1012, body="Ledger export INV-366-16"),
        ],
        ["notes", "reports", "long_output"],
    ),
]
