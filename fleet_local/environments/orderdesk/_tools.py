"""MCP tools of ``orderdesk``: customers, catalog, orders, refunds and order notes."""

from __future__ import annotations

import sqlite3
from typing import Any

from .._definition import ToolDefinition, ToolError
from .._tooling import (
    add_days,
    bool_prop,
    execute,
    fetch_all,
    fetch_one,
    int_prop,
    like_pattern,
    limit_prop,
    obj_schema,
    parse_date,
    parse_email,
    scalar,
    setting,
    str_prop,
)

TIERS = ("standard", "gold", "platinum")
ORDER_STATUSES = ("pending", "paid", "shipped", "delivered", "cancelled")
# The status an order must have before it can move to the key.
_NEXT_STATUS_FROM = {"paid": "pending", "shipped": "paid", "delivered": "shipped"}


def _customer(conn: sqlite3.Connection, customer_id: int) -> dict[str, Any]:
    row = fetch_one(conn, "SELECT * FROM customers WHERE id = ?", (customer_id,))
    if row is None:
        raise ToolError(f"Invalid argument 'customer_id': customer {customer_id} not found")
    return row


def _order(conn: sqlite3.Connection, order_id: int) -> dict[str, Any]:
    row = fetch_one(conn, "SELECT * FROM orders WHERE id = ?", (order_id,))
    if row is None:
        raise ToolError(f"Invalid argument 'order_id': order {order_id} not found")
    return row


def _product_by_sku(conn: sqlite3.Connection, sku: str, argument: str = "sku") -> dict[str, Any]:
    row = fetch_one(conn, "SELECT * FROM products WHERE sku = ?", (sku.strip().upper(),))
    if row is None:
        raise ToolError(f"Invalid argument '{argument}': no product with SKU {sku!r}")
    return row


def _refunded_cents(conn: sqlite3.Connection, order_id: int) -> int:
    value = scalar(
        conn,
        "SELECT COALESCE(SUM(amount_cents), 0) FROM refunds WHERE order_id = ? "
        "AND status IN ('approved', 'pending')",
        (order_id,),
    )
    return int(value)


def _product_view(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "active": bool(row["active"])}


# -- customers --------------------------------------------------------------------------------------


def search_customers(conn: sqlite3.Connection, args: dict[str, Any]) -> dict[str, Any]:
    clauses: list[str] = []
    params: list[Any] = []
    if "query" in args:
        clauses.append("(name LIKE ? ESCAPE '\\' OR email LIKE ? ESCAPE '\\')")
        params += [like_pattern(args["query"].strip())] * 2
    if "tier" in args:
        clauses.append("tier = ?")
        params.append(args["tier"])
    if "city" in args:
        clauses.append("city LIKE ? ESCAPE '\\'")
        params.append(like_pattern(args["city"].strip()))
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    limit = int(args.get("limit", 25))
    rows = fetch_all(
        conn,
        f"SELECT id, name, email, tier, city FROM customers {where} ORDER BY id LIMIT ?",
        [*params, limit],
    )
    total = scalar(conn, f"SELECT COUNT(*) FROM customers {where}", params)
    return {"customers": rows, "total": total}


def get_customer(conn: sqlite3.Connection, args: dict[str, Any]) -> dict[str, Any]:
    customer = _customer(conn, args["customer_id"])
    orders = fetch_all(
        conn,
        "SELECT id, status, placed_at, total_cents FROM orders WHERE customer_id = ? ORDER BY id",
        (customer["id"],),
    )
    return {**customer, "orders": orders}


def update_customer(conn: sqlite3.Connection, args: dict[str, Any]) -> dict[str, Any]:
    customer = _customer(conn, args["customer_id"])
    changes: dict[str, Any] = {}
    if "email" in args:
        email = parse_email("email", args["email"])
        taken = scalar(conn, "SELECT id FROM customers WHERE email = ? AND id != ?", (email, customer["id"]))
        if taken is not None:
            raise ToolError(f"Invalid argument 'email': {email} already belongs to customer {taken}")
        changes["email"] = email
    if "tier" in args:
        changes["tier"] = args["tier"]
    if "city" in args:
        changes["city"] = args["city"].strip()
    if "address" in args:
        changes["address"] = args["address"].strip()
    if not changes:
        raise ToolError("Nothing to update: pass at least one of 'email', 'tier', 'city', 'address'")
    assignments = ", ".join(f"{column} = ?" for column in changes)
    execute(conn, f"UPDATE customers SET {assignments} WHERE id = ?", [*changes.values(), customer["id"]])
    return _customer(conn, customer["id"])


