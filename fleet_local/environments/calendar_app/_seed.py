"""Seed data of ``calendar``: a company's shared calendars and meeting rooms (week of 2026-11-02)."""

from __future__ import annotations

from .._tooling import insert_sql

CURRENT_DATE = "2026-11-02"
LOGGED_IN_USER = "maya.chen@northwind.example"

SCHEMA = """
CREATE TABLE app_settings (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE users (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    email TEXT NOT NULL UNIQUE,
    department TEXT NOT NULL
);
CREATE TABLE calendars (
    id INTEGER PRIMARY KEY,
    owner_id INTEGER NOT NULL REFERENCES users (id),
    name TEXT NOT NULL,
    color TEXT NOT NULL,
    is_primary INTEGER NOT NULL CHECK (is_primary IN (0, 1))
);
CREATE TABLE rooms (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    capacity INTEGER NOT NULL CHECK (capacity > 0),
    floor INTEGER NOT NULL,
    has_video INTEGER NOT NULL CHECK (has_video IN (0, 1))
);
CREATE TABLE events (
    id INTEGER PRIMARY KEY,
    calendar_id INTEGER NOT NULL REFERENCES calendars (id),
    title TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    start_at TEXT NOT NULL,
    end_at TEXT NOT NULL,
    room_id INTEGER REFERENCES rooms (id),
    status TEXT NOT NULL CHECK (status IN ('confirmed', 'cancelled')),
    created_at TEXT NOT NULL,
    CHECK (end_at > start_at)
);
CREATE TABLE attendees (
    id INTEGER PRIMARY KEY,
    event_id INTEGER NOT NULL REFERENCES events (id),
    user_id INTEGER NOT NULL REFERENCES users (id),
    response TEXT NOT NULL CHECK (response IN ('needs_action', 'accepted', 'declined', 'tentative')),
    UNIQUE (event_id, user_id)
);
CREATE INDEX idx_events_calendar ON events (calendar_id);
CREATE INDEX idx_events_room ON events (room_id, start_at);
CREATE INDEX idx_attendees_user ON attendees (user_id);
"""

TABLES = ["app_settings", "users", "calendars", "rooms", "events", "attendees"]

USERS: list[tuple[int, str, str, str]] = [
    (1, "Maya Chen", "maya.chen@northwind.example", "Product"),
    (2, "Omar Farouk", "omar.farouk@northwind.example", "Engineering"),
    (3, "Jordan Reyes", "jordan.reyes@northwind.example", "Design"),
    (4, "Lena Vogel", "lena.vogel@northwind.example", "Engineering"),
    (5, "Sam Patel", "sam.patel@northwind.example", "Engineering"),
    (6, "Ines Duarte", "ines.duarte@northwind.example", "Marketing"),
    (7, "Kwame Mensah", "kwame.mensah@northwind.example", "Sales"),
    (8, "Rachel Stein", "rachel.stein@northwind.example", "Product"),
    (9, "Hiro Watanabe", "hiro.watanabe@northwind.example", "Engineering"),
    (10, "Claire Dubois", "claire.dubois@northwind.example", "People"),
    (11, "Viktor Petrov", "viktor.petrov@northwind.example", "Finance"),
    (12, "Ana Souza", "ana.souza@northwind.example", "Design"),
]

_COLORS = [
    "blue",
    "green",
    "purple",
    "orange",
    "teal",
    "red",
    "yellow",
    "pink",
    "gray",
    "indigo",
    "brown",
    "cyan",
]

CALENDARS: list[tuple[int, int, str, str, int]] = [
    *[(uid, uid, name, _COLORS[uid - 1], 1) for uid, name, _email, _dept in USERS],
    (13, 1, "Product Team", "navy", 0),
    (14, 2, "Engineering On-call", "red", 0),
    (15, 10, "Company Events", "gold", 0),
]

# id, name, capacity, floor, has_video
ROOMS: list[tuple[int, str, int, int, int]] = [
    (1, "Atlas", 12, 3, 1),
    (2, "Borealis", 6, 3, 1),
    (3, "Cascade", 4, 2, 0),
    (4, "Dune", 8, 2, 1),
    (5, "Ember", 2, 1, 0),
    (6, "Fjord", 20, 4, 1),
]

A, N, D, T = "accepted", "needs_action", "declined", "tentative"
_STANDUP = {1: A, 2: A, 5: A, 9: A}

