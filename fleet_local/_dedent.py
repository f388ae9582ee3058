"""``textwrap.dedent`` for untrusted text, in linear time.

The public SDK sends a verifier as ``inspect.getsource`` of a function, indented when the function
was defined inside another, so the manager's ``execute_verifier_function`` dedents it. The
standard library's ``dedent`` finds whitespace-only lines with a regex that backtracks over every
run of blanks: a keyless body of one line of 999,999 spaces and an ``x`` took 3 s in one C call,
holding the interpreter's lock (so a worker thread would not help).
"""

from __future__ import annotations

__all__ = ["dedent"]

_BLANKS = " \t"


def _common(one: str, other: str) -> int:
    """The length of the longest common prefix (character by character, as ``textwrap`` compares)."""
    size = 0
    for a, b in zip(one, other, strict=False):
        if a != b:
            break
        size += 1
    return size


def dedent(text: str) -> str:
    """``textwrap.dedent(text)``: the common leading spaces and tabs of the lines that hold more than
    those removed from every line, and lines of only spaces and tabs emptied.

    Args:
        text: The text, lines separated by ``"\\n"`` (as ``textwrap`` reads them).
    """
    lines = text.split("\n")
    margin: str | None = None
    for line in lines:
        body = line.lstrip(_BLANKS)
        if not body:
            continue
        indent = line[: len(line) - len(body)]
        if margin is None:
            margin = indent
        elif not indent.startswith(margin):
            margin = margin[: _common(margin, indent)]
    cut = len(margin or "")
    return "\n".join("" if not line.lstrip(_BLANKS) else line[cut:] for line in lines)
