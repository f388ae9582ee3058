"""Interactive pages of the bundled environments, for agents that use a browser.

``orderdesk`` gets ``/instances/{id}/orders`` (search by order id or customer name) and
``/instances/{id}/orders/{order_id}`` (details; buttons to advance the status; forms to cancel and
to refund). ``calendar`` gets ``/instances/{id}/events`` (search; a form to create an event) and
``/instances/{id}/events/{event_id}`` (forms to move, rename or cancel it). Every form posts to
the page, which calls the environment's own tool through ``_mcp.execute_tool`` (the MCP path), then
redirects back with the outcome in a banner: a click in the browser changes exactly the SQLite
state a tool call would, and a verifier reads it.

Controls sit at fixed pixel boxes (``Box``), independent of fonts, so a computer-use policy can
click them by coordinates; the bundled browser tasks' reference solutions use the same boxes.
"""

from __future__ import annotations

import html
import sqlite3
from typing import Any
from urllib.parse import parse_qs, quote, urlencode

import anyio
from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from . import _instances
from ._errors import LocalAPIError
from ._mcp import InstanceUnavailableError, execute_tool
from ._state import LocalState
from .environments._layout import LAYOUT, Box, row_box

__all__ = ["LAYOUT", "Box", "nav_html", "router"]

MAX_FORM_BYTES = 16_384
MAX_ROWS = 12


_STYLE = """
body { font: 15px/1.3 sans-serif; margin: 0; color: #1d1d1f; background: #fff; }
.bar { position: absolute; left: 0; top: 0; width: 1280px; height: 58px; background: #23395d; }
.bar a { color: #fff; background: #34507e; text-decoration: none; display: flex; align-items: center;
  justify-content: center; border-radius: 4px; }
a.row { display: flex; align-items: center; padding: 0 10px; border: 1px solid #ccd; border-radius: 4px;
  color: #123; text-decoration: none; background: #f6f7fb; overflow: hidden; white-space: nowrap; }
input { font: inherit; padding: 0 8px; border: 1px solid #889; border-radius: 4px; }
button { font: inherit; border: 0; border-radius: 4px; background: #2f6fdb; color: #fff; }
button.danger { background: #c0392b; }
label { position: absolute; font-size: 13px; color: #555; }
.banner { position: absolute; left: 20px; top: 64px; width: 1000px; height: 22px; overflow: hidden; }
.ok { color: #146c2e; } .err { color: #b00020; }
.details { position: absolute; left: 20px; top: 90px; width: 1240px; height: 220px; overflow: hidden; }
.details td { padding: 2px 10px 2px 0; vertical-align: top; }
"""


def _page(
    title: str, instance_id: str, app: tuple[str, str] | None, body: list[str], request: Request
) -> str:
    msg, err = request.query_params.get("msg"), request.query_params.get("err")
    banner = ""
    if msg:
        banner = f'<div class="banner ok" id="banner">{html.escape(msg)}</div>'
    elif err:
        banner = f'<div class="banner err" id="banner">{html.escape(err)}</div>'
    return "\n".join(
        [
            '<!doctype html><html lang="en"><head><meta charset="utf-8">',
            f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>",
            nav_html(instance_id, app),
            banner,
            *body,
            "</body></html>",
        ]
    )


def nav_html(instance_id: str, app: tuple[str, str] | None) -> str:
    """The top bar: Home, and the environment's app page when it has one (``(path, label)``)."""
    base = f"/instances/{quote(instance_id)}/"
    links = [f'<a id="nav-home" href="{base}" style="{LAYOUT["nav.home"].style()}">Home</a>']
    if app is not None:
        path, label = app
        links.append(
            f'<a id="nav-app" href="{base}{path}" style="{LAYOUT["nav.app"].style()}">'
            f"{html.escape(label)}</a>"
        )
    return f'<div class="bar">{"".join(links)}</div>'


APPS: dict[str, tuple[str, str]] = {"orderdesk": ("orders", "Orders"), "calendar": ("events", "Events")}
"""The app page of each environment with one: ``env_key -> (path, nav label)``."""


