"""Finding, loading and calling a verifier's entry point, and turning its result into a score.

Standard library only: the sandbox child loads this file without importing ``fleet_sdk``. The
functions here never print and never swallow ``KeyboardInterrupt`` or cancellation.

The child imports this module on every verifier run, so it leaves out what only the rare paths
need: ``inspect`` (with ``dataclasses``, which imports it) and ``traceback`` load when a
verifier's entry point is not a plain function or when a fault is formatted.
"""

from __future__ import annotations

import ast
import contextlib
import math
import numbers
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from types import FunctionType, GeneratorType
from typing import Any, Literal, TypeVar

from ._compat import ErrorBase
from ._namespace import build_namespace, registered_as_module

__all__ = [
    "VERIFIER_FILENAME",
    "CallConvention",
    "ErrorType",
    "Execution",
    "InvalidResultError",
    "VerifierCodeError",
    "call_arguments",
    "execute",
    "execute_async",
    "find_entry_point",
    "load_verifier",
    "parse_verifier",
    "score_from_result",
]

ErrorType = Literal[
    "syntax_error", "no_entry_point", "exception", "timeout", "memory_limit", "invalid_result"
]
"""The kinds of verifier fault, as reported in ``VerifierOutcome.error.type``."""

CallConvention = Literal["env", "snapshots"]
"""How a verifier's entry point is called.

``"env"``: ``verify(env, final_answer)`` (as many of the two as it takes), or, when arguments are
given, ``verify(env, *args, **kwargs)``. ``"snapshots"``: ``fn(before, after, transcript)``, the
public SDK's ``env.verify(fn)`` form, with ``env.db("seed")``, ``env.db("current")`` and the final
answer (as many of the three as it takes).
"""

VERIFIER_FILENAME = "<verifier>"
"""The file name the verifier's code is compiled under; tracebacks show it."""

_T = TypeVar("_T")


class VerifierCodeError(ErrorBase):
    """The verifier's code cannot be run: it does not parse, or it has no usable entry point.

    Attributes:
        error_type: ``"syntax_error"`` or ``"no_entry_point"``.
        message: What is wrong, e.g. ``"line 3: invalid syntax"``.
        lineno: The line of a syntax error, else ``None``.
        functions: The top-level functions found (for ``no_entry_point``).
        detail: For a syntax error, the offending line with a caret under the error.
    """

    def __init__(
        self,
        error_type: Literal["syntax_error", "no_entry_point"],
        message: str,
        *,
        lineno: int | None = None,
        functions: tuple[str, ...] = (),
        detail: str | None = None,
    ) -> None:
        super().__init__(message)
        self.error_type: Literal["syntax_error", "no_entry_point"] = error_type
        self.message = message
        self.lineno = lineno
        self.functions = functions
        self.detail = detail


class InvalidResultError(TypeError, ErrorBase):
    """The verifier returned something that is not a score (see :func:`score_from_result`)."""


def parse_verifier(code: str) -> ast.Module:
    """Parse a verifier's source.

    Args:
        code: The Python source.

    Raises:
        VerifierCodeError: With ``error_type="syntax_error"``, the line and the parser's message.
    """
    try:
        return ast.parse(code, filename=VERIFIER_FILENAME)
    except SyntaxError as exc:
        import traceback

        detail = "".join(traceback.format_exception_only(type(exc), exc))
        raise VerifierCodeError(
            "syntax_error", f"line {exc.lineno}: {exc.msg}", lineno=exc.lineno, detail=detail
        ) from None
    except ValueError as exc:  # e.g. "source code string cannot contain null bytes"
        raise VerifierCodeError("syntax_error", str(exc)) from None


def find_entry_point(code: str | ast.Module, function_name: str | None = None) -> str:
    """Name the function to call: ``function_name`` if given, else ``verify``, else the only one.

    Only top-level ``def`` and ``async def`` statements count. When there is no ``verify`` and
    more than one function, the choice would be a guess (the public SDK took the first function
    defined, i.e. a helper above ``verify``), so it is an error that names every function.

    Args:
        code: The source, or its already-parsed module.
        function_name: An explicit entry point; it must be a top-level function.

    Raises:
        VerifierCodeError: A syntax error, or no usable entry point (``no_entry_point``).
    """
    tree = parse_verifier(code) if isinstance(code, str) else code
    functions = tuple(
        dict.fromkeys(
            node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        )
    )
    listed = ", ".join(functions) or "none"
    if function_name is not None:
        if function_name in functions:
            return function_name
        raise VerifierCodeError(
            "no_entry_point",
            f"no top-level function named {function_name!r}; functions found: {listed}",
            functions=functions,
        )
    if "verify" in functions:
        return "verify"
    if len(functions) == 1:
        return functions[0]
    if not functions:
        raise VerifierCodeError(
            "no_entry_point",
            "the verifier defines no top-level function; define verify(env, final_answer=None)",
        )
    raise VerifierCodeError(
        "no_entry_point",
        f"no function named 'verify' and {len(functions)} top-level functions ({listed}), so the "
        "entry point is ambiguous; name the entry point 'verify' or pass function_name",
        functions=functions,
    )


