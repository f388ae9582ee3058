"""Where the controls of the bundled environments' web pages sit (``fleet_local._webui_apps``).

Fixed pixel boxes in the 1280x800 page, independent of fonts: a computer-use policy clicks them by
coordinates, and the browser tasks' reference solutions (``_computer_steps``) are written with them.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LAYOUT", "Box", "row_box"]


@dataclass(frozen=True)
class Box:
    """A control's place on the page, in CSS pixels of the 1280x800 viewport."""

    left: int
    top: int
    width: int
    height: int

    @property
    def center(self) -> tuple[int, int]:
        """The pixel to click."""
        return self.left + self.width // 2, self.top + self.height // 2

    def style(self) -> str:
        """Inline CSS placing an element in this box."""
        return (
            f"position:absolute;left:{self.left}px;top:{self.top}px;"
            f"width:{self.width}px;height:{self.height}px;box-sizing:border-box;"
        )


def row_box(index: int) -> Box:
    """The ``index``-th result row of a search page (0-based)."""
    return Box(20, 150 + 44 * index, 1000, 38)


LAYOUT: dict[str, Box] = {
    "nav.home": Box(20, 12, 110, 34),
    "nav.app": Box(150, 12, 140, 34),
    "search.input": Box(20, 90, 420, 38),
    "search.button": Box(460, 90, 120, 38),
    # orderdesk: /orders/{id}
    "order.paid": Box(20, 330, 170, 38),
    "order.shipped": Box(210, 330, 170, 38),
    "order.delivered": Box(400, 330, 170, 38),
    "order.cancel_reason": Box(20, 420, 420, 38),
    "order.cancel": Box(460, 420, 170, 38),
    "order.refund_amount": Box(20, 510, 160, 38),
    "order.refund_reason": Box(200, 510, 420, 38),
    "order.refund": Box(640, 510, 170, 38),
    # calendar: /events (the create form sits right of the results)
    "events.new_title": Box(1040, 170, 220, 38),
    "events.new_start": Box(1040, 250, 220, 38),
    "events.new_end": Box(1040, 330, 220, 38),
    "events.create": Box(1040, 390, 220, 38),
    # calendar: /events/{id}
    "event.start": Box(20, 330, 260, 38),
    "event.end": Box(300, 330, 260, 38),
    "event.move": Box(580, 330, 170, 38),
    "event.title": Box(20, 420, 540, 38),
    "event.rename": Box(580, 420, 170, 38),
    "event.cancel": Box(20, 510, 200, 38),
}
"""Every fixed control, by name (``row_box`` gives the result rows)."""