def _input(name: str, box: Box, value: str = "", label: str | None = None, autofocus: bool = False) -> str:
    parts = []
    if label:
        parts.append(f'<label style="left:{box.left}px;top:{box.top - 18}px">{html.escape(label)}</label>')
    focus = " autofocus" if autofocus else ""
    parts.append(
        f'<input name="{name}" id="{name}" value="{html.escape(value)}" autocomplete="off"'
        f' style="{box.style()}"{focus}>'
    )
    return "".join(parts)


def _button(text: str, box: Box, css: str = "") -> str:
    cls = f' class="{css}"' if css else ""
    return f'<button type="submit"{cls} style="{box.style()}">{html.escape(text)}</button>'


def _form(action: str, *controls: str) -> str:
    return f'<form method="post" action="{action}">{"".join(controls)}</form>'


def _search_form(action: str, query: str, placeholder: str) -> str:
    return (
        f'<form method="get" action="{action}">'
        + _input("q", LAYOUT["search.input"], query, placeholder)
        + _button("Search", LAYOUT["search.button"])
        + "</form>"
    )


def _rows(links: list[tuple[str, str]]) -> list[str]:
    if not links:
        return [f'<p style="{row_box(0).style()}">No results.</p>']
    return [
        f'<a class="row" href="{href}" style="{row_box(i).style()}">{html.escape(text)}</a>'
        for i, (href, text) in enumerate(links[:MAX_ROWS])
    ]


def _query(state: LocalState, instance_id: str, sql: str, args: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
    conn = _instances.open_db(state, instance_id, "current", read_only=True)
    try:
        conn.row_factory = sqlite3.Row
        return list(conn.execute(sql, args))
    finally:
        conn.close()


def _small_int(text: str) -> int | None:
    """``text`` as an id, if it is one: ASCII digits, at most 18 of them (``str.isdigit`` is true of
    ``"²"``, which ``int`` refuses, and ``int`` of 5,000 digits raises: each was a 500)."""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 18 else None


def _search(
    state: LocalState,
    instance_id: str,
    sql: str,
    q: str,
    *,
    columns: tuple[str, str],
    order: tuple[str, str],
) -> list[sqlite3.Row]:
    """Rows of a search page: ``q`` as a number matches the id column, else the text column
    (substring); no ``q`` lists the latest ``MAX_ROWS``. ``order`` is (matches, latest)."""
    id_column, text_column = columns
    number = _small_int(q)
    if number is not None:
        return _query(state, instance_id, f"{sql} WHERE {id_column} = ? ORDER BY {order[0]}", (number,))
    if q:
        return _query(
            state, instance_id, f"{sql} WHERE {text_column} LIKE ? ORDER BY {order[0]}", (f"%{q}%",)
        )
    return _query(state, instance_id, f"{sql} ORDER BY {order[1]} LIMIT ?", (MAX_ROWS,))


def _money(cents: int) -> str:
    return f"${cents / 100:,.2f}"


# -- orderdesk ------------------------------------------------------------------------------------


def _orders_page(state: LocalState, instance_id: str, request: Request) -> list[str]:
    q = request.query_params.get("q", "").strip()
    sql = (
        "SELECT o.id, o.status, o.total_cents, o.placed_at, c.name FROM orders o "
        "JOIN customers c ON c.id = o.customer_id"
    )
    rows = _search(state, instance_id, sql, q, columns=("o.id", "c.name"), order=("o.id", "o.id DESC"))
    links = [
        (
            f"orders/{r['id']}",
            f"Order {r['id']} · {r['name']} · {r['status']} · {_money(r['total_cents'])}"
            f" · placed {r['placed_at']}",
        )
        for r in rows
    ]
    return [_search_form("orders", q, "Order number or customer name"), *_rows(links)]


def _order_page(state: LocalState, instance_id: str, order_id: int) -> list[str] | None:
    found = _query(
        state,
        instance_id,
        "SELECT o.*, c.name AS customer FROM orders o JOIN customers c ON c.id = o.customer_id "
        "WHERE o.id = ?",
        (order_id,),
    )
    if not found:
        return None
    order = found[0]
    items = _query(
        state,
        instance_id,
        "SELECT p.name, i.quantity, i.unit_price_cents FROM order_items i "
        "JOIN products p ON p.id = i.product_id WHERE i.order_id = ?",
        (order_id,),
    )
    refunded = _query(
        state,
        instance_id,
        "SELECT COALESCE(SUM(amount_cents), 0) AS s FROM refunds WHERE order_id = ?",
        (order_id,),
    )[0]["s"]
    facts = [
        ("Order", f"{order['id']} for {order['customer']}"),
        ("Status", str(order["status"])),
        ("Placed / promised", f"{order['placed_at']} / {order['promised_by']}"),
        ("Shipped / delivered", f"{order['shipped_at'] or '-'} / {order['delivered_at'] or '-'}"),
        ("Total / refunded", f"{_money(order['total_cents'])} / {_money(refunded)}"),
        ("Items", ", ".join(f"{i['quantity']} x {i['name']}" for i in items)),
        ("Ship to", str(order["shipping_address"])),
    ]
    table = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in facts)
    here = f"{order_id}"
    return [
        f'<div class="details"><table id="order">{table}</table></div>',
        _form(
            f"{here}/status",
            '<input type="hidden" name="status" value="paid">',
            _button("Mark paid", LAYOUT["order.paid"]),
        ),
        _form(
            f"{here}/status",
            '<input type="hidden" name="status" value="shipped">',
            _button("Mark shipped", LAYOUT["order.shipped"]),
        ),
        _form(
            f"{here}/status",
            '<input type="hidden" name="status" value="delivered">',
            _button("Mark delivered", LAYOUT["order.delivered"]),
        ),
        _form(
            f"{here}/cancel",
            _input("reason", LAYOUT["order.cancel_reason"], label="Cancellation reason"),
            _button("Cancel order", LAYOUT["order.cancel"], "danger"),
        ),
        _form(
            f"{here}/refund",
            _input("amount", LAYOUT["order.refund_amount"], label="Refund amount (USD)"),
            _input("reason", LAYOUT["order.refund_reason"], label="Refund reason"),
            _button("Issue refund", LAYOUT["order.refund"]),
        ),
    ]


