"""Warnings of a running command on lines of their own, never glued onto its progress line.

Without a handler, Python writes a warning (a model request being retried, a transcript not
saved) to stderr where the cursor is: on a terminal, after the progress bar's text. The handler
here ends the bar's line first and prefixes the command's name, as its other messages are.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from typing import Protocol, TextIO

__all__ = ["warnings_beside"]


class _Line(Protocol):
    def break_line(self) -> None: ...


class _Handler(logging.Handler):
    def __init__(self, bar: _Line, err: TextIO, prefix: str) -> None:
        super().__init__(logging.WARNING)
        self._bar = bar
        self._err = err
        self._prefix = prefix

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self._bar.break_line()
            level = "error" if record.levelno >= logging.ERROR else "warning"
            self._err.write(f"{self._prefix}: {level}: {record.getMessage()}\n")
            self._err.flush()
        except Exception:
            self.handleError(record)


@contextlib.contextmanager
def warnings_beside(bar: _Line, *, prefix: str, err: TextIO | None = None) -> Iterator[None]:
    """While the block runs, warnings and errors logged in this process go to ``err`` on lines of
    their own (``bar.break_line()`` first), one line each, prefixed ``<prefix>: warning:``.

    Args:
        bar: The progress line (``ProgressBar``).
        prefix: The command, e.g. ``fleet-sdk eval``.
        err: Where they go (default: stderr).
    """
    handler = _Handler(bar, err or sys.stderr, prefix)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
