"""Seed data of ``orderdesk``: an online electronics shop's back office (as of 2026-11-01)."""

from __future__ import annotations

from .._tooling import insert_sql

CURRENT_DATE = "2026-11-01"
LOGGED_IN_USER = "agent.lopez"

SCHEMA = """
CREATE TABLE app_settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE customers (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE,
    tier TEXT NOT NULL CHECK (tier IN ('standard', 'gold', 'platinum')),
    city TEXT NOT NULL,
    address TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE products (
    id INTEGER PRIMARY KEY,
    sku TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    category TEXT NOT NULL,
    price_cents INTEGER NOT NULL CHECK (price_cents > 0),
    stock INTEGER NOT NULL CHECK (stock >= 0),
    active INTEGER NOT NULL DEFAULT 1 CHECK (active IN (0, 1))
);
CREATE TABLE orders (
    id INTEGER PRIMARY KEY,
    customer_id INTEGER NOT NULL REFERENCES customers (id),
    status TEXT NOT NULL CHECK (status IN ('pending', 'paid', 'shipped', 'delivered', 'cancelled')),
    placed_at TEXT NOT NULL,
    promised_by TEXT NOT NULL,
    shipped_at TEXT,
    delivered_at TEXT,
    shipping_address TEXT NOT NULL,
    total_cents INTEGER NOT NULL CHECK (total_cents >= 0),
    cancel_reason TEXT
);
CREATE TABLE order_items (
    id INTEGER PRIMARY KEY,
    order_id INTEGER NOT NULL REFERENCES orders (id),
    product_id INTEGER NOT NULL REFERENCES products (id),
    quantity INTEGER NOT NULL CHECK (quantity > 0),
    unit_price_cents INTEGER NOT NULL CHECK (unit_price_cents > 0)
);
CREATE TABLE refunds (
    id INTEGER PRIMARY KEY,
    order_id INTEGER NOT NULL REFERENCES orders (id),
    amount_cents INTEGER NOT NULL CHECK (amount_cents > 0),
    reason TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected')),
    created_at TEXT NOT NULL,
    processed_by TEXT
);
CREATE TABLE order_notes (
    id INTEGER PRIMARY KEY,
    order_id INTEGER NOT NULL REFERENCES orders (id),
    author TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX idx_orders_customer ON orders (customer_id);
CREATE INDEX idx_order_items_order ON order_items (order_id);
CREATE INDEX idx_refunds_order ON refunds (order_id);
CREATE INDEX idx_order_notes_order ON order_notes (order_id);
"""

TABLES = ["app_settings", "customers", "products", "orders", "order_items", "refunds", "order_notes"]

