"""Reference-solution steps written as ``computer`` actions (browser_use tasks).

Each helper returns one ``{"tool": "computer", "params": {...}}`` step; clicks aim at the centre of
a control's box in ``_layout``.
"""

from __future__ import annotations

from ._definition import ReferenceStep
from ._layout import LAYOUT, Box, row_box

__all__ = ["click", "click_row", "key", "replace_text", "type_text"]


def _computer(**params: object) -> ReferenceStep:
    return {"tool": "computer", "params": dict(params)}


def click(control: str | Box) -> ReferenceStep:
    """Left-click the centre of a named control (``LAYOUT``) or a box."""
    box = LAYOUT[control] if isinstance(control, str) else control
    x, y = box.center
    return _computer(action="left_click", x=x, y=y)


def click_row(index: int) -> ReferenceStep:
    """Left-click the ``index``-th result row of a search page."""
    return click(row_box(index))


def type_text(text: str) -> ReferenceStep:
    """Type text into the focused element."""
    return _computer(action="type", text=text)


def key(chord: str) -> ReferenceStep:
    """Press a key or chord."""
    return _computer(action="key", key=chord)


def replace_text(control: str, text: str) -> list[ReferenceStep]:
    """Click a prefilled input, select all of it and type ``text`` over it."""
    return [click(control), key("ctrl+a"), type_text(text)]