def _cents(text: str) -> int:
    value = text.strip().lstrip("$").replace(",", "")
    try:
        dollars, _, cents = value.partition(".")
        if not dollars.isdigit() or (cents and (not cents.isdigit() or len(cents) > 2)):
            raise ValueError
        return int(dollars) * 100 + int(cents.ljust(2, "0") or 0)
    except ValueError:
        raise LocalAPIError(
            422, f"amount {text!r} is not a dollar amount like 39.99", code="invalid_request"
        ) from None


def _order_action(action: str, order_id: int, form: dict[str, str]) -> tuple[str, dict[str, Any]]:
    if action == "status":
        return "update_order_status", {"order_id": order_id, "status": form.get("status", "")}
    if action == "cancel":
        return "cancel_order", {"order_id": order_id, "reason": form.get("reason", "")}
    return "issue_refund", {
        "order_id": order_id,
        "amount_cents": _cents(form.get("amount", "")),
        "reason": form.get("reason", ""),
    }


# -- calendar -------------------------------------------------------------------------------------


def _events_page(state: LocalState, instance_id: str, request: Request) -> list[str]:
    q = request.query_params.get("q", "").strip()
    sql = "SELECT id, title, start_at, end_at, status FROM events"
    rows = _search(
        state, instance_id, sql, q, columns=("id", "title"), order=("start_at, id", "start_at DESC, id")
    )
    links = [
        (
            f"events/{r['id']}",
            f"{r['title']} · {r['start_at']} - {r['end_at'][-5:]} · {r['status']} · #{r['id']}",
        )
        for r in rows
    ]
    create = _form(
        "events/new",
        '<div style="position:absolute;left:1040px;top:100px;font-weight:bold">'
        "New event on my calendar</div>",
        _input("title", LAYOUT["events.new_title"], label="Title"),
        _input("start_at", LAYOUT["events.new_start"], label="Start (YYYY-MM-DD HH:MM)"),
        _input("end_at", LAYOUT["events.new_end"], label="End (YYYY-MM-DD HH:MM)"),
        _button("Create event", LAYOUT["events.create"]),
    )
    return [_search_form("events", q, "Event title or number"), *_rows(links), create]


