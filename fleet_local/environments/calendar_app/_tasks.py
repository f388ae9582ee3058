"""Tasks of ``calendar``, each with a verifier and a reference solution."""

from __future__ import annotations

from .._definition import TaskDefinition
from .._verifier_lib import TaskFactory, step
from ._seed import CURRENT_DATE, LOGGED_IN_USER, TABLES

ENV_KEY = "calendar"
ENV_VERSION = "v1.0.0"
ENV_VARIABLES = {"CURRENT_DATE": CURRENT_DATE, "LOGGED_IN_USER": LOGGED_IN_USER}

MAYA = "maya.chen@northwind.example"
OMAR = "omar.farouk@northwind.example"
RACHEL = "rachel.stein@northwind.example"
JORDAN = "jordan.reyes@northwind.example"
LENA = "lena.vogel@northwind.example"
SAM = "sam.patel@northwind.example"
KWAME = "kwame.mensah@northwind.example"


_step = step
_task = TaskFactory(
    ENV_KEY,
    ENV_VERSION,
    ENV_VARIABLES,
    TABLES,
    prompt_prefix=f"I'm Maya Chen ({LOGGED_IN_USER}); today is Monday {CURRENT_DATE}. ",
)


# Helpers most calendar verifiers share, written below their verify function (which comes first).
_CALENDAR_HELPERS = r'''
def user_id(env, email):
    return env.db("seed").query("SELECT id FROM users WHERE email = ?", [email]).rows[0][0]


def attendee_map(env, db, event_id):
    """{user email: response} of an event."""
    result = env.db(db).query(
        "SELECT u.email, a.response FROM attendees a JOIN users u ON u.id = a.user_id WHERE a.event_id = ?",
        [event_id],
    )
    return {row[0]: row[1] for row in result.rows}


def room_clashes(env, event):
    """Other confirmed events overlapping ``event`` in the same room (current data)."""
    if event["room_id"] is None:
        return []
    result = env.db("current").query(
        "SELECT id FROM events WHERE room_id = ? AND status = 'confirmed' AND id != ? "
        "AND start_at < ? AND ? < end_at",
        [event["room_id"], event["id"], event["end_at"], event["start_at"]],
    )
    return [row[0] for row in result.rows]


def only_event_changed(env, event_id, errors):
    """Record an error for every event other than ``event_id`` that changed."""
    added, removed, modified = table_diff(env, "events")
    if added or removed:
        errors.append("events were added or removed")
    for before, after in modified:
        if before["id"] != event_id:
            errors.append("event %s (%s) changed" % (before["id"], before["title"]))
'''


def _calendar_verifier(body: str) -> str:
    return body.strip("\n") + "\n\n" + _CALENDAR_HELPERS


_BOOK_PLANNING_SYNC = _calendar_verifier(r"""
def verify(env, final_answer=None):
    successes, errors = [], []
    added, removed, modified = table_diff(env, "events")
    if removed or modified:
        errors.append("existing events were changed")
    if len(added) != 1:
        errors.append("expected one new event, found %d" % len(added))
        return report_single(successes, errors)
    event = added[0]
    if not normalized_contains("Q4 Planning Sync", event["title"]):
        errors.append("title is %r" % event["title"])
    if event["calendar_id"] != 1:
        errors.append("event is on calendar %s, not Maya's primary calendar" % event["calendar_id"])
    if (event["start_at"], event["end_at"]) != ("2026-11-04 10:00", "2026-11-04 11:00"):
        errors.append("event runs %s - %s" % (event["start_at"], event["end_at"]))
    if event["status"] != "confirmed":
        errors.append("event is %s" % event["status"])
    room = env.db("current").query(
        "SELECT capacity, has_video, name FROM rooms WHERE id = ?", [event["room_id"]]
    ).rows
    if not room:
        errors.append("no room booked")
    else:
        capacity, has_video, name = room[0]
        if not has_video:
            errors.append("room %s has no video" % name)
        if capacity < 4:
            errors.append("room %s seats only %s" % (name, capacity))
        clashes = room_clashes(env, event)
        if clashes:
            errors.append("room %s is double-booked with events %s" % (name, clashes))
        if not errors:
            successes.append("[C] Q4 Planning Sync booked in %s" % name)
    people = attendee_map(env, "current", event["id"])
    if set(people) != {"maya.chen@northwind.example", "omar.farouk@northwind.example",
                       "rachel.stein@northwind.example", "jordan.reyes@northwind.example"}:
        errors.append("attendees are %s" % sorted(people))
    else:
        successes.append("[C] Omar, Rachel and Jordan invited")
    added_people, removed_people, modified_people = table_diff(env, "attendees")
    if removed_people or modified_people or any(a["event_id"] != event["id"] for a in added_people):
        errors.append("attendees of other events changed")
    errors.extend(unexpected_changes(env, allowed=("events", "attendees")))
    return report_single(successes, errors)
""")

