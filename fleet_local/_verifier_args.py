"""A verifier request's arguments in the public SDK's forms: ``args`` pickled, or ``args_array``.

The public SDK sends ``args`` as base64 of a (cloud)pickle of
``{"args": (None, *positional, {"env": <instance_id>}), "kwargs": {...}}``: the leading ``None``
stands for ``env`` and the trailing ``{"env": ...}`` names the instance (``schemas/env-instance.yaml``,
``VerifiersExecuteRequest``). It is read with the SDK's plain-data unpickler, which builds builtin
containers and scalars only; anything else is a 400 naming it, and the verifier does not run, so
keyword arguments such as ``final_answer`` are never dropped.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any

from ._errors import LocalAPIError
from .sandbox import PlainDataError, load_plain

__all__ = ["Invocation", "from_args_array", "from_pickled_args"]


@dataclass(frozen=True)
class Invocation:
    """How to call a verifier, read from the public SDK's arguments.

    Attributes:
        instance_id: The instance the ``{"env": ...}`` entry names, if any.
        args: Positional arguments after ``env``.
        kwargs: Keyword arguments.
    """

    instance_id: str | None
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def arguments(self) -> tuple[list[Any], dict[str, Any]] | None:
        """``(args, kwargs)`` for the runner, or ``None`` when there are none (the verifier is then
        called as for any other request: ``verify(env)``, or ``verify(env, None)``)."""
        return (self.args, self.kwargs) if self.args or self.kwargs else None


def _bad(message: str) -> LocalAPIError:
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
    """The call a public-SDK ``args`` string describes.

    Args:
        text: The ``args`` field: base64 of a plain-data pickle.

    Raises:
        LocalAPIError: 400 ``bad_request`` naming the problem: not base64, not a pickle of plain
            data (naming the refused type, e.g. ``datetime.datetime``), or not the
            ``{"args": [...], "kwargs": {...}}`` shape.
    """
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise _bad("not valid base64") from None
    try:
        decoded = load_plain(raw)
    except PlainDataError as exc:
        raise _bad(str(exc)) from None
    if not isinstance(decoded, dict) or not set(decoded) <= {"args", "kwargs"}:
        raise _bad(f'expected a pickled {{"args": [...], "kwargs": {{...}}}}, got {type(decoded).__name__}')
    positional, kwargs = decoded.get("args", ()), decoded.get("kwargs") or {}
    if not isinstance(positional, list | tuple) or not isinstance(kwargs, dict):
        raise _bad('"args" must be a tuple or list and "kwargs" a dict')
    bad_key = next((key for key in kwargs if not isinstance(key, str)), None)
    if bad_key is not None:
        raise _bad(f"keyword argument names must be strings, not {bad_key!r}")
    values = list(positional)
    if values and values[0] is None:  # the public SDK's stand-in for env
        values = values[1:]
    instance_id, values = _split_env(values)
    return Invocation(instance_id, values, dict(kwargs))
