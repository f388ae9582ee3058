"""A verifier request's arguments in the public SDK's forms: ``args`` pickled, or ``args_array``.

The public SDK sends ``args`` as base64 of a (cloud)pickle of
``{"args": (None, *positional, {"env": <instance_id>}), "kwargs": {...}}``: the leading ``None``
stands for ``env`` and the trailing ``{"env": ...}`` names the instance (``schemas/env-instance.yaml``,
``VerifiersExecuteRequest``). The server never decodes it: unpickling can cost time exponential in
a pickle's size, in C calls that hold the interpreter's lock (a 265-byte pickle once froze every
route for good). It reads the pickle's shape only (``PickledArguments.read``, a bounded walk of
its opcodes that builds and hashes nothing), which names the instance and refuses, with a 400
naming ``args``, what is not plain data or could not be honoured (so keyword arguments such as
``final_answer`` are never dropped); the verifier's sandboxed run decodes the pickle itself,
under its own CPU, memory and time limits.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

from ._errors import LocalAPIError
from .sandbox import PickledArguments, PlainDataError

__all__ = ["Invocation", "bad_arguments", "from_args_array", "from_pickled_args"]


@dataclass(frozen=True)
class Invocation:
    """How to call a verifier, read from the public SDK's arguments.

    Attributes:
        instance_id: The instance the ``{"env": ...}`` entry names, if any.
        args: Positional arguments after ``env`` (``args_array``).
        kwargs: Keyword arguments.
        pickled: The pickled ``args`` as received, read but not decoded; ``None`` when they hold
            no argument for the verifier.
    """

    instance_id: str | None
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    pickled: PickledArguments | None = None

    @property
    def arguments(self) -> tuple[list[Any], dict[str, Any]] | None:
        """``(args, kwargs)`` for the runner, or ``None`` when there are none (the verifier is then
        called as for any other request: ``verify(env)``, or ``verify(env, None)``)."""
        return (self.args, self.kwargs) if self.args or self.kwargs else None


def bad_arguments(message: str) -> LocalAPIError:
    """The 400 for ``args`` that cannot be honoured."""
    return LocalAPIError(400, f"args: {message}", code="bad_request", retryable=False)


def _split_env(values: list[Any]) -> tuple[str | None, list[Any]]:
    """The instance named by a trailing ``{"env": "<id>"}`` entry, and the values before it."""
    if (
        values
        and isinstance(values[-1], dict)
        and set(values[-1]) == {"env"}
        and isinstance(values[-1]["env"], str)
    ):
        return values[-1]["env"], values[:-1]
    return None, values


def from_args_array(values: list[Any]) -> Invocation:
    """The call ``args_array`` describes: the positional arguments, then ``{"env": <instance_id>}``.

    Args:
        values: The ``args_array`` field.
    """
    instance_id, positional = _split_env(list(values))
    return Invocation(instance_id, positional)


def from_pickled_args(text: str) -> Invocation:
    """The call a public-SDK ``args`` string describes, read without decoding the pickle.

    A bounded walk in pure Python (a few tenths of a second at most): call it off the event loop.

    Args:
        text: The ``args`` field: base64 of a plain-data pickle.

    Raises:
        LocalAPIError: 400 ``bad_request`` naming the problem: not base64, not a pickle of plain
            data (naming the refused type, e.g. ``datetime.datetime``), past a bound (size,
            opcodes, values counted each time they are reached, nesting), or not the
            ``{"args": [...], "kwargs": {...}}`` shape.
    """
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise bad_arguments("not valid base64") from None
    try:
        pickled = PickledArguments.read(raw)
    except PlainDataError as exc:
        raise bad_arguments(str(exc)) from None
    return Invocation(pickled.instance_id, pickled=None if pickled.empty else pickled)
