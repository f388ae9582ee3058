"""Argument errors of ``eval`` and ``report`` in one line, with a did-you-mean for a misspelt choice
or flag.

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

    parse_known_args = parser.parse_known_args

    def known_only(
        args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        # A subcommand's leftovers would reach the main parser, which prints its own usage and
        # cannot tell which flag was meant: refuse them here, naming the closest flag.
        parsed, extras = parse_known_args(args, namespace)
        if extras:
            word = extras[0]
            flags = [flag for flag in parser._option_string_actions if flag.startswith("--")]
            found = difflib.get_close_matches(word.split("=", 1)[0], flags, n=1)
            hint = f"; did you mean {found[0]}?" if found and word.startswith("-") else ""
            error(f"unrecognized argument {word!r}{hint}")
        return parsed, extras

    parser.error = error  # type: ignore[method-assign]
    parser.parse_known_args = known_only  # type: ignore[method-assign,assignment]
    return parser