_CANCEL_VENDOR_PREP = _calendar_verifier(r"""
def verify(env, final_answer=None):
    errors = []
    rows = env.db("current").query(
        "SELECT id, status FROM events WHERE title = 'Vendor Offsite Prep'", []
    ).rows
    if len(rows) != 1 or rows[0][1] != "cancelled":
        print("Vendor Offsite Prep is not cancelled: %r" % rows)
        return TASK_FAILED_SCORE
    before = table_rows(env, "seed", "events")[rows[0][0]]
    after = table_rows(env, "current", "events")[rows[0][0]]
    if dict(after, status=before["status"]) != before:
        errors.append("other fields of the event changed")
    only_event_changed(env, rows[0][0], errors)
    errors.extend(unexpected_changes(env, allowed=("events",)))
    if errors:
        print(errors)
        return TASK_FAILED_SCORE
    return TASK_SUCCESSFUL_SCORE
""")

_RESCHEDULE_ONE_ON_ONE = _calendar_verifier(r"""
def verify(env, final_answer=None):
    successes, errors = [], []
    before = table_rows(env, "seed", "events")
    after = table_rows(env, "current", "events")
    matches = [eid for eid, row in before.items() if row["title"] == "1:1 Omar / Maya"]
    eid = matches[0]
    want = dict(before[eid], start_at="2026-11-05 11:00", end_at="2026-11-05 11:30")
    if after.get(eid) != want:
        errors.append("1:1 is %r, expected %r" % (after.get(eid), want))
    else:
        successes.append("[C] 1:1 moved to Thursday 11:00 in Ember")
        if room_clashes(env, after[eid]):
            errors.append("Ember is double-booked")
    if attendee_map(env, "current", eid) != attendee_map(env, "seed", eid):
        errors.append("attendees of the 1:1 changed")
    only_event_changed(env, eid, errors)
    errors.extend(unexpected_changes(env, allowed=("events",)))
    return report_single(successes, errors)
""")

_FIX_DOUBLE_BOOKING = _calendar_verifier(r"""
def verify(env, final_answer=None):
    successes, errors = [], []
    before = table_rows(env, "seed", "events")
    after = table_rows(env, "current", "events")
    budget = [eid for eid, row in before.items() if row["title"] == "Budget Review"][0]
    arch = [eid for eid, row in before.items() if row["title"] == "Architecture Sync"][0]
    if after.get(arch) != before[arch]:
        errors.append("Architecture Sync changed")
    moved = after.get(budget) or {}
    if dict(moved, room_id=before[budget]["room_id"]) != before[budget]:
        errors.append("Budget Review changed more than its room: %r" % moved)
    elif moved["room_id"] is None or moved["room_id"] == before[budget]["room_id"]:
        errors.append("Budget Review is still in room %s" % moved["room_id"])
    else:
        capacity = env.db("current").query(
            "SELECT capacity FROM rooms WHERE id = ?", [moved["room_id"]]
        ).rows[0][0]
        people = len(attendee_map(env, "current", budget))
        if capacity < people:
            errors.append("new room seats %s, Budget Review has %s attendees" % (capacity, people))
        elif room_clashes(env, moved):
            errors.append("new room is booked too: %s" % room_clashes(env, moved))
        else:
            successes.append("[C] Budget Review moved to room %s" % moved["room_id"])
    only_event_changed(env, budget, errors)
    errors.extend(unexpected_changes(env, allowed=("events",)))
    return report_single(successes, errors)
""")