def _event_page(state: LocalState, instance_id: str, event_id: int) -> list[str] | None:
    found = _query(
        state,
        instance_id,
        "SELECT e.*, c.name AS calendar, r.name AS room FROM events e "
        "JOIN calendars c ON c.id = e.calendar_id "
        "LEFT JOIN rooms r ON r.id = e.room_id WHERE e.id = ?",
        (event_id,),
    )
    if not found:
        return None
    event = found[0]
    facts = [
        ("Event", f"#{event['id']} {event['title']}"),
        ("When", f"{event['start_at']} - {event['end_at']}"),
        ("Calendar", str(event["calendar"])),
        ("Room", str(event["room"] or "-")),
        ("Status", str(event["status"])),
        ("Description", str(event["description"] or "")),
    ]
    table = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(v)}</td></tr>" for k, v in facts)
    here = f"{event_id}"
    return [
        f'<div class="details"><table id="event">{table}</table></div>',
        _form(
            f"{here}/move",
            _input("start_at", LAYOUT["event.start"], str(event["start_at"]), "New start"),
            _input("end_at", LAYOUT["event.end"], str(event["end_at"]), "New end"),
            _button("Move event", LAYOUT["event.move"]),
        ),
        _form(
            f"{here}/rename",
            _input("title", LAYOUT["event.title"], str(event["title"]), "Title"),
            _button("Rename", LAYOUT["event.rename"]),
        ),
        _form(f"{here}/cancel", _button("Cancel event", LAYOUT["event.cancel"], "danger")),
    ]


def _primary_calendar(state: LocalState, instance_id: str) -> int:
    rows = _query(
        state,
        instance_id,
        "SELECT c.id FROM calendars c JOIN users u ON u.id = c.owner_id "
        "JOIN app_settings s ON s.key = 'logged_in_user' AND s.value = u.email WHERE c.is_primary = 1",
    )
    return int(rows[0]["id"]) if rows else 1


def _event_action(action: str, event_id: int, form: dict[str, str]) -> tuple[str, dict[str, Any]]:
    if action == "move":
        return "update_event", {
            "event_id": event_id,
            "start_at": form.get("start_at", ""),
            "end_at": form.get("end_at", ""),
        }
    if action == "rename":
        return "update_event", {"event_id": event_id, "title": form.get("title", "")}
    return "cancel_event", {"event_id": event_id}


# -- routes ---------------------------------------------------------------------------------------


async def _form_fields(request: Request) -> dict[str, str]:
    body = await request.body()
    if len(body) > MAX_FORM_BYTES:
        raise LocalAPIError(413, f"form body is larger than {MAX_FORM_BYTES} bytes", code="invalid_request")
    fields = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {k: v[-1].strip() for k, v in fields.items()}


def _html_error(status: int, detail: str) -> HTMLResponse:
    body = f"<!doctype html><title>Error</title><h1>{status}</h1><p>{html.escape(detail)}</p>"
    return HTMLResponse(body, status_code=status)


def _env_key(state: LocalState, instance_id: str) -> str:
    return _instances.require_live(state, instance_id).instance.env_key


