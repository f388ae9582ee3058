"""The public SDK's pickled verifier arguments, read where they arrive and decoded where the verifier runs.

The public SDK sends a verifier's arguments as a pickle of
``{"args": (None, *positional, {"env": <instance_id>}), "kwargs": {...}}``: the leading ``None``
stands for ``env``, the trailing entry names the instance. :meth:`PickledArguments.read` reads
only the pickle's shape (``_pickle_shape.py``): which instance it names, which positional values
the verifier gets, and whether it could be honoured at all, without building the value, so a
hostile pickle costs the process that received it a bounded walk and nothing more. The sandboxed
run decodes it (:func:`load_arguments`), under the run's CPU, memory and time limits.

Standard library only: the sandbox child loads this file without importing ``fleet_sdk``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ._pickle_shape import Shape, read_shape
from ._plain_pickle import PlainDataError, load_plain

__all__ = ["PickledArguments", "load_arguments"]

_FORM = 'expected a pickled {"args": [...], "kwargs": {...}}'
_TYPES = '"args" must be a tuple or list and "kwargs" a dict'


def _kind(value: Any) -> str:
    return value.kind if type(value) is Shape else type(value).__name__


def _pairs(shape: Shape) -> list[tuple[Any, Any]]:
    members = shape.members
    return [(members[i], members[i + 1]) for i in range(0, len(members), 2)]


def _env_entry(value: Any) -> str | None:
    """The instance id a trailing ``{"env": "<id>"}`` names, if ``value`` is one."""
    if type(value) is not Shape or value.kind != "dict" or not value.members:
        return None
    pairs = _pairs(value)
    if any(type(key) is not str or key != "env" for key, _ in pairs):
        return None
    instance_id = pairs[-1][1]  # a repeated key: the last one counts, as in the dict built
    return instance_id if type(instance_id) is str else None


class PickledArguments(NamedTuple):
    """A public-SDK ``args`` pickle, read but not decoded.

    (A named tuple, not a dataclass: the sandbox child imports this module, and ``dataclasses``
    would cost every run the import of ``inspect``.)

    Attributes:
        data: The pickle.
        start: The first of the pickled ``"args"`` the verifier gets (after the ``env`` stand-in).
        stop: One past the last it gets (before the ``{"env": ...}`` entry).
        has_kwargs: The pickled ``"kwargs"`` are not empty.
        instance_id: The instance the ``{"env": ...}`` entry names, if any.
    """

    data: bytes
    start: int
    stop: int
    has_kwargs: bool
    instance_id: str | None

    @property
    def empty(self) -> bool:
        """No positional or keyword arguments for the verifier (it is called as without any)."""
        return self.start >= self.stop and not self.has_kwargs

    @classmethod
    def read(cls, data: bytes) -> PickledArguments:
        """Read a public-SDK ``args`` pickle's shape, without decoding it.

        Args:
            data: The pickle (base64-decoded).

        Raises:
            PlainDataError: Naming the problem: the pickle exceeds a bound or holds anything but
                builtin containers and scalars (``_pickle_shape.read_shape``), is not the
                ``{"args": [...], "kwargs": {...}}`` form, or has a keyword that is not a string.
                The message names types, never the pickle's values.
        """
        root = read_shape(data)
        if type(root) is not Shape or root.kind != "dict":
            raise PlainDataError(f"{_FORM}, got {_kind(root)}")
        fields: dict[str, Any] = {}
        for key, value in _pairs(root):
            if type(key) is not str or key not in ("args", "kwargs"):
                raise PlainDataError(f"{_FORM}, got a dict with a {_kind(key)} key other than those")
            fields[key] = value
        positional = fields.get("args")
        kwargs = fields.get("kwargs")
        if positional is None:
            positional = Shape("tuple")
        if type(positional) is not Shape or positional.kind not in ("list", "tuple"):
            raise PlainDataError(_TYPES)
        if kwargs is not None and (type(kwargs) is not Shape or kwargs.kind != "dict"):
            raise PlainDataError(_TYPES)
        names = _pairs(kwargs) if kwargs is not None else []
        bad = next((key for key, _ in names if type(key) is not str), None)
        if bad is not None:
            raise PlainDataError(f"keyword argument names must be strings, not {_kind(bad)}")
        values = positional.members
        start, stop = 0, len(values)
        if stop and values[0] is None:  # the public SDK's stand-in for env
            start = 1
        instance_id = _env_entry(values[-1]) if stop > start else None
        if instance_id is not None:
            stop -= 1
        return cls(data=bytes(data), start=start, stop=stop, has_kwargs=bool(names), instance_id=instance_id)

    def payload(self) -> dict[str, Any]:
        """What the sandbox child gets (JSON): see :func:`load_arguments`."""
        return {"pickle": self.data.hex(), "start": self.start, "stop": self.stop}


def load_arguments(payload: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """Decode the arguments :meth:`PickledArguments.payload` describes: ``(args, kwargs)``.

    Meant for the sandbox child, where the run's limits bound what decoding can cost.

    Args:
        payload: ``{"pickle": <hex>, "start": int, "stop": int}``.

    Raises:
        PlainDataError: The pickle is not plain data or not the form :meth:`PickledArguments.read`
            accepted.
    """
    value = load_plain(bytes.fromhex(payload["pickle"]))
    if type(value) is not dict:
        raise PlainDataError(f"{_FORM}, got {type(value).__name__}")
    positional = value.get("args", ())
    kwargs = value.get("kwargs")
    kwargs = {} if kwargs is None else kwargs
    if type(positional) not in (list, tuple) or type(kwargs) is not dict:
        raise PlainDataError(_TYPES)
    if any(type(key) is not str for key in kwargs):
        raise PlainDataError("keyword argument names must be strings")
    return list(positional[int(payload["start"]) : int(payload["stop"])]), dict(kwargs)
