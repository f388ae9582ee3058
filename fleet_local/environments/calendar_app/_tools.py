"""MCP tools of ``calendar``: people, calendars, rooms, events, invitations and responses."""

from __future__ import annotations

import sqlite3
from typing import Any

from .._definition import JSONSchema, ToolDefinition, ToolError
from .._tooling import (
    bool_prop,
    execute,
    fetch_all,
    fetch_one,
    int_prop,
    like_pattern,
    obj_schema,
    parse_date,
    parse_datetime,
    parse_email,
    setting,
    str_prop,
)

RESPONSES = ("accepted", "declined", "tentative")

_EVENT_COLUMNS = (
    "e.id, e.title, e.description, e.start_at, e.end_at, e.status, e.calendar_id, c.name AS calendar_name, "
    "u.name AS organizer_name, u.email AS organizer_email, e.room_id, r.name AS room_name"
)
_EVENT_FROM = (
    "FROM events e JOIN calendars c ON c.id = e.calendar_id JOIN users u ON u.id = c.owner_id "
    "LEFT JOIN rooms r ON r.id = e.room_id"
)


def _event(conn: sqlite3.Connection, event_id: int) -> dict[str, Any]:
    row = fetch_one(conn, f"SELECT {_EVENT_COLUMNS} {_EVENT_FROM} WHERE e.id = ?", (event_id,))
    if row is None:
        raise ToolError(f"Invalid argument 'event_id': event {event_id} not found")
    return row


def _open_event(conn: sqlite3.Connection, event_id: int) -> dict[str, Any]:
    event = _event(conn, event_id)
    if event["status"] == "cancelled":
        raise ToolError(f"Invalid argument 'event_id': event {event_id} ({event['title']}) is cancelled")
    return event


def _user_by_email(conn: sqlite3.Connection, email: str, argument: str) -> dict[str, Any]:
    address = parse_email(argument, email)
    row = fetch_one(conn, "SELECT * FROM users WHERE email = ?", (address,))
    if row is None:
        raise ToolError(f"Invalid argument '{argument}': no user with email {address}")
    return row


def _room(conn: sqlite3.Connection, room_id: int) -> dict[str, Any]:
    row = fetch_one(conn, "SELECT * FROM rooms WHERE id = ?", (room_id,))
    if row is None:
        raise ToolError(f"Invalid argument 'room_id': room {room_id} not found")
    return row


def _time_range(args: dict[str, Any], start: str | None = None, end: str | None = None) -> tuple[str, str]:
    start_at = parse_datetime("start_at", args["start_at"]) if "start_at" in args else start
    end_at = parse_datetime("end_at", args["end_at"]) if "end_at" in args else end
    if start_at is None or end_at is None:
        raise ToolError("Missing required argument 'start_at' or 'end_at'")
    if end_at <= start_at:
        raise ToolError(f"Invalid argument 'end_at': {end_at} is not after start_at {start_at}")
    return start_at, end_at


def _room_conflicts(
    conn: sqlite3.Connection, room_id: int, start_at: str, end_at: str, exclude_event: int | None = None
) -> list[dict[str, Any]]:
    return fetch_all(
        conn,
        "SELECT id, title, start_at, end_at FROM events WHERE room_id = ? AND status = 'confirmed' "
        "AND start_at < ? AND ? < end_at AND id != ? ORDER BY start_at",
        (room_id, end_at, start_at, exclude_event or 0),
    )


def _check_room(
    conn: sqlite3.Connection,
    room_id: int,
    start_at: str,
    end_at: str,
    *,
    people: int,
    exclude_event: int | None = None,
) -> dict[str, Any]:
    room = _room(conn, room_id)
    clashes = _room_conflicts(conn, room_id, start_at, end_at, exclude_event)
    if clashes:
        clash = clashes[0]
        raise ToolError(
            f"Invalid argument 'room_id': {room['name']} is booked by event {clash['id']} "
            f"({clash['title']}, {clash['start_at']}-{clash['end_at'][-5:]})"
        )
    if people > room["capacity"]:
        raise ToolError(
            f"Invalid argument 'room_id': {room['name']} seats {room['capacity']}, "
            f"the event has {people} attendees"
        )
    return room


def _attendees(conn: sqlite3.Connection, event_id: int) -> list[dict[str, Any]]:
    return fetch_all(
        conn,
        "SELECT u.id AS user_id, u.name, u.email, a.response FROM attendees a "
        "JOIN users u ON u.id = a.user_id "
        "WHERE a.event_id = ? ORDER BY a.id",
        (event_id,),
    )


