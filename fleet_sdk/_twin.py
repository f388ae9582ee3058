"""Sync twins derived from their async source: the one mechanism every sync API uses.

A sync method is declared as ``name = sync_method(AsyncClass.name)`` in the sync class: it keeps
the async method's parameters, types and docstring, runs the coroutine on the SDK's loop bridge
(``fleet_sdk._runtime._bridge``: works in scripts, threads and inside a running loop), and can
wrap what comes back into its sync twin (``wrap=Env`` turns an ``AsyncEnv`` into an ``Env``).
``sync_view`` does the same for a plain method that returns an async object (``Env.db``);
``sync_function`` derives a module-level function (``run_remote_sync`` from ``run_remote``).

By default the async object a sync one drives is its ``_inner`` attribute; ``source=`` names
another way to reach it (``TaskEnv`` drives itself). ``tests/test_sync_twins.py`` compares every
pair's public methods and signatures.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

__all__ = ["Twin", "sync_annotation", "sync_function", "sync_method", "sync_view"]

P = ParamSpec("P")
R = TypeVar("R")
W = TypeVar("W")
A = TypeVar("A")
S = TypeVar("S")

_ASYNC_NAME = re.compile(r"\bAsync(?=[A-Z])")


def sync_annotation(annotation: Any) -> Any:
    """An async signature's annotation as its sync twin spells it (``AsyncEnv`` -> ``Env``).

    Args:
        annotation: A (string) annotation of the async source.
    """
    if isinstance(annotation, str):
        return _ASYNC_NAME.sub("", annotation)
    return annotation


def _run(coro: Coroutine[Any, Any, R]) -> R:
    # Imported here: the bridge lives in the runtime package, which loads httpx, and modules
    # such as fleet_sdk.verifiers must stay importable without it.
    from ._runtime._bridge import run_sync

    return run_sync(coro)


def _inner(obj: Any) -> Any:
    return obj._inner


def _signature(source: Callable[..., Any], wrap: Callable[..., Any] | None) -> inspect.Signature:
    signature = inspect.signature(source)
    if wrap is None:
        returns = sync_annotation(signature.return_annotation)
    elif isinstance(wrap, type):
        returns = wrap.__name__
    else:
        returns = inspect.signature(wrap).return_annotation
    return signature.replace(return_annotation=returns)


class Twin(Generic[P, R]):
    """A sync method derived from an async source (see the module docstring).

    Read on an instance it is a bound callable with the source's parameters; read on the class it
    is callable with the instance first, and ``inspect.signature`` shows the source's signature.
    """

    def __init__(
        self,
        source: Callable[..., Any],
        *,
        awaits: bool,
        wrap: Callable[[Any], Any] | None,
        target: Callable[[Any], Any],
    ) -> None:
        self._source = source
        self._awaits = awaits
        self._wrap = wrap
        self._target = target
        self.__doc__ = source.__doc__
        self.__name__ = source.__name__
        self.__qualname__ = source.__qualname__
        self.__signature__ = _signature(source, wrap)
        self._bound_signature = self.__signature__.replace(
            parameters=list(self.__signature__.parameters.values())[1:]
        )

    def __set_name__(self, owner: type, name: str) -> None:
        self.__name__ = name
        self.__qualname__ = f"{owner.__qualname__}.{name}"

    def __call__(self, instance: Any, *args: Any, **kwargs: Any) -> Any:
        # By name, so a subclass that overrides the async method is the one that runs.
        result = getattr(self._target(instance), self._source.__name__)(*args, **kwargs)
        if self._awaits:
            result = _run(result)
        return self._wrap(result) if self._wrap is not None else result

    def __get__(self, instance: Any, owner: type | None = None) -> Callable[P, R]:
        if instance is None:
            return self  # type: ignore[return-value]  # class access: the unbound form

        @functools.wraps(self._source, assigned=("__module__", "__name__", "__qualname__", "__doc__"))
        def bound(*args: Any, **kwargs: Any) -> Any:
            return self(instance, *args, **kwargs)

        bound.__signature__ = self._bound_signature  # type: ignore[attr-defined]
        bound.__name__ = self.__name__
        return bound


@overload
def sync_method(
    source: Callable[Concatenate[Any, P], Coroutine[Any, Any, R]],
    *,
    target: Callable[[Any], Any] = ...,
) -> Twin[P, R]: ...


@overload
def sync_method(
    source: Callable[Concatenate[Any, P], Coroutine[Any, Any, R]],
    *,
    wrap: Callable[[R], W],
    target: Callable[[Any], Any] = ...,
) -> Twin[P, W]: ...


def sync_method(
    source: Callable[..., Any],
    *,
    wrap: Callable[[Any], Any] | None = None,
    target: Callable[[Any], Any] = _inner,
) -> Twin[Any, Any]:
    """A sync method that awaits ``source`` on the bridge.

    Args:
        source: The async method (``AsyncEnv.reset``).
        wrap: Turns the result into its sync twin (``Env`` for an ``AsyncEnv``).
        target: Reaches the async object from the sync one (default: ``obj._inner``).
    """
    return Twin(source, awaits=True, wrap=wrap, target=target)


def sync_view(
    source: Callable[Concatenate[Any, P], R],
    *,
    wrap: Callable[[R], W],
    target: Callable[[Any], Any] = _inner,
) -> Twin[P, W]:
    """A sync method for a plain async-side method that returns an async object (``AsyncEnv.db``).

    Args:
        source: The plain method.
        wrap: Turns its result into the sync twin (``Database`` for an ``AsyncDatabase``).
        target: Reaches the async object from the sync one (default: ``obj._inner``).
    """
    return Twin(source, awaits=False, wrap=wrap, target=target)


@overload
def sync_function(
    source: Callable[P, Coroutine[Any, Any, R]], *, name: str | None = None
) -> Callable[P, R]: ...


@overload
def sync_function(
    source: Callable[Concatenate[A, P], Coroutine[Any, Any, R]],
    *,
    first: Callable[[S], A],
    name: str | None = None,
) -> Callable[Concatenate[S, P], R]: ...


def sync_function(
    source: Callable[..., Any], *, first: Callable[[Any], Any] | None = None, name: str | None = None
) -> Any:
    """A module-level sync function that runs ``source`` on the bridge.

    Args:
        source: The async function (``run_remote``).
        first: Converts the first argument to what the source takes (a ``Fleet`` to its
            ``async_fleet``).
        name: The twin's name (default: the source's with ``_sync`` appended, the twin rule of
            ``docs/architecture.md``).
    """
    signature = inspect.signature(source)
    returns = sync_annotation(signature.return_annotation)
    parameters = list(signature.parameters.values())
    if first is not None:  # the sync twin takes what ``first`` converts from (a Fleet)
        converted_from = next(iter(inspect.signature(first).parameters.values())).annotation
        parameters[0] = parameters[0].replace(annotation=converted_from)

    first_name = parameters[0].name if parameters else ""

    @functools.wraps(source, assigned=("__module__", "__doc__"))
    def function(*args: Any, **kwargs: Any) -> Any:
        if first is not None:
            if args:
                args = (first(args[0]), *args[1:])
            elif first_name in kwargs:
                kwargs[first_name] = first(kwargs[first_name])
        return _run(source(*args, **kwargs))

    name = name or f"{source.__name__}_sync"
    function.__name__ = name
    function.__qualname__ = name
    function.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=parameters, return_annotation=returns
    )
    return function