# -- catalog ----------------------------------------------------------------------------------------


def search_products(conn: sqlite3.Connection, args: dict[str, Any]) -> dict[str, Any]:
    clauses: list[str] = []
    params: list[Any] = []
    if "query" in args:
        clauses.append("(name LIKE ? ESCAPE '\\' OR sku LIKE ? ESCAPE '\\')")
        params += [like_pattern(args["query"].strip())] * 2
    if "category" in args:
        clauses.append("category = ? COLLATE NOCASE")
        params.append(args["category"].strip())
    if args.get("in_stock_only", False):
        clauses.append("stock > 0")
    if not args.get("include_inactive", False):
        clauses.append("active = 1")
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    rows = fetch_all(conn, f"SELECT * FROM products {where} ORDER BY sku", params)
    return {"products": [_product_view(r) for r in rows], "total": len(rows)}


def update_product(conn: sqlite3.Connection, args: dict[str, Any]) -> dict[str, Any]:
    product = _product_by_sku(conn, args["sku"])
    changes: dict[str, Any] = {}
    if "price_cents" in args:
        changes["price_cents"] = args["price_cents"]
    if "stock" in args:
        changes["stock"] = args["stock"]
    if "active" in args:
        changes["active"] = 1 if args["active"] else 0
    if not changes:
        raise ToolError("Nothing to update: pass at least one of 'price_cents', 'stock', 'active'")
    assignments = ", ".join(f"{column} = ?" for column in changes)
    execute(conn, f"UPDATE products SET {assignments} WHERE id = ?", [*changes.values(), product["id"]])
    row = fetch_one(conn, "SELECT * FROM products WHERE id = ?", (product["id"],))
    assert row is not None
    return _product_view(row)


# -- orders -----------------------------------------------------------------------------------------


def list_orders(conn: sqlite3.Connection, args: dict[str, Any]) -> dict[str, Any]:
    clauses: list[str] = []
    params: list[Any] = []
    if "customer_id" in args:
        _customer(conn, args["customer_id"])
        clauses.append("o.customer_id = ?")
        params.append(args["customer_id"])
    if "status" in args:
        clauses.append("o.status = ?")
        params.append(args["status"])
    if "placed_from" in args:
        clauses.append("o.placed_at >= ?")
        params.append(parse_date("placed_from", args["placed_from"]))
    if "placed_to" in args:
        clauses.append("o.placed_at <= ?")
        params.append(parse_date("placed_to", args["placed_to"]))
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    limit = int(args.get("limit", 25))
    rows = fetch_all(
        conn,
        "SELECT o.id, o.customer_id, c.name AS customer_name, o.status, o.placed_at, o.promised_by, "
        "o.shipped_at, o.delivered_at, o.total_cents FROM orders o JOIN customers c ON c.id = o.customer_id "
        f"{where} ORDER BY o.id LIMIT ?",
        [*params, limit],
    )
    total = scalar(conn, f"SELECT COUNT(*) FROM orders o {where}", params)
    return {"orders": rows, "total": total, "truncated": int(total) > len(rows)}


def get_order(conn: sqlite3.Connection, args: dict[str, Any]) -> dict[str, Any]:
    order = _order(conn, args["order_id"])
    customer = _customer(conn, order["customer_id"])
    items = fetch_all(
        conn,
        "SELECT p.sku, p.name, i.quantity, i.unit_price_cents, i.quantity * i.unit_price_cents AS line_cents "
        "FROM order_items i JOIN products p ON p.id = i.product_id WHERE i.order_id = ? ORDER BY i.id",
        (order["id"],),
    )
    refunds = fetch_all(
        conn,
        "SELECT id, amount_cents, reason, status, created_at, processed_by FROM refunds "
        "WHERE order_id = ? ORDER BY id",
        (order["id"],),
    )
    notes = fetch_all(
        conn,
        "SELECT id, author, body, created_at FROM order_notes WHERE order_id = ? ORDER BY id",
        (order["id"],),
    )
    return {
        **order,
        "customer_name": customer["name"],
        "items": items,
        "refunds": refunds,
        "notes": notes,
        "refundable_cents": order["total_cents"] - _refunded_cents(conn, order["id"]),
    }