def load_verifier(
    code: str,
    *,
    namespace: dict[str, Any] | None = None,
    function_name: str | None = None,
) -> Callable[..., Any]:
    """Execute the verifier's module code and return its entry point.

    Args:
        code: The Python source.
        namespace: The globals to run it in; a fresh :func:`build_namespace` by default.
        function_name: An explicit entry point (see :func:`find_entry_point`).

    Raises:
        VerifierCodeError: A syntax error, or no usable entry point.
        Exception: Whatever the module-level code raises.
    """
    tree = parse_verifier(code)
    name = find_entry_point(tree, function_name)
    globals_ = build_namespace() if namespace is None else namespace
    with registered_as_module(globals_):  # e.g. @dataclass looks its class's module up
        # compile() inherits this module's `from __future__ import annotations` on purpose:
        # annotations stay unevaluated, as where the public SDK runs verifiers, whose code
        # often says `env: Any` without importing Any (contracts/test_public_sdk.py).
        exec(compile(tree, VERIFIER_FILENAME, "exec"), globals_)
    entry = globals_.get(name)
    if not callable(entry):
        raise VerifierCodeError("no_entry_point", f"{name!r} is not callable after running the module")
    return entry  # type: ignore[no-any-return]


# Code flags (Include/cpython/code.h), read from the entry's code object instead of importing
# inspect for its signature.
_CO_VARARGS = 0x04
_CO_ITERABLE_COROUTINE = 0x100


def _positional(entry: Callable[..., Any], candidates: tuple[Any, ...]) -> tuple[Any, ...]:
    """The first of ``candidates``, as many as ``entry`` takes positionally (all for ``*args``)."""
    plain = type(entry) is FunctionType and not hasattr(entry, "__wrapped__")
    if plain and not hasattr(entry, "__signature__"):
        code = entry.__code__  # a plain def: its code object says what inspect.signature would
        if code.co_flags & _CO_VARARGS:
            return candidates
        return candidates[: code.co_argcount]
    import inspect  # decorated entry points, callable objects, partials...

    try:
        parameters = list(inspect.signature(entry).parameters.values())
    except (TypeError, ValueError):
        return candidates
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in parameters):
        return candidates
    positional = [
        p
        for p in parameters
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    return candidates[: len(positional)]


def call_arguments(
    final_answer: Any,
    args: Sequence[Any] | None,
    kwargs: Mapping[str, Any] | None,
    convention: CallConvention,
) -> tuple[list[Any], dict[str, Any]] | None:
    """Check how a runner was asked to call the verifier; ``(args, kwargs)`` when given, else ``None``.

    Args:
        final_answer: The runner's ``final_answer``.
        args: Positional arguments after ``env``, or ``None``.
        kwargs: Keyword arguments, or ``None``.
        convention: The calling convention.

    Raises:
        ValueError: Arguments together with a ``final_answer`` (pass it in ``kwargs``) or with
            the ``"snapshots"`` convention, or a keyword that is not a string.
    """
    if convention not in ("env", "snapshots"):
        raise ValueError(f"convention must be 'env' or 'snapshots', not {convention!r}")
    if args is None and kwargs is None:
        return None
    if convention != "env":
        raise ValueError("args and kwargs only go with the 'env' convention")
    if final_answer is not None:
        raise ValueError("pass final_answer or args/kwargs, not both (put it in kwargs['final_answer'])")
    keywords = dict(kwargs or {})
    bad = next((key for key in keywords if not isinstance(key, str)), None)
    if bad is not None:
        raise ValueError(f"keyword argument names must be strings, not {bad!r}")
    return list(args or ()), keywords


def _call(
    entry: Callable[..., Any],
    env: Any,
    final_answer: Any,
    *,
    arguments: tuple[Sequence[Any], Mapping[str, Any]] | None,
    convention: CallConvention,
    unaudited: Callable[[], AbstractContextManager[None]],
) -> Any:
    """Call the entry point the way ``convention`` and ``arguments`` say (see :data:`CallConvention`)."""
    if arguments is not None:
        args, kwargs = arguments
        return entry(env, *args, **kwargs)
    candidates = (
        (env.db("seed"), env.db("current"), final_answer)
        if convention == "snapshots"
        else (env, final_answer)
    )
    with unaudited():
        call_args = _positional(entry, candidates)
    return entry(*call_args)


def _is_awaitable(value: Any) -> bool:
    """``inspect.isawaitable``: an awaitable, or a generator-based coroutine."""
    if isinstance(value, Awaitable):
        return True
    return isinstance(value, GeneratorType) and bool(value.gi_code.co_flags & _CO_ITERABLE_COROUTINE)


def score_from_result(result: Any) -> float:
    """Turn what a verifier returned into a score.

    ``None`` scores 1.0 (a verifier that finishes without complaint passed); a bool scores 1.0
    or 0.0; a real number is the score; a mapping with a ``"score"`` key or an object with a
    ``score`` attribute uses that value by the same rules (except ``None``).

    Args:
        result: The verifier's return value.

    Raises:
        InvalidResultError: Anything else, including NaN, infinities and a ``None`` score.
    """
    if result is None:
        return 1.0
    if isinstance(result, Mapping):
        if "score" not in result:
            raise InvalidResultError(
                f"the verifier returned a mapping without a 'score' key: {_short(result)}"
            )
        return _number(result["score"], "the 'score' key")
    if not isinstance(result, numbers.Number | str | bytes) and hasattr(result, "score"):
        return _number(result.score, "the 'score' attribute")
    return _number(result, "the verifier's result")


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, numbers.Real):
        score = float(value)
        if not math.isfinite(score):
            raise InvalidResultError(f"{what} is not a finite number: {score!r}")
        return score
    raise InvalidResultError(
        f"{what} must be a number, a bool, a dict with 'score' or an object with .score; "
        f"got {type(value).__name__}: {_short(value)}"
    )