_ACCEPT_PENDING = _calendar_verifier(r'''
def verify(env, final_answer=None):
    successes, errors = [], []
    maya = user_id(env, "maya.chen@northwind.example")
    targets = pending_this_week(env, "maya.chen@northwind.example")
    before = table_rows(env, "seed", "attendees")
    after = table_rows(env, "current", "attendees")
    for aid, row in before.items():
        should_accept = row["user_id"] == maya and row["event_id"] in targets
        want = dict(row, response="accepted") if should_accept else row
        if after.get(aid) != want:
            errors.append("invitation %s (event %s, user %s) is %r" % (
                aid, row["event_id"], row["user_id"], (after.get(aid) or {}).get("response")))
        elif should_accept:
            successes.append("[C] event %s accepted" % row["event_id"])
    if len(after) != len(before):
        errors.append("attendees were added or removed")
    errors.extend(unexpected_changes(env, allowed=("attendees",)))
    return report_single(successes, errors)


def pending_this_week(env, email):
    """Ids of confirmed events from Nov 2 to Nov 6 awaiting this person's response (seed database)."""
    result = env.db("seed").query(
        "SELECT e.id FROM events e JOIN attendees a ON a.event_id = e.id JOIN users u ON u.id = a.user_id "
        "WHERE u.email = ? AND a.response = 'needs_action' AND e.status = 'confirmed' "
        "AND e.start_at >= '2026-11-02' AND e.start_at < '2026-11-07'",
        [email],
    )
    return [row[0] for row in result.rows]
''')

_DECLINE_CLASH = _calendar_verifier(r"""
def verify(env, final_answer=None):
    successes, errors = [], []
    maya = user_id(env, "maya.chen@northwind.example")
    standup = env.db("seed").query(
        "SELECT start_at, end_at FROM events WHERE title = 'Daily Standup' "
        "AND start_at LIKE '2026-11-05%'",
        [],
    ).rows[0]
    clashing = [row[0] for row in env.db("seed").query(
        "SELECT e.id FROM events e JOIN attendees a ON a.event_id = e.id WHERE a.user_id = ? "
        "AND e.status = 'confirmed' AND e.title != 'Daily Standup' AND e.start_at < ? AND ? < e.end_at",
        [maya, standup[1], standup[0]],
    ).rows]
    before = table_rows(env, "seed", "attendees")
    after = table_rows(env, "current", "attendees")
    for aid, row in before.items():
        should_decline = row["user_id"] == maya and row["event_id"] in clashing
        want = dict(row, response="declined") if should_decline else row
        if after.get(aid) != want:
            errors.append("invitation of user %s to event %s is %r" % (
                row["user_id"], row["event_id"], (after.get(aid) or {}).get("response")))
        elif should_decline:
            successes.append("[C] declined event %s" % row["event_id"])
    if not clashing:
        errors.append("verifier found no clashing event")
    if len(after) != len(before):
        errors.append("attendees were added or removed")
    errors.extend(unexpected_changes(env, allowed=("attendees",)))
    return report_single(successes, errors)
""")

_ADD_TO_CRITIQUE = _calendar_verifier(r"""
def verify(env, final_answer=None):
    successes, errors = [], []
    critique = env.db("seed").query("SELECT id FROM events WHERE title = 'Design Critique'", []).rows[0][0]
    want = dict(attendee_map(env, "seed", critique))
    want["lena.vogel@northwind.example"] = "needs_action"
    want["sam.patel@northwind.example"] = "needs_action"
    got = attendee_map(env, "current", critique)
    if got != want:
        errors.append("Design Critique attendees are %r" % got)
    else:
        successes.append("[C] Lena and Sam invited to Design Critique")
    added, removed, modified = table_diff(env, "attendees")
    if removed or modified or any(a["event_id"] != critique for a in added):
        errors.append("invitations of other events changed")
    errors.extend(unexpected_changes(env, allowed=("attendees",)))
    return report_single(successes, errors)
""")

