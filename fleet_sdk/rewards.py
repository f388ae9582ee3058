"""From a verifier's outcome to a training reward, including the opt-in partial reward.

Rewards are ``float | None``. ``None`` means *unknown, leave this rollout out*: the verifier
could not run, raised, timed out, or its LLM judge failed. ``0.0`` means *graded and failed*.
The two must never be confused: treating failures as 0 once poisoned 42% of training groups.

Partial reward (opt-in) gives credit for part of a multi-app task when the binary score is 0:

- **per-app**: the verifier prints one block per app, ``<<< VERIFY_<app> <<<`` ...
  ``>>> VERIFY_<app> >>>``, lines ``App <app>: <0|1>`` and ``Combined result: k/n apps
  passed``. The reward is passing apps / apps, leaving out *trivial* apps: apps that passed
  and whose only successes are "no unexpected changes", "No filesystem changes" or
  "No-unexpected-envelopes" (guard checks, not solved work). ``None`` when every app is trivial.
- **legacy**: otherwise, the ``>>> ERROR_ACCUMULATOR >>>`` / ``<<< ERROR_ACCUMULATOR <<<`` and
  ``SUCCESS_ACCUMULATOR`` blocks (Python list literals, read with ``ast.literal_eval``, never
  ``eval``) give successes / (successes + errors).
- anything else (empty or unrelated text) gives no partial reward (``None``).

``verifier_feedback`` reads the same output for a person: what the verifier said was wrong.
"""

from __future__ import annotations

import ast
import re
from typing import Any, Protocol

__all__ = [
    "JUDGE_ERROR_PREFIX",
    "TRIVIAL_SUCCESS_MARKERS",
    "OutcomeLike",
    "is_judge_error",
    "partial_reward",
    "reward_from_outcome",
    "verifier_feedback",
]

JUDGE_ERROR_PREFIX = "JUDGE ERROR:"
"""A stdout line starting with this (after indentation) means the LLM judge itself failed."""

TRIVIAL_SUCCESS_MARKERS = ("no unexpected changes", "no filesystem changes", "no unexpected envelopes")
"""Successes that only say nothing went wrong (compared lowercased, ``-``/``_`` as spaces)."""

_APP_BLOCK = re.compile(
    r"<<<\s*VERIFY_(?P<app>[\w.-]+)\s*<<<(?P<body>.*?)>>>\s*VERIFY_(?P=app)\s*>>>", re.DOTALL
)
_APP_LINE = re.compile(r"^[ \t]*App[ \t]+(?P<app>[\w.-]+)[ \t]*:[ \t]*(?P<passed>[01])[ \t]*$", re.MULTILINE)
_COMBINED = re.compile(r"Combined result:\s*(?P<k>\d+)\s*/\s*(?P<n>\d+)\s*apps? passed")


class OutcomeLike(Protocol):
    """What :func:`reward_from_outcome` reads: a ``VerifierOutcome`` or anything shaped like it."""

    @property
    def success(self) -> bool: ...

    @property
    def score(self) -> float | None: ...

    @property
    def stdout(self) -> str | None: ...

    @property
    def error(self) -> Any: ...


def is_judge_error(stdout: str | None) -> bool:
    """Whether stdout has a line starting ``JUDGE ERROR:`` (the judge failed: reward unknown).

    Args:
        stdout: The verifier's captured output.
    """
    return any(line.lstrip().startswith(JUDGE_ERROR_PREFIX) for line in (stdout or "").splitlines())


def reward_from_outcome(outcome: OutcomeLike, *, partial: bool = False) -> float | None:
    """The reward of one rollout, or ``None`` when it is unknown and the rollout should be dropped.

    ``None`` for an execution failure (``success`` false, an ``error``, no score), an exception
    or a judge error; otherwise the score, where a verifier that returned ``None`` already
    scored 1.0. With ``partial=True`` a score of exactly 0.0 with stdout present is replaced by
    :func:`partial_reward` of that stdout when it finds one.

    Args:
        outcome: The verifier's outcome.
        partial: Opt in to partial credit for multi-app / accumulator verifiers.
    """
    if not outcome.success or outcome.error is not None or outcome.score is None:
        return None
    stdout = outcome.stdout or ""
    if is_judge_error(stdout):
        return None
    score = float(outcome.score)
    if partial and score == 0.0 and stdout.strip():
        fraction = partial_reward(stdout)
        if fraction is not None:
            return fraction
    return score