def _short(value: Any, limit: int = 200) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Execution:
    """The plain-data result of one verifier run (the runners wrap it in ``VerifierOutcome``).

    A plain class, not a dataclass: see the module docstring.

    Attributes:
        result: The verifier's return value, or ``None`` after a fault.
        score: The score, or ``None`` after a fault.
        error_type: The kind of fault, or ``None`` on success.
        error_message: A one-line description of the fault.
        traceback: The traceback (from the verifier's own frames) or syntax-error detail.
        execution_time_ms: Wall time of loading plus calling the verifier.
        exception_type: The class name of the exception the verifier raised (``error_type``
            ``"exception"``), else ``None``.
    """

    def __init__(
        self,
        *,
        result: Any = None,
        score: float | None = None,
        error_type: ErrorType | None = None,
        error_message: str | None = None,
        traceback: str | None = None,
        execution_time_ms: float = 0.0,
        exception_type: str | None = None,
    ) -> None:
        self.result = result
        self.score = score
        self.error_type = error_type
        self.error_message = error_message
        self.traceback = traceback
        self.execution_time_ms = execution_time_ms
        self.exception_type = exception_type

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={value!r}" for name, value in vars(self).items())
        return f"Execution({fields})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not Execution:
            return NotImplemented
        return vars(self) == vars(other)

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value

    @property
    def success(self) -> bool:
        """Whether the verifier ran and returned a valid score."""
        return self.error_type is None