_REMOVE_KWAME = _calendar_verifier(r"""
def verify(env, final_answer=None):
    successes, errors = [], []
    prep = env.db("seed").query("SELECT id FROM events WHERE title = 'Vendor Offsite Prep'", []).rows[0][0]
    want = dict(attendee_map(env, "seed", prep))
    want.pop("kwame.mensah@northwind.example", None)
    got = attendee_map(env, "current", prep)
    if got != want:
        errors.append("Vendor Offsite Prep attendees are %r" % got)
    else:
        successes.append("[C] Kwame removed from Vendor Offsite Prep")
    added, removed, modified = table_diff(env, "attendees")
    if added or modified or any(a["event_id"] != prep for a in removed):
        errors.append("invitations of other events changed")
    errors.extend(unexpected_changes(env, allowed=("attendees",)))
    return report_single(successes, errors)
""")

_COUNT_TUESDAY = _calendar_verifier(r'''
def verify(env, final_answer=None):
    expected = meetings_on(env, "maya.chen@northwind.example", "2026-11-03")
    numbers = answer_numbers(final_answer)
    if unexpected_changes(env):
        print("the database changed: %s" % unexpected_changes(env))
        return TASK_FAILED_SCORE
    if not numbers or numbers[0] != expected:
        print("expected %d meetings, answer was %r" % (expected, final_answer))
        return TASK_FAILED_SCORE
    return TASK_SUCCESSFUL_SCORE


def meetings_on(env, email, day):
    """Confirmed events on ``day`` the person is invited to and has not declined (seed database)."""
    result = env.db("seed").query(
        "SELECT COUNT(*) FROM events e JOIN attendees a ON a.event_id = e.id "
        "JOIN users u ON u.id = a.user_id "
        "WHERE u.email = ? AND e.status = 'confirmed' AND a.response != 'declined' AND e.start_at LIKE ?",
        [email, day + "%"],
    )
    return result.rows[0][0]
''')

_LARGEST_FREE_ROOM = _calendar_verifier(r'''
def verify(env, final_answer=None):
    rooms = free_video_rooms(env, "2026-11-05 13:00", "2026-11-05 14:00")
    all_rooms = [row[0] for row in env.db("seed").query("SELECT name FROM rooms", []).rows]
    best = rooms[0][1]
    named = [name for name in all_rooms if normalized_contains(name, answer_text(final_answer))]
    if unexpected_changes(env):
        print("the database changed")
        return TASK_FAILED_SCORE
    if named != [best]:
        print("expected %s, the answer names %s" % (best, named))
        return TASK_FAILED_SCORE
    return TASK_SUCCESSFUL_SCORE


def free_video_rooms(env, start_at, end_at):
    """(capacity, name) of video rooms free in the window, largest first (seed database)."""
    result = env.db("seed").query(
        "SELECT capacity, name FROM rooms r WHERE has_video = 1 AND NOT EXISTS ("
        "SELECT 1 FROM events e WHERE e.room_id = r.id AND e.status = 'confirmed' "
        "AND e.start_at < ? AND ? < e.end_at) ORDER BY capacity DESC",
        [end_at, start_at],
    )
    return [(row[0], row[1]) for row in result.rows]
''')

_ALL_HANDS = _calendar_verifier(r"""
def verify(env, final_answer=None):
    row = env.db("seed").query(
        "SELECT u.name, (SELECT COUNT(*) FROM attendees a WHERE a.event_id = e.id) FROM events e "
        "JOIN calendars c ON c.id = e.calendar_id JOIN users u ON u.id = c.owner_id "
        "WHERE e.title = 'All Hands'",
        [],
    ).rows[0]
    organizer, invited = row[0], row[1]
    answer = answer_text(final_answer)
    problems = []
    if not normalized_contains(organizer, answer):
        problems.append("answer does not name the organizer %s" % organizer)
    if float(invited) not in answer_numbers(final_answer):
        problems.append("answer does not give the %d invitees" % invited)
    problems.extend(unexpected_changes(env))
    if problems:
        print(problems)
        return TASK_FAILED_SCORE
    return TASK_SUCCESSFUL_SCORE
""")