CUSTOMERS: list[tuple[int, str, str, str, str, str, str]] = [
    (
        1,
        "Dana Whitfield",
        "dana.whitfield@example.com",
        "gold",
        "Portland",
        "412 Alder St, Portland, OR 97205",
        "2024-03-12",
    ),
    (
        2,
        "Marcus Bell",
        "marcus.bell@example.com",
        "standard",
        "Austin",
        "77 Rainey St, Austin, TX 78701",
        "2024-06-02",
    ),
    (
        3,
        "Priya Raman",
        "priya.raman@example.com",
        "platinum",
        "Seattle",
        "1500 Pine St, Seattle, WA 98101",
        "2023-11-20",
    ),
    (
        4,
        "Tomás Ortega",
        "tomas.ortega@example.com",
        "standard",
        "Denver",
        "220 Larimer St, Denver, CO 80202",
        "2025-01-15",
    ),
    (
        5,
        "Aiko Tanaka",
        "aiko.tanaka@example.com",
        "gold",
        "San Jose",
        "35 Santa Clara St, San Jose, CA 95113",
        "2024-08-30",
    ),
    (
        6,
        "Liam O'Connor",
        "liam.oconnor@example.com",
        "standard",
        "Boston",
        "9 Beacon St, Boston, MA 02108",
        "2025-04-04",
    ),
    (
        7,
        "Fatima Zahra",
        "fatima.zahra@example.com",
        "standard",
        "Chicago",
        "640 N Wells St, Chicago, IL 60654",
        "2025-02-19",
    ),
    (
        8,
        "Noah Fischer",
        "noah.fischer@example.com",
        "standard",
        "Minneapolis",
        "301 Hennepin Ave, Minneapolis, MN 55401",
        "2024-12-01",
    ),
    (
        9,
        "Grace Kim",
        "grace.kim@example.com",
        "gold",
        "Los Angeles",
        "818 S Flower St, Los Angeles, CA 90017",
        "2024-05-23",
    ),
    (
        10,
        "Ethan Brooks",
        "ethan.brooks@example.com",
        "standard",
        "Atlanta",
        "55 Peachtree Center Ave, Atlanta, GA 30303",
        "2025-07-07",
    ),
    (
        11,
        "Sofia Rossi",
        "sofia.rossi@example.com",
        "platinum",
        "New York",
        "120 Mulberry St, New York, NY 10013",
        "2023-09-09",
    ),
    (
        12,
        "Omar Haddad",
        "omar.haddad@example.com",
        "standard",
        "Detroit",
        "1 Woodward Ave, Detroit, MI 48226",
        "2025-03-28",
    ),
    (
        13,
        "Hannah Lee",
        "hannah.lee@example.com",
        "standard",
        "Phoenix",
        "402 E Roosevelt St, Phoenix, AZ 85004",
        "2025-06-11",
    ),
    (
        14,
        "Diego Alvarez",
        "diego.alvarez@example.com",
        "gold",
        "Miami",
        "900 Brickell Ave, Miami, FL 33131",
        "2024-10-10",
    ),
    (
        15,
        "Chloe Martin",
        "chloe.martin@example.com",
        "standard",
        "Raleigh",
        "18 Glenwood Ave, Raleigh, NC 27603",
        "2025-08-14",
    ),
    (
        16,
        "Ben Carter",
        "ben.carter@example.com",
        "standard",
        "Nashville",
        "700 Broadway, Nashville, TN 37203",
        "2025-09-01",
    ),
]

# id, sku, name, category, price_cents, stock, active
PRODUCTS: list[tuple[int, str, str, str, int, int, int]] = [
    (1, "HUB-USBC-7", "USB-C Hub 7-in-1", "Accessories", 4999, 42, 1),
    (2, "KB-MECH-87", "Mechanical Keyboard TKL", "Peripherals", 11900, 15, 1),
    (3, "MS-ERGO-2", "Ergonomic Mouse", "Peripherals", 5900, 30, 1),
    (4, "MON-27-4K", "27-inch 4K Monitor", "Displays", 38900, 8, 1),
    (5, "MON-24-FHD", "24-inch FHD Monitor", "Displays", 17900, 0, 1),
    (6, "CAB-HDMI-2M", "HDMI Cable 2m", "Accessories", 1299, 120, 1),
    (7, "HS-WL-PRO", "Wireless Headset Pro", "Audio", 14900, 12, 1),
    (8, "SPK-MINI-BT", "Mini Bluetooth Speaker", "Audio", 3999, 0, 1),
    (9, "CAM-HD-1080", "HD Webcam 1080p", "Peripherals", 6900, 25, 1),
    (10, "STD-LAP-AL", "Aluminium Laptop Stand", "Accessories", 4500, 18, 1),
    (11, "DOCK-TB4", "Thunderbolt 4 Dock", "Accessories", 24900, 5, 1),
    (12, "SSD-1TB-EXT", "External SSD 1TB", "Storage", 10900, 22, 1),
    (13, "SSD-2TB-EXT", "External SSD 2TB", "Storage", 17900, 0, 1),
    (14, "PAD-XL-DESK", "XL Desk Pad", "Accessories", 2499, 60, 1),
    (15, "MIC-USB-CND", "USB Condenser Microphone", "Audio", 8900, 9, 1),
    (16, "HS-WIRED-BASIC", "Wired Headset Basic", "Audio", 2499, 0, 0),
]