def create_order(conn: sqlite3.Connection, args: dict[str, Any]) -> dict[str, Any]:
    customer = _customer(conn, args["customer_id"])
    wanted: dict[int, int] = {}
    products: dict[int, dict[str, Any]] = {}
    for index, item in enumerate(args["items"]):
        product = _product_by_sku(conn, item["sku"], argument=f"items[{index}].sku")
        if not product["active"]:
            raise ToolError(f"Invalid argument 'items[{index}].sku': {product['sku']} is discontinued")
        products[product["id"]] = product
        wanted[product["id"]] = wanted.get(product["id"], 0) + item["quantity"]
    for pid, quantity in wanted.items():
        if products[pid]["stock"] < quantity:
            raise ToolError(
                f"Invalid argument 'items': only {products[pid]['stock']} of {products[pid]['sku']} "
                f"in stock, {quantity} requested"
            )
    address = args.get("shipping_address", customer["address"]).strip()
    today = setting(conn, "current_date")
    total = sum(products[pid]["price_cents"] * quantity for pid, quantity in wanted.items())
    order_id = execute(
        conn,
        "INSERT INTO orders (customer_id, status, placed_at, promised_by, shipping_address, total_cents) "
        "VALUES (?, 'pending', ?, ?, ?, ?)",
        (customer["id"], today, add_days(today, 7), address, total),
    )
    for pid, quantity in wanted.items():
        execute(
            conn,
            "INSERT INTO order_items (order_id, product_id, quantity, unit_price_cents) VALUES (?, ?, ?, ?)",
            (order_id, pid, quantity, products[pid]["price_cents"]),
        )
        execute(conn, "UPDATE products SET stock = stock - ? WHERE id = ?", (quantity, pid))
    return get_order(conn, {"order_id": order_id})


def update_order_status(conn: sqlite3.Connection, args: dict[str, Any]) -> dict[str, Any]:
    order = _order(conn, args["order_id"])
    status = args["status"]
    required = _NEXT_STATUS_FROM[status]
    if order["status"] != required:
        raise ToolError(
            f"Invalid argument 'status': order {order['id']} is {order['status']}; "
            f"only a {required} order can become {status}"
        )
    today = setting(conn, "current_date")
    if status == "shipped":
        execute(
            conn, "UPDATE orders SET status = ?, shipped_at = ? WHERE id = ?", (status, today, order["id"])
        )
    elif status == "delivered":
        execute(
            conn, "UPDATE orders SET status = ?, delivered_at = ? WHERE id = ?", (status, today, order["id"])
        )
    else:
        execute(conn, "UPDATE orders SET status = ? WHERE id = ?", (status, order["id"]))
    return _order(conn, order["id"])


def cancel_order(conn: sqlite3.Connection, args: dict[str, Any]) -> dict[str, Any]:
    order = _order(conn, args["order_id"])
    if order["status"] not in ("pending", "paid"):
        raise ToolError(
            f"Invalid argument 'order_id': order {order['id']} is {order['status']}; only pending or "
            "paid orders can be cancelled (issue a refund instead)"
        )
    reason = args["reason"].strip()
    items = fetch_all(conn, "SELECT product_id, quantity FROM order_items WHERE order_id = ?", (order["id"],))
    for item in items:
        execute(
            conn, "UPDATE products SET stock = stock + ? WHERE id = ?", (item["quantity"], item["product_id"])
        )
    execute(
        conn, "UPDATE orders SET status = 'cancelled', cancel_reason = ? WHERE id = ?", (reason, order["id"])
    )
    return {**_order(conn, order["id"]), "restocked_items": len(items)}


def issue_refund(conn: sqlite3.Connection, args: dict[str, Any]) -> dict[str, Any]:
    order = _order(conn, args["order_id"])
    if order["status"] not in ("shipped", "delivered"):
        raise ToolError(
            f"Invalid argument 'order_id': order {order['id']} is {order['status']}; refunds are for "
            "shipped or delivered orders (cancel a pending or paid order instead)"
        )
    amount = args["amount_cents"]
    refundable = order["total_cents"] - _refunded_cents(conn, order["id"])
    if amount > refundable:
        raise ToolError(
            f"Invalid argument 'amount_cents': {amount} exceeds the refundable balance of order "
            f"{order['id']} ({refundable} cents)"
        )
    refund_id = execute(
        conn,
        "INSERT INTO refunds (order_id, amount_cents, reason, status, created_at, processed_by) "
        "VALUES (?, ?, ?, 'approved', ?, ?)",
        (
            order["id"],
            amount,
            args["reason"].strip(),
            setting(conn, "current_date"),
            setting(conn, "logged_in_user"),
        ),
    )
    refund = fetch_one(conn, "SELECT * FROM refunds WHERE id = ?", (refund_id,))
    assert refund is not None
    return {**refund, "refundable_cents": refundable - amount}