_ONBOARD_NEW_HIRE = _calendar_verifier(r"""
def verify(env, final_answer=None):
    results = []
    before = table_rows(env, "seed", "events")
    after = table_rows(env, "current", "events")
    placeholder = [eid for eid, row in before.items() if row["title"] == "Onboarding Placeholder"][0]
    claire_calendar = env.db("seed").query(
        "SELECT c.id FROM calendars c JOIN users u ON u.id = c.owner_id "
        "WHERE u.name = 'Claire Dubois' AND c.is_primary = 1",
        [],
    ).rows[0][0]
    cascade = env.db("seed").query("SELECT id FROM rooms WHERE name = 'Cascade'", []).rows[0][0]
    new_events = [row for eid, row in after.items() if eid not in before]

    # events: the placeholder is cancelled and the onboarding session is booked in Cascade
    successes, errors = [], []
    if (after.get(placeholder) or {}).get("status") != "cancelled":
        errors.append("Onboarding Placeholder is not cancelled")
    else:
        successes.append("[C] placeholder cancelled")
    onboarding = [e for e in new_events if normalized_contains("Onboarding: Lena Vogel", e["title"])]
    if len(new_events) != 1 or len(onboarding) != 1:
        titles = [e["title"] for e in new_events]
        errors.append("expected one new event 'Onboarding: Lena Vogel', found %r" % titles)
        event = None
    else:
        event = onboarding[0]
        if event["calendar_id"] != claire_calendar:
            errors.append("onboarding is on calendar %s, not Claire's primary one" % event["calendar_id"])
        if (event["start_at"], event["end_at"]) != ("2026-11-09 09:00", "2026-11-09 10:30"):
            errors.append("onboarding runs %s - %s" % (event["start_at"], event["end_at"]))
        if event["room_id"] != cascade:
            errors.append("onboarding is in room %s, not Cascade" % event["room_id"])
        if event["status"] != "confirmed" or room_clashes(env, event):
            errors.append("onboarding is not a clash-free confirmed booking")
        if not errors:
            successes.append("[C] onboarding booked in Cascade")
    for eid, row in before.items():
        if eid != placeholder and after.get(eid) != row:
            errors.append("event %s (%s) changed" % (eid, row["title"]))
    results.append(report_app("events", successes, errors))

    # attendees: Claire organizes, Lena and Omar are invited, nothing else changed
    successes, errors = [], []
    added, removed, modified = table_diff(env, "attendees")
    if removed or modified:
        errors.append("existing invitations changed")
    if event is None:
        errors.append("no onboarding event to check")
    else:
        people = attendee_map(env, "current", event["id"])
        want = {
            "claire.dubois@northwind.example",
            "lena.vogel@northwind.example",
            "omar.farouk@northwind.example",
        }
        if set(people) != want:
            errors.append("onboarding attendees are %s" % sorted(people))
        else:
            successes.append("[C] Lena and Omar invited")
        if any(a["event_id"] != event["id"] for a in added):
            errors.append("people were invited to other events")
    errors.extend(unexpected_changes(env, allowed=("events", "attendees")))
    results.append(report_app("attendees", successes, errors))

    return report_combined(results)
""")