def partial_reward(stdout: str | None) -> float | None:
    """The fraction of the task a verifier's stdout shows as done, or ``None`` if it shows none.

    Args:
        stdout: The verifier's captured output (see the module docstring for the formats).
    """
    if not stdout or not stdout.strip():
        return None
    apps = _app_results(stdout)
    if apps:
        successes = {
            m.group("app"): _accumulator(m.group("body"), "SUCCESS") for m in _APP_BLOCK.finditer(stdout)
        }
        real = [passed for app, passed in apps.items() if not (passed and _is_trivial(successes.get(app)))]
        if not real:
            return None
        return sum(real) / len(real)
    combined = _COMBINED.search(stdout)
    if combined is not None and int(combined.group("n")) > 0:
        return min(int(combined.group("k")), int(combined.group("n"))) / int(combined.group("n"))
    errors = _accumulator(stdout, "ERROR")
    successes_list = _accumulator(stdout, "SUCCESS")
    if errors is None or successes_list is None or not (errors or successes_list):
        return None
    return len(successes_list) / (len(successes_list) + len(errors))


_MARKER_LINE = re.compile(r"^\s*(?:<<<|>>>).*(?:<<<|>>>)\s*$")
_FEEDBACK_LIMIT = 500


def verifier_feedback(stdout: str | None) -> str | None:
    """What a verifier said was wrong, as one line: its error accumulators, else what it printed.

    Every ``ERROR_ACCUMULATOR`` list (one per app block, or the last one) is joined with ``; ``;
    without one, the printed lines other than block markers and ``App <app>: <0|1>`` lines are
    joined with `` / `` (a line holding a list literal gives its items). Cut to 500 characters.

    Args:
        stdout: The verifier's captured output.
    """
    if not stdout or not stdout.strip():
        return None
    blocks = [m.group("body") for m in _APP_BLOCK.finditer(stdout)] or [stdout]
    errors = [str(item) for body in blocks for item in _accumulator(body, "ERROR") or []]
    if not errors and _accumulator(stdout, "ERROR") is None:
        for line in stdout.splitlines():
            text = line.strip()
            if not text or _MARKER_LINE.match(text) or _APP_LINE.match(line) or _COMBINED.search(text):
                continue
            listed = _literal_list(text) if text.startswith("[") else None
            errors += [str(item) for item in listed] if listed is not None else [text]
    feedback = "; ".join(" ".join(e.split()) for e in errors if e.strip())
    if len(feedback) > _FEEDBACK_LIMIT:
        feedback = feedback[: _FEEDBACK_LIMIT - 3] + "..."
    return feedback or None


def _app_results(stdout: str) -> dict[str, bool]:
    """``App <name>: <0|1>`` lines; the last line of an app wins."""
    return {m.group("app"): m.group("passed") == "1" for m in _APP_LINE.finditer(stdout)}


def _is_trivial(successes: list[Any] | None) -> bool:
    if not successes:  # no block, no accumulator, or no successes: not provably trivial
        return False
    return all(_is_marker(item) for item in successes)


def _is_marker(item: Any) -> bool:
    text = " ".join(str(item).lower().replace("-", " ").replace("_", " ").split())
    return any(marker in text for marker in TRIVIAL_SUCCESS_MARKERS)


def _accumulator(text: str, kind: str) -> list[Any] | None:
    """The last ``<kind>_ACCUMULATOR`` list in ``text``, or ``None`` if there is none.

    Reads the delimited form ``>>> X_ACCUMULATOR >>>\\n[...]\\n<<< X_ACCUMULATOR <<<`` and the
    inline form ``X_ACCUMULATOR ['...', ...]`` (strings may contain brackets: ``'[C] done'``).
    """
    name = f"{kind}_ACCUMULATOR"
    delimited = re.findall(rf">>>\s*{name}\s*>>>(.*?)<<<\s*{name}\s*<<<", text, re.DOTALL)
    if delimited:
        return _literal_list(delimited[-1].strip())
    found: list[Any] | None = None
    for match in re.finditer(rf"{name}\s*:?\s*(?=\[)", text):
        literal = _bracketed(text, match.end())
        if literal is not None:
            parsed = _literal_list(literal)
            if parsed is not None:
                found = parsed
    return found


def _literal_list(literal: str) -> list[Any] | None:
    try:
        value = ast.literal_eval(literal)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return list(value) if isinstance(value, list | tuple) else None


def _bracketed(text: str, start: int) -> str | None:
    """The ``[...]`` literal starting at ``text[start]``, skipping brackets inside strings."""
    depth = 0
    quote: str | None = None
    index = start
    while index < len(text):
        char = text[index]
        if quote is not None:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = None
        elif char in "'\"":
            quote = char
        elif char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth == 0:
                return text[start : index + 1]
        index += 1
    return None
