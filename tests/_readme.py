"""The README's Python examples, as the example test runs them and the type check reads them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["README", "Example", "python_examples"]

README = Path(__file__).resolve().parents[1] / "README.md"

_BLOCK = re.compile(r"```python\n(.*?)```", flags=re.S)


@dataclass(frozen=True)
class Example:
    """One fenced ``python`` block of the README.

    Attributes:
        code: Its source.
        line: The README line its code starts on (1-based).
    """

    code: str
    line: int


def python_examples() -> list[Example]:
    """Every ``python`` block of the README, in order."""
    text = README.read_text(encoding="utf-8")
    return [Example(m.group(1), text.count("\n", 0, m.start(1)) + 1) for m in _BLOCK.finditer(text)]
