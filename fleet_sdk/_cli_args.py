"""Argument errors of ``eval`` and ``report`` in one line, with a did-you-mean for a misspelt choice.

argparse answers a bad value with the whole usage and then the error; a command meant for
scripts and sweeps says what is wrong in one line (``fleet-sdk report: error: ...``), exit 2.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Callable, Sequence
from typing import NoReturn

__all__ = ["choice", "one_line_errors"]


def choice(values: Sequence[str]) -> Callable[[str], str]:
    """An argparse ``type`` taking one of ``values``; anything else names the closest one.

    Args:
        values: The accepted values (give them as ``metavar`` too, for the usage line).
    """

    def pick(text: str) -> str:
        if text in values:
            return text
        found = difflib.get_close_matches(text, list(values), n=1)
        hint = f"; did you mean {found[0]!r}?" if found else ""
        raise argparse.ArgumentTypeError(f"{text!r} is not one of {', '.join(values)}{hint}")

    return pick


def one_line_errors(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Make ``parser`` report a bad argument in one line, exit 2 (instead of usage, then the error).

    Args:
        parser: A subcommand's parser.
    """

    def error(message: str) -> NoReturn:
        parser.exit(2, f"{parser.prog}: error: {message}\n")

    parser.error = error  # type: ignore[method-assign]
    return parser