def _event_view(conn: sqlite3.Connection, event_id: int) -> dict[str, Any]:
    return {**_event(conn, event_id), "attendees": _attendees(conn, event_id)}


# -- directory --------------------------------------------------------------------------------------


def list_users(conn: sqlite3.Connection, args: dict[str, Any]) -> dict[str, Any]:
    clauses: list[str] = []
    params: list[Any] = []
    if "query" in args:
        clauses.append("(name LIKE ? ESCAPE '\\' OR email LIKE ? ESCAPE '\\')")
        params += [like_pattern(args["query"].strip())] * 2
    if "department" in args:
        clauses.append("department = ? COLLATE NOCASE")
        params.append(args["department"].strip())
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    users = fetch_all(conn, f"SELECT id, name, email, department FROM users {where} ORDER BY name", params)
    return {"users": users, "logged_in_user": setting(conn, "logged_in_user")}


def list_calendars(conn: sqlite3.Connection, args: dict[str, Any]) -> dict[str, Any]:
    params: list[Any] = []
    where = ""
    if "owner_email" in args:
        owner = _user_by_email(conn, args["owner_email"], "owner_email")
        where = "WHERE c.owner_id = ?"
        params.append(owner["id"])
    rows = fetch_all(
        conn,
        "SELECT c.id, c.name, c.color, c.is_primary, u.name AS owner_name, u.email AS owner_email "
        f"FROM calendars c JOIN users u ON u.id = c.owner_id {where} ORDER BY c.id",
        params,
    )
    return {"calendars": [{**r, "is_primary": bool(r["is_primary"])} for r in rows]}