def router(state: LocalState) -> APIRouter:
    """Routes of the interactive pages (no bearer key: a browser opens them as they are)."""
    api = APIRouter(tags=["web-ui"])

    def render(
        instance_id: str, env_key: str, title: str, body: list[str] | None, request: Request
    ) -> Response:
        if body is None:
            return _html_error(404, f"{title} not found")
        return HTMLResponse(_page(title, instance_id, APPS.get(env_key), body, request))

    @api.get("/instances/{instance_id}/{app}", response_class=HTMLResponse, include_in_schema=False)
    async def app_page(instance_id: str, app: str, request: Request) -> Response:
        """The search page of an environment's app (``orders``, ``events``)."""
        try:
            env_key = await anyio.to_thread.run_sync(_env_key, state, instance_id)
            if APPS.get(env_key, ("",))[0] != app:
                return _html_error(404, f"{env_key} has no page {app!r}")
            build = _orders_page if app == "orders" else _events_page
            body = await anyio.to_thread.run_sync(build, state, instance_id, request)
            return render(instance_id, env_key, APPS[env_key][1], body, request)
        except LocalAPIError as exc:
            return _html_error(exc.status, exc.detail)

    @api.get("/instances/{instance_id}/{app}/{item_id}", response_class=HTMLResponse, include_in_schema=False)
    async def item_page(instance_id: str, app: str, item_id: int, request: Request) -> Response:
        """One order or event, with its forms."""
        try:
            env_key = await anyio.to_thread.run_sync(_env_key, state, instance_id)
            if APPS.get(env_key, ("",))[0] != app:
                return _html_error(404, f"{env_key} has no page {app!r}")
            build = _order_page if app == "orders" else _event_page
            body = await anyio.to_thread.run_sync(build, state, instance_id, item_id)
            return render(instance_id, env_key, f"{app[:-1].title()} {item_id}", body, request)
        except LocalAPIError as exc:
            return _html_error(exc.status, exc.detail)

    @api.post("/instances/{instance_id}/{app}/{item}/{action}", include_in_schema=False)
    async def submit(instance_id: str, app: str, item: str, action: str, request: Request) -> Response:
        """A form: runs the environment's tool, then redirects to the page with the outcome."""
        try:
            env_key = await anyio.to_thread.run_sync(_env_key, state, instance_id)
            form = await _form_fields(request)
            target = f"/instances/{quote(instance_id)}/{app}/{item}"
            item_id = _small_int(item)
            if (
                env_key == "orderdesk"
                and app == "orders"
                and item_id is not None
                and action in ("status", "cancel", "refund")
            ):
                tool, arguments = _order_action(action, item_id, form)
            elif (
                env_key == "calendar"
                and app == "events"
                and item_id is not None
                and action in ("move", "rename", "cancel")
            ):
                tool, arguments = _event_action(action, item_id, form)
            else:
                return _html_error(404, f"no form {app}/{item}/{action} in {env_key}")
            outcome = await execute_tool(state, instance_id, tool, arguments)
        except LocalAPIError as exc:
            return _html_error(exc.status, exc.detail)
        except InstanceUnavailableError as exc:
            return _html_error(404, str(exc))
        flash = {"err": outcome.error} if outcome.is_error else {"msg": f"Done: {tool.replace('_', ' ')}."}
        return RedirectResponse(f"{target}?{urlencode(flash)}", status_code=303)

    @api.post("/instances/{instance_id}/events/new", include_in_schema=False)
    async def create_event(instance_id: str, request: Request) -> Response:
        """The calendar's new-event form: an event on the logged-in user's primary calendar."""
        try:
            env_key = await anyio.to_thread.run_sync(_env_key, state, instance_id)
            if env_key != "calendar":
                return _html_error(404, f"{env_key} has no events")
            form = await _form_fields(request)
            calendar_id = await anyio.to_thread.run_sync(_primary_calendar, state, instance_id)
            arguments = {
                "calendar_id": calendar_id,
                "title": form.get("title", ""),
                "start_at": form.get("start_at", ""),
                "end_at": form.get("end_at", ""),
            }
            outcome = await execute_tool(state, instance_id, "create_event", arguments)
        except LocalAPIError as exc:
            return _html_error(exc.status, exc.detail)
        except InstanceUnavailableError as exc:
            return _html_error(404, str(exc))
        base = f"/instances/{quote(instance_id)}/events"
        if outcome.is_error:
            return RedirectResponse(f"{base}?{urlencode({'err': outcome.error})}", status_code=303)
        event_id = outcome.value.get("id") if isinstance(outcome.value, dict) else None
        target = f"{base}/{event_id}" if isinstance(event_id, int) else base
        return RedirectResponse(f"{target}?{urlencode({'msg': 'Event created.'})}", status_code=303)

    return api