_OFFSITE_DAY = _calendar_verifier(r'''
def verify(env, final_answer=None):
    results = []
    to_cancel = maya_friday_events(env)
    before = table_rows(env, "seed", "events")
    after = table_rows(env, "current", "events")
    team_calendar = env.db("seed").query(
        "SELECT id FROM calendars WHERE name = 'Product Team'", []
    ).rows[0][0]
    all_hands = [eid for eid, row in before.items() if row["title"] == "All Hands"][0]
    new_events = [row for eid, row in after.items() if eid not in before]

    # events: Friday's meetings on Maya's calendar cancelled, the offsite created
    successes, errors = [], []
    for eid, row in before.items():
        want = dict(row, status="cancelled") if eid in to_cancel else row
        if after.get(eid) != want:
            errors.append("event %s (%s) is %r" % (eid, row["title"], (after.get(eid) or {}).get("status")))
        elif eid in to_cancel:
            successes.append("[C] %s cancelled" % row["title"])
    offsite = None
    if len(new_events) != 1:
        errors.append("expected one new event, found %d" % len(new_events))
    else:
        offsite = new_events[0]
        if not normalized_contains("Product Offsite", offsite["title"]):
            errors.append("new event is titled %r" % offsite["title"])
        if offsite["calendar_id"] != team_calendar:
            errors.append("offsite is not on the Product Team calendar")
        if (offsite["start_at"], offsite["end_at"]) != ("2026-11-06 09:00", "2026-11-06 17:00"):
            errors.append("offsite runs %s - %s" % (offsite["start_at"], offsite["end_at"]))
        if offsite["room_id"] is not None:
            errors.append("offsite books a room")
        if not errors:
            successes.append("[C] Product Offsite created")
    results.append(report_app("events", successes, errors))

    # rsvp: Maya declined the All Hands; Rachel and Jordan invited to the offsite
    successes, errors = [], []
    maya = "maya.chen@northwind.example"
    want = dict(attendee_map(env, "seed", all_hands), **{maya: "declined"})
    if attendee_map(env, "current", all_hands) != want:
        errors.append("All Hands responses are not just Maya declining")
    else:
        successes.append("[C] All Hands declined")
    if offsite is not None:
        people = set(attendee_map(env, "current", offsite["id"]))
        if people != {maya, "rachel.stein@northwind.example", "jordan.reyes@northwind.example"}:
            errors.append("offsite attendees are %s" % sorted(people))
        else:
            successes.append("[C] Rachel and Jordan invited")
    else:
        errors.append("no offsite event to check")
    added, removed, modified = table_diff(env, "attendees")
    for b, a in modified:
        if b["event_id"] != all_hands:
            errors.append("response of user %s to event %s changed" % (b["user_id"], b["event_id"]))
    if removed or any(offsite is None or a["event_id"] != offsite["id"] for a in added):
        errors.append("invitations of other events were added or removed")
    errors.extend(unexpected_changes(env, allowed=("events", "attendees")))
    results.append(report_app("rsvp", successes, errors))

    return report_combined(results)


def maya_friday_events(env):
    """Confirmed events of Maya's primary calendar on 2026-11-06 (seed database)."""
    result = env.db("seed").query(
        "SELECT e.id FROM events e JOIN calendars c ON c.id = e.calendar_id "
        "JOIN users u ON u.id = c.owner_id "
        "WHERE u.email = 'maya.chen@northwind.example' AND c.is_primary = 1 AND e.status = 'confirmed' "
        "AND e.start_at LIKE '2026-11-06%'",
        [],
    )
    return [row[0] for row in result.rows]
''')

_RENAME_KICKOFF = _calendar_verifier(r"""
def verify(env, final_answer=None):
    successes, errors = [], []
    before = table_rows(env, "seed", "events")
    after = table_rows(env, "current", "events")
    kickoff = [eid for eid, row in before.items() if row["title"] == "Campaign Kickoff"][0]
    got = after.get(kickoff) or {}
    if got.get("title") != "Holiday Campaign Kickoff":
        errors.append("title is %r" % got.get("title"))
    if not normalized_contains("Bring Q4 campaign drafts", got.get("description") or ""):
        errors.append("description is %r" % got.get("description"))
    original = before[kickoff]
    if dict(got, title=original["title"], description=original["description"]) != original:
        errors.append("time, room or status of the kickoff changed")
    if not errors:
        successes.append("[C] kickoff renamed and described")
    only_event_changed(env, kickoff, errors)
    errors.extend(unexpected_changes(env, allowed=("events",)))
    return report_single(successes, errors)
""")