def add_order_note(conn: sqlite3.Connection, args: dict[str, Any]) -> dict[str, Any]:
    order = _order(conn, args["order_id"])
    note_id = execute(
        conn,
        "INSERT INTO order_notes (order_id, author, body, created_at) VALUES (?, ?, ?, ?)",
        (order["id"], setting(conn, "logged_in_user"), args["body"].strip(), setting(conn, "current_date")),
    )
    note = fetch_one(conn, "SELECT * FROM order_notes WHERE id = ?", (note_id,))
    assert note is not None
    return note


def export_inventory_ledger(conn: sqlite3.Connection, args: dict[str, Any]) -> str:
    """The daily stock ledger as fixed-width text: about 1 MB for a full year of the whole catalog.

    Movements are synthetic but deterministic (a function of SKU and day), so two exports of the
    same data are identical; the closing section holds an export reference a verifier can recompute
    from the products table (total units in stock and number of products).
    """
    days = args.get("days", 365)
    today = setting(conn, "current_date")
    products = fetch_all(conn, "SELECT sku, name, stock FROM products ORDER BY sku")
    header = (
        f"{'date':<10} | {'sku':<16} | {'product':<40} | {'open':>6} | {'sold':>5} | {'recv':>5} | "
        f"{'close':>6} | location and memo"
    )
    rows: list[str] = []
    closing = {p["sku"]: int(p["stock"]) for p in products}
    # Walk back from today's stock: each day's opening is the day before's closing.
    for offset in range(days):
        date = add_days(today, -offset)
        day = int(date.replace("-", ""))
        for product in reversed(products):
            sku = product["sku"]
            mix = (day * 31 + sum(map(ord, sku)) * 17) % 97
            sold = mix % 7
            received = min((mix // 7) % 5, closing[sku] + sold)
            opening = closing[sku] + sold - received
            rows.append(
                f"{date:<10} | {sku:<16} | {product['name'][:40]:<40} | {opening:>6} | {sold:>5} | "
                f"{received:>5} | {closing[sku]:>6} | warehouse EAST-{mix % 3 + 1} aisle {mix % 12:02d} "
                f"bin {sku[:4]}-{mix % 9}; cycle count {mix:02d}; no variance"
            )
            closing[sku] = opening
    rows.reverse()
    title = f"INVENTORY LEDGER export, {days} day(s) ending {today}, {len(products)} products"
    lines = [title, header, *rows]
    units = sum(int(p["stock"]) for p in products)
    lines.append(f"END OF LEDGER. Export reference: INV-{units}-{len(products)}")
    return "\n".join(lines)


_CUSTOMER_ID = int_prop("Customer id, e.g. 7.")
_ORDER_ID = int_prop("Order id, e.g. 1012.")

TOOLS: list[ToolDefinition] = [
    ToolDefinition(
        name="search_customers",
        description="Search customers by name or email substring, tier and/or city. Returns id, name, "
        "email, tier and city of each match.",
        input_schema=obj_schema(
            {
                "query": str_prop("Substring of the name or email (case-insensitive)."),
                "tier": str_prop("Loyalty tier.", enum=TIERS),
                "city": str_prop("City (substring, case-insensitive)."),
                "limit": limit_prop(),
            }
        ),
        handler=search_customers,
        read_only=True,
    ),
    ToolDefinition(
        name="get_customer",
        description="Get one customer with address, tier and a summary of every order they placed.",
        input_schema=obj_schema({"customer_id": _CUSTOMER_ID}, ["customer_id"]),
        handler=get_customer,
        read_only=True,
    ),
    ToolDefinition(
        name="update_customer",
        description="Change a customer's email, loyalty tier, city and/or default shipping address.",
        input_schema=obj_schema(
            {
                "customer_id": _CUSTOMER_ID,
                "email": str_prop("New email address (must be unique)."),
                "tier": str_prop("New loyalty tier.", enum=TIERS),
                "city": str_prop("New city."),
                "address": str_prop("New default shipping address."),
            },
            ["customer_id"],
        ),
        handler=update_customer,
        read_only=False,
    ),
    ToolDefinition(
        name="search_products",
        description="Search the catalog by name or SKU substring and/or category. Prices are in cents. "
        "Discontinued (inactive) products are hidden unless include_inactive is true.",
        input_schema=obj_schema(
            {
                "query": str_prop("Substring of the product name or SKU (case-insensitive)."),
                "category": str_prop("Category, e.g. Audio, Displays, Storage, Accessories, Peripherals."),
                "in_stock_only": bool_prop("Only products with stock > 0."),
                "include_inactive": bool_prop("Also list discontinued products."),
            }
        ),
        handler=search_products,
        read_only=True,
    ),
    ToolDefinition(
        name="update_product",
        description="Change a product's price (in cents), stock level and/or active flag "
        "(inactive products cannot be ordered).",
        input_schema=obj_schema(
            {
                "sku": str_prop("Product SKU, e.g. DOCK-TB4."),
                "price_cents": int_prop("New unit price in cents.", minimum=1),
                "stock": int_prop("New number of units in stock.", minimum=0),
                "active": bool_prop("False to discontinue the product, true to list it again."),
            },
            ["sku"],
        ),
        handler=update_product,
        read_only=False,
    ),
    ToolDefinition(
        name="list_orders",
        description="List orders, newest id last, filtered by customer, status and/or placement date "
        "range (inclusive). Amounts are in cents.",
        input_schema=obj_schema(
            {
                "customer_id": _CUSTOMER_ID,
                "status": str_prop("Order status.", enum=ORDER_STATUSES),
                "placed_from": str_prop("Earliest placement date, YYYY-MM-DD.", max_length=10),
                "placed_to": str_prop("Latest placement date, YYYY-MM-DD.", max_length=10),
                "limit": limit_prop(),
            }
        ),
        handler=list_orders,
        read_only=True,
    ),
    ToolDefinition(
        name="get_order",
        description="Get one order with its items, refunds, notes and the amount still refundable.",
        input_schema=obj_schema({"order_id": _ORDER_ID}, ["order_id"]),
        handler=get_order,
        read_only=True,
    ),
    ToolDefinition(
        name="create_order",
        description="Place a new pending order for a customer. Stock is reserved immediately; the "
        "shipping address defaults to the customer's address.",
        input_schema=obj_schema(
            {
                "customer_id": _CUSTOMER_ID,
                "items": {
                    "type": "array",
                    "description": "Products and quantities to order.",
                    "minItems": 1,
                    "maxItems": 20,
                    "items": obj_schema(
                        {
                            "sku": str_prop("Product SKU."),
                            "quantity": int_prop("Units to order.", minimum=1, maximum=100),
                        },
                        ["sku", "quantity"],
                    ),
                },
                "shipping_address": str_prop("Shipping address, if not the customer's default."),
            },
            ["customer_id", "items"],
        ),
        handler=create_order,
        read_only=False,
    ),
    ToolDefinition(
        name="update_order_status",
        description="Advance an order: pending -> paid -> shipped -> delivered. Shipping and delivery "
        "dates are set to today.",
        input_schema=obj_schema(
            {
                "order_id": _ORDER_ID,
                "status": str_prop("The next status.", enum=("paid", "shipped", "delivered")),
            },
            ["order_id", "status"],
        ),
        handler=update_order_status,
        read_only=False,
    ),
    ToolDefinition(
        name="cancel_order",
        description="Cancel a pending or paid order and put its items back in stock.",
        input_schema=obj_schema(
            {"order_id": _ORDER_ID, "reason": str_prop("Why the order is cancelled.")},
            ["order_id", "reason"],
        ),
        handler=cancel_order,
        read_only=False,
    ),
    ToolDefinition(
        name="issue_refund",
        description="Refund part or all of a shipped or delivered order (approved immediately). The "
        "amount, in cents, cannot exceed what is still refundable.",
        input_schema=obj_schema(
            {
                "order_id": _ORDER_ID,
                "amount_cents": int_prop("Amount to refund in cents, e.g. 3999 for $39.99.", minimum=1),
                "reason": str_prop("Why the refund is issued."),
            },
            ["order_id", "amount_cents", "reason"],
        ),
        handler=issue_refund,
        read_only=False,
    ),
    ToolDefinition(
        name="add_order_note",
        description="Add an internal note to an order, signed by the logged-in support agent.",
        input_schema=obj_schema(
            {"order_id": _ORDER_ID, "body": str_prop("Note text.", max_length=2000)},
            ["order_id", "body"],
        ),
        handler=add_order_note,
        read_only=False,
    ),
    ToolDefinition(
        name="export_inventory_ledger",
        description="Export the daily inventory ledger (opening stock, units sold and received, "
        "closing stock for every product and day) as fixed-width text, ending with the export "
        "reference. A full year is about 1 MB.",
        input_schema=obj_schema(
            {"days": int_prop("Days to cover, ending today (default 365).", maximum=365)}
        ),
        handler=export_inventory_ledger,
        read_only=True,
    ),
]
