"""The help of ``fleet-sdk eval`` and ``fleet-sdk report``: every flag says its real default.

Regression: ``eval --out-dir`` hid its ``./fleet-eval`` default, ``--env`` / ``--task-key`` did
not say that giving none runs every bundled task, ``report --format`` hid that Markdown is the
default, and ``report`` had no description. (``serve`` and ``demo``:
``tests/local/test_cli_arguments.py``.)
"""

from __future__ import annotations

import argparse

import pytest

from fleet_sdk.cli import build_parser

SWITCHES = (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._HelpAction)


def _command(name: str) -> argparse.ArgumentParser:
    parser = build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action.choices[name]
    raise AssertionError("fleet-sdk has no subcommands")


def _flag_help(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Each flag's help as printed (defaults expanded), by its first option string."""
    formatter = parser._get_formatter()
    return {
        action.option_strings[0]: " ".join(formatter._expand_help(action).split())
        for action in parser._actions
        if action.option_strings and action.help is not None
    }


@pytest.mark.parametrize("command", ["eval", "report"])
def test_every_flag_that_takes_a_value_says_its_default_once(command: str) -> None:
    parser = _command(command)
    helps = _flag_help(parser)
    switches = {a.option_strings[0] for a in parser._actions if isinstance(a, SWITCHES)}
    missing = [
        flag
        for flag, text in helps.items()
        if flag not in switches and flag != "--scenario" and "default" not in text
    ]
    assert missing == [], f"{command}: flags whose help names no default: {missing}"
    for flag, text in helps.items():
        assert "(default: None)" not in text and "(default: False)" not in text, (flag, text)
        assert text.count("default") <= 1, (flag, text)


def test_the_eval_flags_the_first_day_missed_say_their_defaults() -> None:
    helps = _flag_help(_command("eval"))
    assert "./fleet-eval" in helps["--out-dir"]
    for flag in ("--env", "--task-key"):
        assert "every task" in helps[flag], (flag, helps[flag])


def test_report_has_a_description_and_says_markdown_is_the_default_format() -> None:
    report = _command("report")
    assert report.description and "run directory" in report.description
    assert "(default: md)" in _flag_help(report)["--format"]