# id, customer_id, status, placed_at, promised_by, shipped_at, delivered_at, cancel_reason, items
OrderRow = tuple[int, int, str, str, str, str | None, str | None, str | None, list[tuple[str, int]]]
ORDERS: list[OrderRow] = [
    (
        1001,
        1,
        "delivered",
        "2026-09-03",
        "2026-09-10",
        "2026-09-05",
        "2026-09-08",
        None,
        [("KB-MECH-87", 1), ("PAD-XL-DESK", 1)],
    ),
    (
        1002,
        2,
        "delivered",
        "2026-09-10",
        "2026-09-17",
        "2026-09-12",
        "2026-09-16",
        None,
        [("MON-27-4K", 1), ("CAB-HDMI-2M", 2)],
    ),
    (
        1003,
        3,
        "delivered",
        "2026-09-14",
        "2026-09-21",
        "2026-09-15",
        "2026-09-19",
        None,
        [("DOCK-TB4", 1), ("SSD-1TB-EXT", 2)],
    ),
    (
        1004,
        4,
        "cancelled",
        "2026-09-18",
        "2026-09-25",
        None,
        None,
        "customer found a cheaper offer",
        [("HS-WL-PRO", 1)],
    ),
    (
        1005,
        5,
        "delivered",
        "2026-09-22",
        "2026-09-29",
        "2026-09-24",
        "2026-09-27",
        None,
        [("CAM-HD-1080", 1), ("MIC-USB-CND", 1)],
    ),
    (1006, 1, "delivered", "2026-10-01", "2026-10-08", "2026-10-03", "2026-10-07", None, [("HUB-USBC-7", 2)]),
    (
        1007,
        2,
        "delivered",
        "2026-10-03",
        "2026-10-10",
        "2026-10-05",
        "2026-10-09",
        None,
        [("HS-WL-PRO", 1), ("SPK-MINI-BT", 1)],
    ),
    (1008, 6, "delivered", "2026-10-05", "2026-10-12", "2026-10-10", "2026-10-16", None, [("MON-27-4K", 1)]),
    (
        1009,
        7,
        "shipped",
        "2026-10-20",
        "2026-10-27",
        "2026-10-22",
        None,
        None,
        [("SSD-1TB-EXT", 1), ("CAB-HDMI-2M", 1)],
    ),
    (
        1010,
        8,
        "delivered",
        "2026-10-08",
        "2026-10-15",
        "2026-10-09",
        "2026-10-13",
        None,
        [("STD-LAP-AL", 1), ("MS-ERGO-2", 1)],
    ),
    (
        1011,
        9,
        "delivered",
        "2026-10-10",
        "2026-10-17",
        "2026-10-11",
        "2026-10-15",
        None,
        [("KB-MECH-87", 1), ("MS-ERGO-2", 1), ("PAD-XL-DESK", 1)],
    ),
    (
        1012,
        11,
        "delivered",
        "2026-10-12",
        "2026-10-19",
        "2026-10-13",
        "2026-10-17",
        None,
        [("MON-27-4K", 2), ("DOCK-TB4", 1)],
    ),
    (1013, 3, "paid", "2026-10-26", "2026-11-02", None, None, None, [("HS-WL-PRO", 1)]),
    (1014, 12, "pending", "2026-10-28", "2026-11-04", None, None, None, [("MON-24-FHD", 1)]),
    (
        1015,
        13,
        "pending",
        "2026-10-29",
        "2026-11-05",
        None,
        None,
        None,
        [("CAB-HDMI-2M", 3), ("HUB-USBC-7", 1)],
    ),
    (1016, 5, "paid", "2026-10-27", "2026-11-03", None, None, None, [("SSD-2TB-EXT", 1), ("SPK-MINI-BT", 1)]),
    (
        1017,
        10,
        "pending",
        "2026-10-30",
        "2026-11-06",
        None,
        None,
        None,
        [("MON-24-FHD", 1), ("CAB-HDMI-2M", 1)],
    ),
    (1018, 14, "delivered", "2026-10-14", "2026-10-21", "2026-10-15", "2026-10-20", None, [("HS-WL-PRO", 2)]),
    (1019, 15, "paid", "2026-10-25", "2026-11-01", None, None, None, [("CAM-HD-1080", 1)]),
    (1020, 9, "paid", "2026-10-24", "2026-10-31", None, None, None, [("MIC-USB-CND", 1), ("STD-LAP-AL", 1)]),
    (1021, 16, "pending", "2026-10-31", "2026-11-07", None, None, None, [("KB-MECH-87", 1)]),
    (1022, 11, "shipped", "2026-10-23", "2026-10-30", "2026-10-29", None, None, [("SSD-1TB-EXT", 1)]),
    (
        1023,
        4,
        "delivered",
        "2026-10-02",
        "2026-10-09",
        "2026-10-04",
        "2026-10-12",
        None,
        [("HUB-USBC-7", 1), ("CAB-HDMI-2M", 1)],
    ),
    (1024, 7, "cancelled", "2026-10-06", "2026-10-13", None, None, "duplicate order", [("MS-ERGO-2", 1)]),
    (
        1025,
        12,
        "delivered",
        "2026-09-28",
        "2026-10-05",
        "2026-09-29",
        "2026-10-03",
        None,
        [("PAD-XL-DESK", 2), ("HUB-USBC-7", 1)],
    ),
    (
        1026,
        6,
        "pending",
        "2026-10-30",
        "2026-11-06",
        None,
        None,
        None,
        [("SPK-MINI-BT", 1), ("MS-ERGO-2", 1)],
    ),
    (1027, 14, "paid", "2026-10-29", "2026-11-05", None, None, None, [("DOCK-TB4", 1)]),
    (
        1028,
        8,
        "pending",
        "2026-10-31",
        "2026-11-07",
        None,
        None,
        None,
        [("SSD-2TB-EXT", 1), ("CAB-HDMI-2M", 2)],
    ),
]