def _format_traceback(exc: BaseException, code: str) -> str:
    """Format ``exc`` starting at the verifier's own outermost frame, with its source lines."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename != VERIFIER_FILENAME:
        tb = tb.tb_next
    import linecache
    import traceback

    lines = code.splitlines(keepends=True)
    linecache.cache[VERIFIER_FILENAME] = (len(code), None, lines, VERIFIER_FILENAME)
    try:
        return "".join(traceback.format_exception(type(exc), exc, tb or exc.__traceback__))
    finally:
        linecache.cache.pop(VERIFIER_FILENAME, None)


def _fault(exc: BaseException, code: str) -> Execution:
    """Classify an exception raised while loading or running the verifier."""
    if isinstance(exc, VerifierCodeError):
        return Execution(error_type=exc.error_type, error_message=exc.message, traceback=exc.detail)
    if isinstance(exc, MemoryError):
        message = "MemoryError: the verifier ran out of memory"
        try:
            trace = _format_traceback(exc, code)
        except MemoryError:
            return Execution(error_type="memory_limit", error_message=message)
        return Execution(error_type="memory_limit", error_message=message, traceback=trace)
    text = str(exc)
    message = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return Execution(
        error_type="exception",
        error_message=message,
        traceback=_format_traceback(exc, code),
        exception_type=type(exc).__name__,
    )


def _scored(result: Any) -> Execution:
    try:
        return Execution(result=result, score=score_from_result(result))
    except InvalidResultError as exc:
        return Execution(result=result, error_type="invalid_result", error_message=str(exc))


def _await_in_new_loop(awaitable: Awaitable[_T]) -> _T:
    """Run ``awaitable`` to completion from synchronous code.

    With no event loop running in this thread it uses ``asyncio.run``; inside a running loop
    (a notebook, an async framework calling sync code) it never nests ``asyncio.run`` but runs
    the awaitable on a fresh loop in a worker thread and blocks until it is done.
    """
    import asyncio

    async def _wrap() -> _T:
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_wrap())

    outcome: list[Any] = []
    failure: list[BaseException] = []

    def _target() -> None:
        try:
            outcome.append(asyncio.run(_wrap()))
        except BaseException as exc:
            failure.append(exc)

    worker = threading.Thread(target=_target, name="fleet-verifier-loop", daemon=True)
    worker.start()
    worker.join()
    if failure:
        raise failure[0]
    return outcome[0]  # type: ignore[no-any-return]


def execute(
    code: str,
    env: Any,
    final_answer: Any = None,
    *,
    arguments: tuple[Sequence[Any], Mapping[str, Any]] | None = None,
    convention: CallConvention = "env",
    function_name: str | None = None,
    namespace: dict[str, Any] | None = None,
    unaudited: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext,
) -> Execution:
    """Load and call a verifier synchronously; every verifier fault becomes ``error_type``.

    An ``async def verify`` (or a returned awaitable) is awaited on a new event loop, never by
    ``asyncio.run`` inside a running loop.

    Args:
        code: The verifier's source.
        env: The environment passed as the first argument.
        final_answer: Passed as the second argument when ``verify`` takes two.
        arguments: ``(args, kwargs)`` to call ``verify(env, *args, **kwargs)`` with instead.
        convention: How the entry point is called (see :data:`CallConvention`).
        function_name: An explicit entry point.
        namespace: The globals to run the code in; :func:`build_namespace` by default.
        unaudited: In the sandbox, exempts this thread from the audit hook while the runner's
            own code inspects the entry point or formats a traceback (frame introspection).
    """
    start = time.perf_counter()
    globals_ = build_namespace() if namespace is None else namespace
    try:
        # Registered for the whole run: get_type_hints and pickle look the module up too.
        with registered_as_module(globals_):
            entry = load_verifier(code, namespace=globals_, function_name=function_name)
            result = _call(
                entry, env, final_answer, arguments=arguments, convention=convention, unaudited=unaudited
            )
            if _is_awaitable(result):
                result = _await_in_new_loop(result)
        execution = _scored(result)
    except (Exception, SystemExit) as exc:
        with unaudited():
            execution = _fault(exc, code)
    execution.execution_time_ms = (time.perf_counter() - start) * 1000.0
    return execution


async def execute_async(
    code: str,
    env: Any,
    final_answer: Any = None,
    *,
    arguments: tuple[Sequence[Any], Mapping[str, Any]] | None = None,
    convention: CallConvention = "env",
    function_name: str | None = None,
    namespace: dict[str, Any] | None = None,
) -> Execution:
    """Load and call a verifier on the running event loop; faults become ``error_type``.

    An ``async def verify`` is awaited here. A synchronous ``verify`` runs inline and so blocks
    the loop while it runs, as any sync call would; use the sandbox to keep the loop free.

    Args:
        code: The verifier's source.
        env: The environment passed as the first argument.
        final_answer: Passed as the second argument when ``verify`` takes two.
        arguments: ``(args, kwargs)`` to call ``verify(env, *args, **kwargs)`` with instead.
        convention: How the entry point is called (see :data:`CallConvention`).
        function_name: An explicit entry point.
        namespace: The globals to run the code in; :func:`build_namespace` by default.
    """
    start = time.perf_counter()
    globals_ = build_namespace() if namespace is None else namespace
    try:
        with registered_as_module(globals_):  # see execute()
            entry = load_verifier(code, namespace=globals_, function_name=function_name)
            result = _call(
                entry,
                env,
                final_answer,
                arguments=arguments,
                convention=convention,
                unaudited=contextlib.nullcontext,
            )
            while _is_awaitable(result):
                result = await result
        execution = _scored(result)
    except (Exception, SystemExit) as exc:
        execution = _fault(exc, code)
    execution.execution_time_ms = (time.perf_counter() - start) * 1000.0
    return execution