# id, calendar_id, title, description, start_at, end_at, room_id, status, created_at, {user_id: response}
EventRow = tuple[int, int, str, str, str, str, int | None, str, str, dict[int, str]]
EVENTS: list[EventRow] = [
    (
        1,
        1,
        "Daily Standup",
        "Yesterday, today, blockers.",
        "2026-11-02 09:30",
        "2026-11-02 09:45",
        3,
        "confirmed",
        "2026-10-01",
        _STANDUP,
    ),
    (
        2,
        1,
        "Daily Standup",
        "Yesterday, today, blockers.",
        "2026-11-03 09:30",
        "2026-11-03 09:45",
        3,
        "confirmed",
        "2026-10-01",
        _STANDUP,
    ),
    (
        3,
        1,
        "Daily Standup",
        "Yesterday, today, blockers.",
        "2026-11-04 09:30",
        "2026-11-04 09:45",
        3,
        "confirmed",
        "2026-10-01",
        _STANDUP,
    ),
    (
        4,
        1,
        "Daily Standup",
        "Yesterday, today, blockers.",
        "2026-11-05 09:30",
        "2026-11-05 09:45",
        3,
        "confirmed",
        "2026-10-01",
        _STANDUP,
    ),
    (
        5,
        1,
        "Daily Standup",
        "Yesterday, today, blockers.",
        "2026-11-06 09:30",
        "2026-11-06 09:45",
        3,
        "confirmed",
        "2026-10-01",
        _STANDUP,
    ),
    (
        6,
        13,
        "Product Review",
        "Demo of the release candidate.",
        "2026-11-03 14:00",
        "2026-11-03 15:00",
        1,
        "confirmed",
        "2026-10-20",
        {1: A, 8: A, 3: A, 2: T, 7: A},
    ),
    (
        7,
        3,
        "Design Critique",
        "Checkout redesign, round 2.",
        "2026-11-03 11:00",
        "2026-11-03 12:00",
        2,
        "confirmed",
        "2026-10-27",
        {3: A, 12: A, 1: N},
    ),
    (
        8,
        2,
        "Architecture Sync",
        "Event bus migration plan.",
        "2026-11-04 13:00",
        "2026-11-04 14:00",
        4,
        "confirmed",
        "2026-10-26",
        {2: A, 5: A, 9: A, 1: N},
    ),
    (
        9,
        11,
        "Budget Review",
        "FY27 budget, first pass.",
        "2026-11-04 13:00",
        "2026-11-04 14:00",
        4,
        "confirmed",
        "2026-10-29",
        {11: A, 10: A, 7: A},
    ),
    (
        10,
        6,
        "Campaign Kickoff",
        "Holiday campaign kickoff.",
        "2026-11-05 10:00",
        "2026-11-05 11:00",
        1,
        "confirmed",
        "2026-10-28",
        {6: A, 7: A, 8: A, 1: N},
    ),
    (
        11,
        1,
        "1:1 Maya / Rachel",
        "",
        "2026-11-05 15:00",
        "2026-11-05 15:30",
        5,
        "confirmed",
        "2026-09-15",
        {1: A, 8: A},
    ),
    (
        12,
        1,
        "Vendor Offsite Prep",
        "Agenda and logistics for the vendor offsite.",
        "2026-11-06 10:00",
        "2026-11-06 11:30",
        4,
        "confirmed",
        "2026-10-22",
        {1: A, 11: A, 7: A},
    ),
    (
        13,
        15,
        "All Hands",
        "Monthly company all hands.",
        "2026-11-06 16:00",
        "2026-11-06 17:00",
        6,
        "confirmed",
        "2026-10-05",
        {10: A, 1: N, 2: A, 3: A, 4: A, 5: A, 6: A, 7: A, 8: A, 9: T, 11: A, 12: D},
    ),
    (
        14,
        2,
        "1:1 Omar / Maya",
        "",
        "2026-11-04 16:00",
        "2026-11-04 16:30",
        5,
        "confirmed",
        "2026-09-15",
        {2: A, 1: A},
    ),
    (
        15,
        5,
        "Incident Postmortem",
        "Payments outage of 2026-10-29.",
        "2026-11-03 14:00",
        "2026-11-03 15:00",
        2,
        "confirmed",
        "2026-10-30",
        {5: A, 2: A, 9: A},
    ),
    (
        16,
        1,
        "Roadmap Planning",
        "H1 roadmap.",
        "2026-11-09 10:00",
        "2026-11-09 12:00",
        1,
        "confirmed",
        "2026-10-25",
        {1: A, 8: A, 2: A, 3: A},
    ),
    (
        17,
        14,
        "On-call Handoff",
        "",
        "2026-11-02 17:00",
        "2026-11-02 17:30",
        None,
        "confirmed",
        "2026-10-01",
        {2: A, 9: A},
    ),
    (
        18,
        10,
        "Onboarding Placeholder",
        "Hold for a new hire's first morning.",
        "2026-11-09 09:00",
        "2026-11-09 10:00",
        3,
        "confirmed",
        "2026-10-21",
        {10: A},
    ),
    (
        19,
        1,
        "Lunch with Omar",
        "",
        "2026-10-28 12:00",
        "2026-10-28 13:00",
        None,
        "confirmed",
        "2026-10-20",
        {1: A, 2: A},
    ),
    (
        20,
        1,
        "Quarterly Planning",
        "Moved to the roadmap session.",
        "2026-10-30 10:00",
        "2026-10-30 11:00",
        1,
        "cancelled",
        "2026-10-10",
        {1: A, 8: A},
    ),
    (
        21,
        7,
        "Sales Pipeline",
        "Enterprise pipeline review.",
        "2026-11-05 09:00",
        "2026-11-05 10:00",
        2,
        "confirmed",
        "2026-10-30",
        {7: A, 1: T},
    ),
    (
        22,
        12,
        "Brand Workshop",
        "",
        "2026-11-05 13:00",
        "2026-11-05 15:00",
        6,
        "confirmed",
        "2026-10-19",
        {12: A, 3: A, 6: A},
    ),
    (
        23,
        1,
        "Customer Interview: Acme",
        "Discovery call about bulk ordering.",
        "2026-11-03 16:00",
        "2026-11-03 16:45",
        2,
        "confirmed",
        "2026-10-29",
        {1: A, 8: A},
    ),
    (
        24,
        9,
        "Platform Deep Dive",
        "",
        "2026-11-04 10:00",
        "2026-11-04 11:30",
        1,
        "confirmed",
        "2026-10-27",
        {9: A, 5: A, 4: A},
    ),
    (
        25,
        6,
        "Content Calendar",
        "",
        "2026-11-04 10:00",
        "2026-11-04 10:30",
        2,
        "confirmed",
        "2026-10-27",
        {6: A, 12: A},
    ),
    (
        26,
        8,
        "Pricing Strategy",
        "",
        "2026-11-10 14:00",
        "2026-11-10 15:00",
        2,
        "confirmed",
        "2026-10-31",
        {8: A, 1: N},
    ),
    (
        27,
        4,
        "Eng Book Club",
        "Chapter 4.",
        "2026-11-03 12:00",
        "2026-11-03 13:00",
        3,
        "confirmed",
        "2026-10-15",
        {4: A, 1: D, 5: A},
    ),
    (
        28,
        8,
        "Pricing Sync",
        "",
        "2026-11-03 10:00",
        "2026-11-03 10:30",
        5,
        "cancelled",
        "2026-10-20",
        {8: A, 1: A},
    ),
]


