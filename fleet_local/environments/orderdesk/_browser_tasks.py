"""``browser_use`` tasks of ``orderdesk``: solved by clicking through its web pages.

Their reference solutions are ``computer`` actions on the controls of ``_layout``; their verifiers
read the same tables as the tool-use tasks.
"""

from __future__ import annotations

from .._computer_steps import click, click_row, key, type_text
from .._definition import ReferenceStep, TaskDefinition
from ._tasks import _CANCEL_PENDING, _task


def _open_order(order_id: int) -> list[ReferenceStep]:
    """From any page: Orders, search the order number, open the first result."""
    return [click("nav.app"), click("search.input"), type_text(str(order_id)), key("Enter"), click_row(0)]


_SHIP_1013 = r"""
def verify(env, final_answer=None):
    successes, errors = [], []
    today = env.db("seed").query("SELECT value FROM app_settings WHERE key = 'current_date'", []).rows[0][0]
    before = table_rows(env, "seed", "orders")
    after = table_rows(env, "current", "orders")
    for oid, row in before.items():
        want = dict(row, status="shipped", shipped_at=today) if oid == 1013 else row
        if after.get(oid) != want:
            errors.append("order %s is %r, expected %r" % (oid, after.get(oid), want))
    if len(after) != len(before):
        errors.append("orders were added or removed")
    if not errors:
        successes.append("order 1013 shipped today")
    errors.extend(unexpected_changes(env, allowed=("orders",)))
    return report_single(successes, errors)
"""

_REFUND_1008 = r"""
def verify(env, final_answer=None):
    successes, errors = [], []
    added, removed, modified = table_diff(env, "refunds")
    if removed or modified:
        errors.append("existing refunds were changed or removed")
    if len(added) != 1:
        errors.append("expected exactly one new refund, found %d" % len(added))
    else:
        refund = added[0]
        if refund["order_id"] != 1008 or refund["amount_cents"] != 5000:
            errors.append("refund is %s cents on order %s" % (refund["amount_cents"], refund["order_id"]))
        elif "pixel" not in (refund["reason"] or "").lower():
            errors.append("refund reason %r does not mention the dead pixels" % refund["reason"])
        else:
            successes.append("$50.00 refunded on order 1008")
    errors.extend(unexpected_changes(env, allowed=("refunds",)))
    return report_single(successes, errors)
"""

BROWSER_TASKS: list[TaskDefinition] = [
    _task(
        "browser-ship-order",
        "In the OrderDesk web app, find order 1013 and mark it as shipped.",
        _SHIP_1013,
        [*_open_order(1013), click("order.shipped")],
        ["orders", "write", "browser"],
        modality="browser_use",
    ),
    _task(
        "browser-cancel-order",
        "In the OrderDesk web app, Ben Carter placed order 1021 by mistake. Cancel it with the reason "
        "'ordered by mistake'.",
        _CANCEL_PENDING,
        [
            *_open_order(1021),
            click("order.cancel_reason"),
            type_text("ordered by mistake"),
            click("order.cancel"),
        ],
        ["orders", "write", "browser"],
        modality="browser_use",
    ),
    _task(
        "browser-refund-order",
        "In the OrderDesk web app, the monitor of order 1008 has dead pixels. Refund $50.00 on that order "
        "with a reason that mentions the dead pixels.",
        _REFUND_1008,
        [
            *_open_order(1008),
            click("order.refund_amount"),
            type_text("50.00"),
            click("order.refund_reason"),
            type_text("dead pixels on the monitor"),
            click("order.refund"),
        ],
        ["refunds", "write", "browser"],
        modality="browser_use",
    ),
]
