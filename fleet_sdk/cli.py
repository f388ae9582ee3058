"""The ``fleet-sdk`` command line: ``eval`` and ``report``, and the local server's commands.

``serve`` and ``demo`` belong to the server package, which this module never imports: they are
added by the server found through the ``fleet_sdk.server`` entry point (``_server_plugin.py``).
A wrong argument ends in one line on stderr and exit 2; a misspelt flag gets a did-you-mean.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from ._version import __version__

__all__ = ["CommandSet", "build_parser", "main"]

EXIT_USAGE = 2

CommandSet = Callable[["argparse._SubParsersAction[Any]"], None]
"""Adds commands to ``fleet-sdk`` (what a server's entry point brings: ``add_commands``)."""


class _Parser(argparse.ArgumentParser):
    """Says what is wrong in one line (and where to look), not the whole usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _did_you_mean(parser: argparse.ArgumentParser, unknown: Sequence[str]) -> str:
    """``unrecognized argument --prot (did you mean --port?)``: the first unknown flag, else all."""
    flags = [option for action in parser._actions for option in action.option_strings]
    for argument in unknown:
        flag = argument.split("=", 1)[0]
        if flag.startswith("-"):
            close = difflib.get_close_matches(flag, flags, n=1)
            return f"unrecognized argument {flag}" + (f" (did you mean {close[0]}?)" if close else "")
    return "unrecognized arguments: " + " ".join(unknown)


def _server_commands() -> list[CommandSet]:
    from ._server_plugin import server

    found = server()
    return [] if found is None else [found.add_commands]


def build_parser(command_sets: Sequence[CommandSet] | None = None) -> argparse.ArgumentParser:
    """The argument parser of ``fleet-sdk``.

    Args:
        command_sets: What adds the server's commands (default: the installed server's, found
            through the ``fleet_sdk.server`` entry point; none when no server is installed).
    """
    parser = _Parser(prog="fleet-sdk", description="Fleet SDK tools.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    for add_commands in _server_commands() if command_sets is None else command_sets:
        add_commands(commands)  # serve, demo
    from ._cli_eval import add_commands as add_eval_commands

    add_eval_commands(commands)  # eval, report
    return parser


def main(argv: Sequence[str] | None = None, *, command_sets: Sequence[CommandSet] | None = None) -> int:
    """Entry point of the ``fleet-sdk`` command.

    Args:
        argv: Arguments (default: ``sys.argv[1:]``).
        command_sets: As for :func:`build_parser`.
    """
    parser = build_parser(command_sets)
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        chosen: argparse.ArgumentParser = commands.choices.get(args.command, parser)
        chosen.error(_did_you_mean(chosen, unknown))
    code: int = args.handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