def build_seed_sql() -> str:
    """Schema and data as one deterministic SQL script."""
    event_rows = [row[:9] for row in EVENTS]
    attendee_rows = []
    attendee_id = 1
    for row in EVENTS:
        for user_id, response in row[9].items():
            attendee_rows.append((attendee_id, row[0], user_id, response))
            attendee_id += 1
    parts = [
        "PRAGMA foreign_keys = ON;",
        "BEGIN;",
        SCHEMA.strip(),
        insert_sql(
            "app_settings",
            ["key", "value"],
            [("current_date", CURRENT_DATE), ("logged_in_user", LOGGED_IN_USER)],
        ),
        insert_sql("users", ["id", "name", "email", "department"], USERS),
        insert_sql("calendars", ["id", "owner_id", "name", "color", "is_primary"], CALENDARS),
        insert_sql("rooms", ["id", "name", "capacity", "floor", "has_video"], ROOMS),
        insert_sql(
            "events",
            [
                "id",
                "calendar_id",
                "title",
                "description",
                "start_at",
                "end_at",
                "room_id",
                "status",
                "created_at",
            ],
            event_rows,
        ),
        insert_sql("attendees", ["id", "event_id", "user_id", "response"], attendee_rows),
        "COMMIT;",
    ]
    return "\n".join(parts) + "\n"


SEED_SQL = build_seed_sql()