def _room_filters(args: dict[str, Any]) -> tuple[list[str], list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    if "min_capacity" in args:
        clauses.append("capacity >= ?")
        params.append(args["min_capacity"])
    if "has_video" in args:
        clauses.append("has_video = ?")
        params.append(1 if args["has_video"] else 0)
    return clauses, params


def _room_view(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "has_video": bool(row["has_video"])}


def list_rooms(conn: sqlite3.Connection, args: dict[str, Any]) -> dict[str, Any]:
    clauses, params = _room_filters(args)
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    rows = fetch_all(conn, f"SELECT * FROM rooms {where} ORDER BY name", params)
    return {"rooms": [_room_view(r) for r in rows]}


def find_free_rooms(conn: sqlite3.Connection, args: dict[str, Any]) -> dict[str, Any]:
    start_at, end_at = _time_range(args)
    clauses, params = _room_filters(args)
    clauses.append(
        "NOT EXISTS (SELECT 1 FROM events e WHERE e.room_id = rooms.id AND e.status = 'confirmed' "
        "AND e.start_at < ? AND ? < e.end_at)"
    )
    params += [end_at, start_at]
    rows = fetch_all(
        conn, f"SELECT * FROM rooms WHERE {' AND '.join(clauses)} ORDER BY capacity, name", params
    )
    return {"start_at": start_at, "end_at": end_at, "rooms": [_room_view(r) for r in rows]}


# -- events -----------------------------------------------------------------------------------------


def list_events(conn: sqlite3.Connection, args: dict[str, Any]) -> dict[str, Any]:
    clauses: list[str] = []
    params: list[Any] = []
    columns = _EVENT_COLUMNS
    joins = _EVENT_FROM
    if "calendar_id" in args:
        if fetch_one(conn, "SELECT id FROM calendars WHERE id = ?", (args["calendar_id"],)) is None:
            raise ToolError(f"Invalid argument 'calendar_id': calendar {args['calendar_id']} not found")
        clauses.append("e.calendar_id = ?")
        params.append(args["calendar_id"])
    if "attendee_email" in args:
        user = _user_by_email(conn, args["attendee_email"], "attendee_email")
        joins += " JOIN attendees a ON a.event_id = e.id AND a.user_id = ?"
        columns += ", a.response AS attendee_response"
        params.insert(0, user["id"])
    if "date_from" in args:
        clauses.append("e.start_at >= ?")
        params.append(parse_date("date_from", args["date_from"]))
    if "date_to" in args:
        clauses.append("e.start_at < date(?, '+1 day')")
        params.append(parse_date("date_to", args["date_to"]))
    if not args.get("include_cancelled", False):
        clauses.append("e.status = 'confirmed'")
    where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
    rows = fetch_all(conn, f"SELECT {columns} {joins} {where} ORDER BY e.start_at, e.id", params)
    return {"events": rows, "total": len(rows)}


def get_event(conn: sqlite3.Connection, args: dict[str, Any]) -> dict[str, Any]:
    return _event_view(conn, args["event_id"])


def check_availability(conn: sqlite3.Connection, args: dict[str, Any]) -> dict[str, Any]:
    start_at, end_at = _time_range(args)
    people = []
    for index, email in enumerate(args["emails"]):
        user = _user_by_email(conn, email, f"emails[{index}]")
        busy = fetch_all(
            conn,
            "SELECT e.id, e.title, e.start_at, e.end_at, a.response FROM events e "
            "JOIN attendees a ON a.event_id = e.id WHERE a.user_id = ? AND e.status = 'confirmed' "
            "AND a.response != 'declined' AND e.start_at < ? AND ? < e.end_at ORDER BY e.start_at",
            (user["id"], end_at, start_at),
        )
        people.append({"email": user["email"], "name": user["name"], "free": not busy, "busy": busy})
    return {"start_at": start_at, "end_at": end_at, "people": people}


def create_event(conn: sqlite3.Connection, args: dict[str, Any]) -> dict[str, Any]:
    calendar = fetch_one(conn, "SELECT * FROM calendars WHERE id = ?", (args["calendar_id"],))
    if calendar is None:
        raise ToolError(f"Invalid argument 'calendar_id': calendar {args['calendar_id']} not found")
    start_at, end_at = _time_range(args)
    invitees: list[int] = []
    for index, email in enumerate(args.get("attendee_emails", [])):
        user = _user_by_email(conn, email, f"attendee_emails[{index}]")
        if user["id"] != calendar["owner_id"] and user["id"] not in invitees:
            invitees.append(user["id"])
    room_id = args.get("room_id")
    if room_id is not None:
        _check_room(conn, room_id, start_at, end_at, people=len(invitees) + 1)
    event_id = execute(
        conn,
        "INSERT INTO events (calendar_id, title, description, start_at, end_at, room_id, status, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, 'confirmed', ?)",
        (
            calendar["id"],
            args["title"].strip(),
            args.get("description", "").strip(),
            start_at,
            end_at,
            room_id,
            setting(conn, "current_date"),
        ),
    )
    execute(
        conn,
        "INSERT INTO attendees (event_id, user_id, response) VALUES (?, ?, 'accepted')",
        (event_id, calendar["owner_id"]),
    )
    for user_id in invitees:
        execute(
            conn,
            "INSERT INTO attendees (event_id, user_id, response) VALUES (?, ?, 'needs_action')",
            (event_id, user_id),
        )
    return _event_view(conn, event_id)


def update_event(conn: sqlite3.Connection, args: dict[str, Any]) -> dict[str, Any]:
    event = _open_event(conn, args["event_id"])
    changes: dict[str, Any] = {}
    if "title" in args:
        changes["title"] = args["title"].strip()
    if "description" in args:
        changes["description"] = args["description"].strip()
    start_at, end_at = _time_range(args, event["start_at"], event["end_at"])
    if (start_at, end_at) != (event["start_at"], event["end_at"]):
        changes["start_at"], changes["end_at"] = start_at, end_at
    room_id = args["room_id"] if "room_id" in args else event["room_id"]
    if "room_id" in args:
        changes["room_id"] = room_id
    if not changes and not args.keys() - {"event_id"}:
        raise ToolError(
            "Nothing to update: pass at least one of 'title', 'description', 'start_at', 'end_at', 'room_id'"
        )
    if room_id is not None and ("room_id" in changes or "start_at" in changes):
        people = len(_attendees(conn, event["id"]))
        _check_room(conn, room_id, start_at, end_at, people=people, exclude_event=event["id"])
    if changes:
        assignments = ", ".join(f"{column} = ?" for column in changes)
        execute(conn, f"UPDATE events SET {assignments} WHERE id = ?", [*changes.values(), event["id"]])
    return _event_view(conn, event["id"])


def cancel_event(conn: sqlite3.Connection, args: dict[str, Any]) -> dict[str, Any]:
    event = _open_event(conn, args["event_id"])
    execute(conn, "UPDATE events SET status = 'cancelled' WHERE id = ?", (event["id"],))
    return _event_view(conn, event["id"])


def add_attendees(conn: sqlite3.Connection, args: dict[str, Any]) -> dict[str, Any]:
    event = _open_event(conn, args["event_id"])
    current = {a["user_id"] for a in _attendees(conn, event["id"])}
    new: list[int] = []
    for index, email in enumerate(args["emails"]):
        user = _user_by_email(conn, email, f"emails[{index}]")
        if user["id"] in current or user["id"] in new:
            raise ToolError(f"Invalid argument 'emails[{index}]': {user['email']} is already invited")
        new.append(user["id"])
    if event["room_id"] is not None:
        room = _room(conn, event["room_id"])
        if len(current) + len(new) > room["capacity"]:
            raise ToolError(
                f"Invalid argument 'emails': {room['name']} seats {room['capacity']}; the event would have "
                f"{len(current) + len(new)} attendees (move it to a bigger room first)"
            )
    for user_id in new:
        execute(
            conn,
            "INSERT INTO attendees (event_id, user_id, response) VALUES (?, ?, 'needs_action')",
            (event["id"], user_id),
        )
    return _event_view(conn, event["id"])


def remove_attendee(conn: sqlite3.Connection, args: dict[str, Any]) -> dict[str, Any]:
    event = _open_event(conn, args["event_id"])
    user = _user_by_email(conn, args["email"], "email")
    if user["email"] == event["organizer_email"]:
        raise ToolError(
            f"Invalid argument 'email': {user['email']} organizes the event and cannot be removed"
        )
    cursor = conn.execute(
        "DELETE FROM attendees WHERE event_id = ? AND user_id = ?", (event["id"], user["id"])
    )
    if cursor.rowcount == 0:
        raise ToolError(f"Invalid argument 'email': {user['email']} is not invited to event {event['id']}")
    return _event_view(conn, event["id"])


def respond_to_event(conn: sqlite3.Connection, args: dict[str, Any]) -> dict[str, Any]:
    event = _open_event(conn, args["event_id"])
    user = _user_by_email(conn, args["email"], "email")
    cursor = conn.execute(
        "UPDATE attendees SET response = ? WHERE event_id = ? AND user_id = ?",
        (args["response"], event["id"], user["id"]),
    )
    if cursor.rowcount == 0:
        raise ToolError(f"Invalid argument 'email': {user['email']} is not invited to event {event['id']}")
    return _event_view(conn, event["id"])


_EVENT_ID = int_prop("Event id.")
_DATETIME = "Local date and time as 'YYYY-MM-DD HH:MM'."
_EMAILS: JSONSchema = {
    "type": "array",
    "description": "Email addresses of people in the directory.",
    "minItems": 1,
    "maxItems": 50,
    "items": {"type": "string", "minLength": 3, "maxLength": 200},
}
_ROOM_FILTERS: dict[str, JSONSchema] = {
    "min_capacity": int_prop("Only rooms seating at least this many people."),
    "has_video": bool_prop("Only rooms with (true) or without (false) video conferencing."),
}

TOOLS: list[ToolDefinition] = [
    ToolDefinition(
        name="list_users",
        description="Search the company directory by name or email substring and/or department. Also "
        "tells who the logged-in user is.",
        input_schema=obj_schema(
            {
                "query": str_prop("Substring of the name or email (case-insensitive)."),
                "department": str_prop("Department, e.g. Engineering, Product, Design."),
            }
        ),
        handler=list_users,
        read_only=True,
    ),
    ToolDefinition(
        name="list_calendars",
        description="List calendars (each user has a primary calendar; teams have shared ones), "
        "optionally only those owned by one person. The owner of a calendar organizes its events.",
        input_schema=obj_schema({"owner_email": str_prop("Email of the calendar owner.")}),
        handler=list_calendars,
        read_only=True,
    ),
    ToolDefinition(
        name="list_rooms",
        description="List meeting rooms with capacity, floor and video equipment.",
        input_schema=obj_schema(dict(_ROOM_FILTERS)),
        handler=list_rooms,
        read_only=True,
    ),
    ToolDefinition(
        name="find_free_rooms",
        description="Rooms with no confirmed booking overlapping [start_at, end_at), smallest first.",
        input_schema=obj_schema(
            {
                "start_at": str_prop(_DATETIME, max_length=19),
                "end_at": str_prop(_DATETIME, max_length=19),
                **_ROOM_FILTERS,
            },
            ["start_at", "end_at"],
        ),
        handler=find_free_rooms,
        read_only=True,
    ),
    ToolDefinition(
        name="list_events",
        description="List events in start order, filtered by calendar, attendee (with that person's "
        "response) and/or a start-date range (inclusive). Cancelled events are hidden unless "
        "include_cancelled is true.",
        input_schema=obj_schema(
            {
                "calendar_id": int_prop("Only events of this calendar."),
                "attendee_email": str_prop("Only events this person is invited to."),
                "date_from": str_prop("Earliest start date, YYYY-MM-DD.", max_length=10),
                "date_to": str_prop("Latest start date, YYYY-MM-DD (inclusive).", max_length=10),
                "include_cancelled": bool_prop("Also list cancelled events."),
            }
        ),
        handler=list_events,
        read_only=True,
    ),
    ToolDefinition(
        name="get_event",
        description="Get one event with its room, organizer and every attendee's response.",
        input_schema=obj_schema({"event_id": _EVENT_ID}, ["event_id"]),
        handler=get_event,
        read_only=True,
    ),
    ToolDefinition(
        name="check_availability",
        description="For each person, the confirmed events they have not declined that overlap "
        "[start_at, end_at).",
        input_schema=obj_schema(
            {
                "emails": _EMAILS,
                "start_at": str_prop(_DATETIME, max_length=19),
                "end_at": str_prop(_DATETIME, max_length=19),
            },
            ["emails", "start_at", "end_at"],
        ),
        handler=check_availability,
        read_only=True,
    ),
    ToolDefinition(
        name="create_event",
        description="Create a confirmed event on a calendar. The calendar's owner is the organizer and "
        "attends (accepted); other attendees are invited (needs_action). A room must be free and seat "
        "everyone.",
        input_schema=obj_schema(
            {
                "calendar_id": int_prop("Calendar to create the event on."),
                "title": str_prop("Event title.", max_length=200),
                "start_at": str_prop(_DATETIME, max_length=19),
                "end_at": str_prop(_DATETIME, max_length=19),
                "room_id": int_prop("Room to book (optional)."),
                "description": {"type": "string", "description": "Event description.", "maxLength": 2000},
                "attendee_emails": {**_EMAILS, "minItems": 0, "description": "People to invite."},
            },
            ["calendar_id", "title", "start_at", "end_at"],
        ),
        handler=create_event,
        read_only=False,
    ),
    ToolDefinition(
        name="update_event",
        description="Change an event's title, description, time and/or room (room_id null frees the "
        "room). A new room or time is checked for clashes and capacity.",
        input_schema=obj_schema(
            {
                "event_id": _EVENT_ID,
                "title": str_prop("New title.", max_length=200),
                "description": {"type": "string", "description": "New description.", "maxLength": 2000},
                "start_at": str_prop(_DATETIME, max_length=19),
                "end_at": str_prop(_DATETIME, max_length=19),
                "room_id": {"type": ["integer", "null"], "minimum": 1, "description": "New room, or null."},
            },
            ["event_id"],
        ),
        handler=update_event,
        read_only=False,
    ),
    ToolDefinition(
        name="cancel_event",
        description="Cancel an event (it stays visible with status cancelled and frees its room).",
        input_schema=obj_schema({"event_id": _EVENT_ID}, ["event_id"]),
        handler=cancel_event,
        read_only=False,
    ),
    ToolDefinition(
        name="add_attendees",
        description="Invite more people to an event (their response starts as needs_action).",
        input_schema=obj_schema({"event_id": _EVENT_ID, "emails": _EMAILS}, ["event_id", "emails"]),
        handler=add_attendees,
        read_only=False,
    ),
    ToolDefinition(
        name="remove_attendee",
        description="Remove one invited person from an event (not the organizer).",
        input_schema=obj_schema(
            {"event_id": _EVENT_ID, "email": str_prop("Email of the attendee to remove.")},
            ["event_id", "email"],
        ),
        handler=remove_attendee,
        read_only=False,
    ),
    ToolDefinition(
        name="respond_to_event",
        description="Record an attendee's response to an invitation: accepted, declined or tentative.",
        input_schema=obj_schema(
            {
                "event_id": _EVENT_ID,
                "email": str_prop("Email of the attendee who responds."),
                "response": str_prop("The response.", enum=RESPONSES),
            },
            ["event_id", "email", "response"],
        ),
        handler=respond_to_event,
        read_only=False,
    ),
]