TASKS: list[TaskDefinition] = [
    _task(
        "book-planning-sync",
        "Schedule 'Q4 Planning Sync' on my primary calendar for Wednesday 2026-11-04 from 10:00 to 11:00 "
        "with Omar Farouk, Rachel Stein and Jordan Reyes. Book a room with video conferencing that seats "
        "all four of us and is free at that time.",
        _BOOK_PLANNING_SYNC,
        [
            _step("list_calendars", owner_email=MAYA),
            _step(
                "find_free_rooms",
                start_at="2026-11-04 10:00",
                end_at="2026-11-04 11:00",
                min_capacity=4,
                has_video=True,
            ),
            _step(
                "create_event",
                calendar_id=1,
                title="Q4 Planning Sync",
                start_at="2026-11-04 10:00",
                end_at="2026-11-04 11:00",
                room_id=4,
                attendee_emails=[OMAR, RACHEL, JORDAN],
            ),
        ],
        ["events", "rooms", "write"],
    ),
    _task(
        "cancel-vendor-prep",
        "The vendor offsite was called off. Cancel the 'Vendor Offsite Prep' meeting on my calendar.",
        _CANCEL_VENDOR_PREP,
        [
            _step("list_events", calendar_id=1, date_from="2026-11-02", date_to="2026-11-06"),
            _step("cancel_event", event_id=12),
        ],
        ["events", "write"],
    ),
    _task(
        "reschedule-omar-one-on-one",
        "Move my 1:1 with Omar from Wednesday afternoon to Thursday 2026-11-05 at 11:00, keeping the same "
        "30-minute length and the same room.",
        _RESCHEDULE_ONE_ON_ONE,
        [
            _step("list_events", attendee_email=OMAR, date_from="2026-11-04", date_to="2026-11-04"),
            _step("find_free_rooms", start_at="2026-11-05 11:00", end_at="2026-11-05 11:30"),
            _step("update_event", event_id=14, start_at="2026-11-05 11:00", end_at="2026-11-05 11:30"),
        ],
        ["events", "write"],
    ),
    _task(
        "fix-room-double-booking",
        "Room Dune is double-booked on Wednesday 2026-11-04 at 13:00. Keep 'Architecture Sync' where it "
        "is and move 'Budget Review' to another room that is free then and seats all of its attendees. "
        "Don't change its time.",
        _FIX_DOUBLE_BOOKING,
        [
            _step("list_events", date_from="2026-11-04", date_to="2026-11-04"),
            _step("get_event", event_id=9),
            _step("find_free_rooms", start_at="2026-11-04 13:00", end_at="2026-11-04 14:00", min_capacity=3),
            _step("update_event", event_id=9, room_id=2),
        ],
        ["events", "rooms", "write", "reasoning"],
    ),
    _task(
        "accept-pending-invites",
        "Accept every invitation of mine that is still awaiting my response for meetings this week "
        "(Monday 2026-11-02 to Friday 2026-11-06). Leave tentative answers and later weeks alone.",
        _ACCEPT_PENDING,
        [
            _step("list_events", attendee_email=MAYA, date_from="2026-11-02", date_to="2026-11-06"),
            _step("respond_to_event", event_id=7, email=MAYA, response="accepted"),
            _step("respond_to_event", event_id=8, email=MAYA, response="accepted"),
            _step("respond_to_event", event_id=10, email=MAYA, response="accepted"),
            _step("respond_to_event", event_id=13, email=MAYA, response="accepted"),
        ],
        ["attendees", "write", "bulk"],
    ),
    _task(
        "decline-standup-clash",
        "On Thursday 2026-11-05 another meeting I'm invited to overlaps my Daily Standup. Decline that "
        "other meeting; keep the standup.",
        _DECLINE_CLASH,
        [
            _step("list_events", attendee_email=MAYA, date_from="2026-11-05", date_to="2026-11-05"),
            _step("respond_to_event", event_id=21, email=MAYA, response="declined"),
        ],
        ["attendees", "write", "reasoning"],
    ),
    _task(
        "invite-to-design-critique",
        "Add Lena Vogel and Sam Patel to Jordan's Design Critique on Tuesday.",
        _ADD_TO_CRITIQUE,
        [
            _step("list_events", date_from="2026-11-03", date_to="2026-11-03"),
            _step("add_attendees", event_id=7, emails=[LENA, SAM]),
        ],
        ["attendees", "write"],
    ),
    _task(
        "remove-kwame-from-prep",
        "Kwame Mensah no longer needs to attend 'Vendor Offsite Prep'. Remove him from the invitation "
        "without changing anything else.",
        _REMOVE_KWAME,
        [
            _step("list_events", attendee_email=KWAME, date_from="2026-11-06", date_to="2026-11-06"),
            _step("remove_attendee", event_id=12, email=KWAME),
        ],
        ["attendees", "write"],
    ),
    _task(
        "count-tuesday-meetings",
        "How many meetings do I have on Tuesday 2026-11-03? Count every confirmed (not cancelled) event "
        "I'm invited to unless I declined it. Don't change anything, then call submit_final_answer with "
        "the number.",
        _COUNT_TUESDAY,
        [
            _step("list_events", attendee_email=MAYA, date_from="2026-11-03", date_to="2026-11-03"),
            _step("submit_final_answer", answer="4"),
        ],
        ["events", "read_only", "final_answer", "reasoning"],
    ),
    _task(
        "largest-free-video-room",
        "Which room with video conferencing is free on Thursday 2026-11-05 from 13:00 to 14:00 and has "
        "the largest capacity? Call submit_final_answer with the room's name.",
        _LARGEST_FREE_ROOM,
        [
            _step("find_free_rooms", start_at="2026-11-05 13:00", end_at="2026-11-05 14:00", has_video=True),
            _step("submit_final_answer", answer="Atlas"),
        ],
        ["rooms", "read_only", "final_answer"],
    ),
    _task(
        "all-hands-organizer",
        "Who organizes Friday's All Hands, and how many people are invited to it (the organizer "
        "included)? Call submit_final_answer with the organizer's name and the number.",
        _ALL_HANDS,
        [
            _step("list_events", date_from="2026-11-06", date_to="2026-11-06"),
            _step("get_event", event_id=13),
            _step("submit_final_answer", answer="Claire Dubois organizes it; 12 people are invited."),
        ],
        ["events", "read_only", "final_answer"],
    ),
    _task(
        "onboard-new-hire",
        "Lena Vogel's onboarding is confirmed for Monday 2026-11-09. On Claire Dubois's behalf, replace "
        "Claire's 'Onboarding Placeholder': cancel the placeholder, then create 'Onboarding: Lena Vogel' "
        "on Claire's primary calendar from 09:00 to 10:30 that day in room Cascade, inviting Lena Vogel "
        "and Omar Farouk.",
        _ONBOARD_NEW_HIRE,
        [
            _step("list_calendars", owner_email="claire.dubois@northwind.example"),
            _step("list_events", calendar_id=10),
            _step("cancel_event", event_id=18),
            _step(
                "create_event",
                calendar_id=10,
                title="Onboarding: Lena Vogel",
                start_at="2026-11-09 09:00",
                end_at="2026-11-09 10:30",
                room_id=3,
                attendee_emails=[LENA, OMAR],
            ),
        ],
        ["events", "attendees", "write", "multi_app"],
    ),
    _task(
        "product-offsite-day",
        "Friday 2026-11-06 is the product team offsite. Cancel every meeting on my primary calendar "
        "that day, decline the All Hands invitation, and create 'Product Offsite' on the 'Product Team' "
        "calendar from 09:00 to 17:00 that day, with no room, inviting Rachel Stein and Jordan Reyes.",
        _OFFSITE_DAY,
        [
            _step("list_calendars", owner_email=MAYA),
            _step("list_events", calendar_id=1, date_from="2026-11-06", date_to="2026-11-06"),
            _step("cancel_event", event_id=5),
            _step("cancel_event", event_id=12),
            _step("respond_to_event", event_id=13, email=MAYA, response="declined"),
            _step(
                "create_event",
                calendar_id=13,
                title="Product Offsite",
                start_at="2026-11-06 09:00",
                end_at="2026-11-06 17:00",
                attendee_emails=[RACHEL, JORDAN],
            ),
        ],
        ["events", "attendees", "write", "multi_app"],
    ),
    _task(
        "rename-campaign-kickoff",
        "Rename Thursday's 'Campaign Kickoff' to 'Holiday Campaign Kickoff' and set its description to "
        "'Bring Q4 campaign drafts.' Keep its time and room.",
        _RENAME_KICKOFF,
        [
            _step("list_events", date_from="2026-11-05", date_to="2026-11-05"),
            _step(
                "update_event",
                event_id=10,
                title="Holiday Campaign Kickoff",
                description="Bring Q4 campaign drafts.",
            ),
        ],
        ["events", "write"],
    ),
]