# id, order_id, amount_cents, reason, status, created_at, processed_by
REFUNDS: list[tuple[int, int, int, str, str, str, str | None]] = [
    (1, 1002, 2500, "scratched monitor stand", "approved", "2026-09-20", "agent.kim"),
    (2, 1011, 5900, "mouse returned unopened", "approved", "2026-10-20", "agent.kim"),
    (3, 1005, 8900, "microphone reported defective", "rejected", "2026-10-02", "agent.lopez"),
    (4, 1012, 19450, "price adjustment on monitors", "approved", "2026-10-25", "agent.lopez"),
    (5, 1025, 1000, "shipping delay goodwill credit", "pending", "2026-10-30", None),
]

# id, order_id, author, body, created_at
NOTES: list[tuple[int, int, str, str, str]] = [
    (1, 1008, "agent.kim", "Carrier reported a delay at the regional hub.", "2026-10-12"),
    (2, 1020, "agent.lopez", "Customer asked for expedited shipping.", "2026-10-25"),
    (3, 1014, "agent.kim", "Waiting for the 24-inch monitor to be restocked.", "2026-10-29"),
]


def build_seed_sql() -> str:
    """Schema and data as one deterministic SQL script."""
    products = {sku: (pid, price) for pid, sku, _name, _cat, price, _stock, _active in PRODUCTS}
    addresses = {cid: address for cid, _n, _e, _t, _c, address, _d in CUSTOMERS}
    order_rows = []
    item_rows = []
    item_id = 1
    for oid, cid, status, placed, promised, shipped, delivered, reason, items in ORDERS:
        total = 0
        for sku, quantity in items:
            pid, price = products[sku]
            item_rows.append((item_id, oid, pid, quantity, price))
            total += quantity * price
            item_id += 1
        order_rows.append(
            (oid, cid, status, placed, promised, shipped, delivered, addresses[cid], total, reason)
        )
    parts = [
        "PRAGMA foreign_keys = ON;",
        "BEGIN;",
        SCHEMA.strip(),
        insert_sql(
            "app_settings",
            ["key", "value"],
            [("current_date", CURRENT_DATE), ("logged_in_user", LOGGED_IN_USER)],
        ),
        insert_sql("customers", ["id", "name", "email", "tier", "city", "address", "created_at"], CUSTOMERS),
        insert_sql("products", ["id", "sku", "name", "category", "price_cents", "stock", "active"], PRODUCTS),
        insert_sql(
            "orders",
            [
                "id",
                "customer_id",
                "status",
                "placed_at",
                "promised_by",
                "shipped_at",
                "delivered_at",
                "shipping_address",
                "total_cents",
                "cancel_reason",
            ],
            order_rows,
        ),
        insert_sql(
            "order_items", ["id", "order_id", "product_id", "quantity", "unit_price_cents"], item_rows
        ),
        insert_sql(
            "refunds",
            ["id", "order_id", "amount_cents", "reason", "status", "created_at", "processed_by"],
            REFUNDS,
        ),
        insert_sql("order_notes", ["id", "order_id", "author", "body", "created_at"], NOTES),
        "COMMIT;",
    ]
    return "\n".join(parts) + "\n"


SEED_SQL = build_seed_sql()
