"""The web UI of an instance (``urls.app[0]``, i.e. ``GET /instances/{id}/``).

One plain, self-contained HTML page (inline CSS, no scripts): a top bar linking
to the environment's interactive pages (``_webui_apps``), the environment's name,
the instance's status and, for each table of the ``current`` database, its row
count and first rows. Browser-use tasks start here.
"""

from __future__ import annotations

import html
import sqlite3
from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from . import _instances
from ._errors import LocalAPIError
from ._state import LocalState
from ._webui_apps import APPS, nav_html

__all__ = ["PREVIEW_ROWS", "render_instance", "router"]

PREVIEW_ROWS = 5
_MAX_CELL = 80

_STYLE = """
:root { color-scheme: light dark; --fg: #1d1d1f; --bg: #fff; --muted: #666; --line: #ddd; --head: #f3f3f5; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #eee; --bg: #161618; --muted: #aaa; --line: #333; --head: #222226; }
}
body { font-family: system-ui, sans-serif; color: var(--fg); background: var(--bg); margin: 78px 2rem 2rem; }
.bar { position: absolute; left: 0; top: 0; width: 1280px; height: 58px; background: #23395d; }
.bar a { color: #fff; background: #34507e; text-decoration: none; display: flex; align-items: center;
  justify-content: center; border-radius: 4px; }
h1 { margin-bottom: .2rem; } .meta { color: var(--muted); margin-top: 0; }
table { border-collapse: collapse; margin: .5rem 0 1.5rem; font-size: .9rem; }
th, td { border: 1px solid var(--line); padding: .25rem .5rem; text-align: left; vertical-align: top; }
th { background: var(--head); } .count { color: var(--muted); font-weight: normal; }
"""


def _cell(value: Any) -> str:
    if value is None:
        return '<td class="count">NULL</td>'
    if isinstance(value, bytes):
        return f'<td class="count">&lt;{len(value)} bytes&gt;</td>'
    text = str(value)
    if len(text) > _MAX_CELL:
        text = text[: _MAX_CELL - 1] + "…"
    return f"<td>{html.escape(text)}</td>"


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


def render_instance(state: LocalState, instance_id: str) -> str:
    """The HTML page of a live instance.

    Raises:
        LocalAPIError: 404 ``instance_not_found``.
    """
    instance = _instances.require_live(state, instance_id).instance
    spec = state.environments.get(instance.env_key)
    title = spec.name if spec is not None else instance.env_key
    parts = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)} · {html.escape(instance_id)}</title>",
        f"<style>{_STYLE}</style></head><body>",
        nav_html(instance_id, APPS.get(instance.env_key)),
        f"<h1>{html.escape(title)}</h1>",
        f'<p class="meta">Instance <code>{html.escape(instance_id)}</code> · version '
        f"{html.escape(instance.version)} · {html.escape(instance.status)}</p>",
    ]
    if spec is not None:
        parts.append(f"<p>{html.escape(spec.description)}</p>")
    conn = _instances.open_db(state, instance_id, "current", read_only=True)
    try:
        tables = [
            str(row[0])
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
            )
        ]
        for table in tables:
            (count,) = conn.execute(f"SELECT COUNT(*) FROM {_quote(table)}").fetchone()
            cursor = conn.execute(f"SELECT * FROM {_quote(table)} LIMIT {PREVIEW_ROWS}")
            columns = [d[0] for d in cursor.description]
            rows = cursor.fetchall()
            name = html.escape(table)
            parts.append(f'<h2 id="{name}">{name} <span class="count">({count} rows)</span></h2>')
            parts.append("<table><thead><tr>")
            parts.extend(f"<th>{html.escape(c)}</th>" for c in columns)
            parts.append("</tr></thead><tbody>")
            for row in rows:
                parts.append("<tr>" + "".join(_cell(v) for v in row) + "</tr>")
            parts.append("</tbody></table>")
    finally:
        conn.close()
    parts.append("</body></html>")
    return "\n".join(parts)


def router(state: LocalState) -> APIRouter:
    """Route of the instance web UI."""
    api = APIRouter(tags=["web-ui"])

    @api.get("/instances/{instance_id}/", response_class=HTMLResponse, include_in_schema=False)
    def instance_page(instance_id: str) -> HTMLResponse:
        """The instance's page (404 HTML when it is unknown or terminated)."""
        try:
            return HTMLResponse(render_instance(state, instance_id))
        except LocalAPIError as exc:
            detail = html.escape(exc.detail)
            body = f"<!doctype html><title>Not found</title><h1>{exc.status}</h1><p>{detail}</p>"
            return HTMLResponse(body, status_code=exc.status)
        except sqlite3.Error as exc:
            body = f"<!doctype html><title>Error</title><h1>Database error</h1><p>{html.escape(str(exc))}</p>"
            return HTMLResponse(body, status_code=500)

    return api
