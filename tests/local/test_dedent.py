"""The manager's dedent of a verifier's source (``fleet_local/_dedent.py``) is ``textwrap.dedent``,
in linear time (how long the server keeps answering meanwhile: ``test_pickle_bombs_and_the_loop.py``)."""

from __future__ import annotations

import random
import textwrap

import pytest

from fleet_local._dedent import dedent

EDGES = [
    "",
    "\n",
    "x",
    "    def f():\n        return 1\n",
    "  a\n  b",
    "  a\n\tb",
    "\ta\n\t\tb\n",
    "  a\n   \n  b\n",
    " \n \n",
    "  a\r\n  b\r\n",
    "\t  a\n\t b",
    "  a\n\n\n  b  \n   ",
    " \t x\n \t  y",
    " " * 5000 + "x",
]


@pytest.mark.parametrize("text", EDGES)
def test_it_is_textwraps_dedent(text: str) -> None:
    assert dedent(text) == textwrap.dedent(text)


def test_it_is_textwraps_dedent_on_random_text() -> None:
    rng = random.Random(27)
    for _ in range(5000):
        text = "".join(rng.choice(" \t\n\rab") for _ in range(rng.randrange(40)))
        assert dedent(text) == textwrap.dedent(text), repr(text)
