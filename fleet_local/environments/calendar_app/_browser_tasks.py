"""``browser_use`` tasks of ``calendar``: solved by clicking through its web pages.

Their reference solutions are ``computer`` actions on the controls of ``_layout``.
"""

from __future__ import annotations

from .._computer_steps import click, click_row, key, replace_text, type_text
from .._definition import ReferenceStep, TaskDefinition
from ._tasks import _task


def _open_event(query: str) -> list[ReferenceStep]:
    """From any page: Events, search the title, open the first result."""
    return [click("nav.app"), click("search.input"), type_text(query), key("Enter"), click_row(0)]


_ONLY_EVENT_CHANGED = r'''
def only_event_changed(env, event_id, **changes):
    """Errors unless event ``event_id`` alone changed, exactly by ``changes``."""
    errors = []
    before = table_rows(env, "seed", "events")
    after = table_rows(env, "current", "events")
    for eid, row in before.items():
        want = dict(row, **changes) if eid == event_id else row
        if after.get(eid) != want:
            errors.append("event %s is %r, expected %r" % (eid, after.get(eid), want))
    if len(after) != len(before):
        errors.append("events were added or removed")
    errors.extend(unexpected_changes(env, allowed=("events",)))
    return errors
'''

_CREATE = r"""
def verify(env, final_answer=None):
    successes, errors = [], []
    added, removed, modified = table_diff(env, "events")
    if removed or modified:
        errors.append("existing events were changed or removed")
    if len(added) != 1:
        errors.append("expected exactly one new event, found %d" % len(added))
    else:
        event = added[0]
        got = (event["calendar_id"], event["title"], event["start_at"], event["end_at"], event["status"])
        want = (1, "Design Sync", "2026-11-10 15:00", "2026-11-10 15:30", "confirmed")
        if got != want:
            errors.append("new event is %r, expected %r" % (got, want))
        else:
            successes.append("Design Sync created on Maya's calendar")
    errors.extend(unexpected_changes(env, allowed=("events", "attendees")))
    return report_single(successes, errors)
"""

_MOVE = (
    r"""
def verify(env, final_answer=None):
    errors = only_event_changed(env, 16, start_at="2026-11-10 10:00", end_at="2026-11-10 12:00")
    return report_single([] if errors else ["Roadmap Planning moved to 2026-11-10"], errors)
"""
    + _ONLY_EVENT_CHANGED
)

_CANCEL = (
    r"""
def verify(env, final_answer=None):
    errors = only_event_changed(env, 12, status="cancelled")
    return report_single([] if errors else ["Vendor Offsite Prep cancelled"], errors)
"""
    + _ONLY_EVENT_CHANGED
)

BROWSER_TASKS: list[TaskDefinition] = [
    _task(
        "browser-create-event",
        "In the Calendar web app, create an event titled 'Design Sync' on your own calendar on "
        "2026-11-10 from 15:00 to 15:30.",
        _CREATE,
        [
            click("nav.app"),
            click("events.new_title"),
            type_text("Design Sync"),
            click("events.new_start"),
            type_text("2026-11-10 15:00"),
            click("events.new_end"),
            type_text("2026-11-10 15:30"),
            click("events.create"),
        ],
        ["events", "write", "browser"],
        modality="browser_use",
    ),
    _task(
        "browser-move-event",
        "In the Calendar web app, move 'Roadmap Planning' to 2026-11-10, keeping its time (10:00 to 12:00).",
        _MOVE,
        [
            *_open_event("Roadmap"),
            *replace_text("event.start", "2026-11-10 10:00"),
            *replace_text("event.end", "2026-11-10 12:00"),
            click("event.move"),
        ],
        ["events", "write", "browser"],
        modality="browser_use",
    ),
    _task(
        "browser-cancel-event",
        "In the Calendar web app, cancel the 'Vendor Offsite Prep' meeting.",
        _CANCEL,
        [*_open_event("Vendor Offsite"), click("event.cancel")],
        ["events", "write", "browser"],
        modality="browser_use",
    ),
]
