"""Finding, loading and calling a verifier's entry point, and turning its result into a score.

Standard library only: the sandbox child loads this file without importing ``fleet_sdk``. The
functions here never print and never swallow ``KeyboardInterrupt`` or cancellation.

The child imports this module on every verifier run, so it leaves out what only the rare paths
need: ``inspect`` (with ``dataclasses``, which imports it) and ``traceback`` load when a
verifier's entry point is not a plain function or when a fault is formatted, ``threading`` when
an async verifier runs inside a running loop, and ``numbers`` when a result is not a plain
``int``, ``float`` or ``bool``. The code is parsed with the builtin ``_ast`` (what ``ast.parse``
calls), without the ``ast`` module's Python half.
"""

from __future__ import annotations

import _ast  # noqa: PLC2701 - what ast.parse calls, without ast's Python half
import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import FunctionType, GeneratorType
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from ._compat import ErrorBase
from ._namespace import build_namespace, registered_as_module

if TYPE_CHECKING:
    import ast

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
        # ``ast.parse(code, VERIFIER_FILENAME)``: no compiler flag of this module is inherited.
        tree = compile(code, VERIFIER_FILENAME, "exec", _ast.PyCF_ONLY_AST, dont_inherit=True)
        return cast("ast.Module", tree)
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
            node.name for node in tree.body if isinstance(node, _ast.FunctionDef | _ast.AsyncFunctionDef)
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
# A function's attribute dict and code object, read through ``FunctionType``'s own descriptors:
# nothing of the verifier's (a dict subclass's methods, a property) runs while they are read.
_FUNCTION_DICT = FunctionType.__dict__["__dict__"]
_FUNCTION_CODE = FunctionType.__dict__["__code__"]
_MISSING = object()

Unaudited = Callable[..., Any]
"""``unaudited(read, *args)``: ``read(*args)`` with the sandbox's hook letting this thread read
frames and code objects (``_audit.install_audit_hook``); outside the sandbox, :func:`_direct`.

The functions that pass it on bind each other as positional defaults, not by global name: the
verifier can reach and rebind this module's globals (``Execution.__init__.__globals__``), and
would otherwise be handed the window; the hook refuses changing their ``__defaults__``.
"""


def _direct(read: Callable[..., _T], *args: Any) -> _T:
    """:data:`Unaudited` outside the sandbox: ``read(*args)``."""
    return read(*args)


def _plain_code(
    entry: Any,
    unaudited: Unaudited,
    _type: Any = type,
    _function: Any = FunctionType,
    _attributes_of: Any = _FUNCTION_DICT.__get__,
    _contains: Any = dict.__contains__,
    _get: Any = dict.get,
    _missing: Any = _MISSING,
    _code_of: Any = _FUNCTION_CODE.__get__,
) -> Any:
    """The code object of ``entry`` when it is a plain ``def``, or one that ``functools.wraps``
    wrapped (what ``inspect.signature`` would read), else ``None``.

    In the sandbox, only the code object is read in the hook's window, by a C method: no code
    of the verifier's runs there.
    """
    for _ in (0,) * 64:
        if _type(entry) is not _function:
            return None
        attributes = _attributes_of(entry)
        if _contains(attributes, "__signature__"):
            return None
        wrapped = _get(attributes, "__wrapped__", _missing)
        if wrapped is _missing:
            return unaudited(_code_of, entry)
        entry = wrapped
    return None


def _positional(
    entry: Callable[..., Any],
    candidates: tuple[Any, ...],
    unaudited: Unaudited = _direct,
    _plain_code: Any = _plain_code,
) -> tuple[Any, ...]:
    """The first of ``candidates``, as many as ``entry`` takes positionally (all for ``*args``)."""
    code = _plain_code(entry, unaudited)
    if code is not None:  # a def: its code object says what inspect.signature would
        if code.co_flags & _CO_VARARGS:
            return candidates
        return candidates[: code.co_argcount]
    import inspect  # callable objects, partials... (their code runs, audited as any other)

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
    _positional: Any = _positional,
    *,
    arguments: tuple[Sequence[Any], Mapping[str, Any]] | None,
    convention: CallConvention,
    unaudited: Unaudited,
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
    return entry(*_positional(entry, candidates, unaudited))


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
    if type(result) not in _PLAIN_REALS:  # those are numbers.Number: no need to import it
        import numbers

        if not isinstance(result, numbers.Number | str | bytes) and hasattr(result, "score"):
            return _number(result.score, "the 'score' attribute")
    return _number(result, "the verifier's result")


# Exactly these types (not subclasses): numbers.Real, with nothing of the verifier's to consult.
_PLAIN_REALS = (bool, int, float)


def _is_real(value: Any) -> bool:
    """``isinstance(value, numbers.Real)``, importing ``numbers`` only for other types."""
    if type(value) in _PLAIN_REALS:
        return True
    import numbers

    return isinstance(value, numbers.Real)


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if _is_real(value):
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


# An exception's links and traceback, read through ``BaseException``'s own descriptors (an
# exception class of the verifier's may override the attributes with properties).
_CAUSE = BaseException.__dict__["__cause__"]
_CONTEXT = BaseException.__dict__["__context__"]
_SUPPRESS_CONTEXT = BaseException.__dict__["__suppress_context__"]
_TRACEBACK = BaseException.__dict__["__traceback__"]
_CAUSE_TEXT = "\nThe above exception was the direct cause of the following exception:\n\n"
_CONTEXT_TEXT = "\nDuring handling of the above exception, another exception occurred:\n\n"
_Entries = list[tuple[str, int, str]]


def _read_chain(
    exc: BaseException,
    _id: Any = id,
    _len: Any = len,
    _set: Any = set,
    _traceback_of: Any = _TRACEBACK.__get__,
    _cause_of: Any = _CAUSE.__get__,
    _context_of: Any = _CONTEXT.__get__,
    _suppressed: Any = _SUPPRESS_CONTEXT.__get__,
    _cause_text: str = _CAUSE_TEXT,
    _context_text: str = _CONTEXT_TEXT,
) -> list[tuple[BaseException, _Entries, str]]:
    """``exc`` and the exceptions it was raised from, newest first: each with its traceback's
    ``(file, line, function)`` and how the next one led to it (a cause's or context's text).

    Runs in the hook's window (frames readable): every name is a default bound at import, every
    read a C attribute of a C type (tracebacks, frames, code objects, ``BaseException``'s own
    descriptors), so no code of the verifier's (an exception's ``__str__``, a property, a
    rebound global) runs there.
    """
    chain: list[tuple[BaseException, _Entries, str]] = []  # (no annotation is evaluated)
    seen = _set()
    current: BaseException | None = exc
    while current is not None and _id(current) not in seen and _len(chain) < 32:
        seen.add(_id(current))
        entries: _Entries = []
        tb = _traceback_of(current)
        while tb is not None and _len(entries) < 256:
            frame_code = tb.tb_frame.f_code
            entries.append((frame_code.co_filename, tb.tb_lineno, frame_code.co_name))
            tb = tb.tb_next
        cause, context = _cause_of(current), _context_of(current)
        if cause is not None:
            chain.append((current, entries, _cause_text))
            current = cause
        elif context is not None and not _suppressed(current):
            chain.append((current, entries, _context_text))
            current = context
        else:
            chain.append((current, entries, ""))
            current = None
    return chain


def _format_traceback(
    exc: BaseException,
    code: str,
    unaudited: Unaudited = _direct,
    _read_chain: Any = _read_chain,
) -> str:
    """Format ``exc`` starting at the verifier's own outermost frame, with its source lines
    (read outside the hook's window: ``linecache``, ``str`` of the exceptions)."""
    import linecache
    import traceback

    chain: list[tuple[BaseException, _Entries, str]] = unaudited(_read_chain, exc)
    entries = chain[0][1]
    for index, (filename, _, _) in enumerate(entries):
        if filename == VERIFIER_FILENAME:
            chain[0] = (chain[0][0], entries[index:], chain[0][2])
            break
    lines = code.splitlines(keepends=True)
    linecache.cache[VERIFIER_FILENAME] = (len(code), None, lines, VERIFIER_FILENAME)
    parts: list[str] = []
    try:
        for error, stack, led_here in reversed(chain):
            parts.append(led_here)  # how the one printed before led to this one
            if stack:
                summary = traceback.StackSummary.from_list(
                    [
                        (name, line, function, linecache.getline(name, line).strip())
                        for name, line, function in stack
                    ]
                )
                parts.append("Traceback (most recent call last):\n")
                parts.extend(summary.format())
            parts.append(_exception_line(error))
        return "".join(parts)
    finally:
        linecache.cache.pop(VERIFIER_FILENAME, None)


def _text(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # the verifier's own __str__ failed
        return "<exception str() failed>"


def _exception_line(exc: BaseException) -> str:
    """``Type: message`` and its notes, as ``traceback`` prints them (which would also walk the
    tracebacks of ``exc``'s context: frames, read outside the runner's window)."""
    kind = type(exc)
    name, module = kind.__qualname__, kind.__module__
    if module not in ("__main__", "builtins"):
        name = f"{module}.{name}"
    text = _text(exc)
    lines = [f"{name}: {text}" if text else name]
    notes = getattr(exc, "__notes__", None)
    if isinstance(notes, list | tuple):
        lines.extend(note if isinstance(note, str) else "<note str() failed>" for note in notes)
    return "\n".join(lines) + "\n"


def _fault(
    exc: BaseException,
    code: str,
    unaudited: Unaudited = _direct,
    _format_traceback: Any = _format_traceback,
) -> Execution:
    """Classify an exception raised while loading or running the verifier."""
    if isinstance(exc, VerifierCodeError):
        return Execution(error_type=exc.error_type, error_message=exc.message, traceback=exc.detail)
    if isinstance(exc, MemoryError):
        message = "MemoryError: the verifier ran out of memory"
        try:
            trace = _format_traceback(exc, code, unaudited)
        except MemoryError:
            return Execution(error_type="memory_limit", error_message=message)
        return Execution(error_type="memory_limit", error_message=message, traceback=trace)
    text = _text(exc)
    message = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    trace = _format_traceback(exc, code, unaudited)
    return Execution(
        error_type="exception", error_message=message, traceback=trace, exception_type=type(exc).__name__
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
    import threading

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
    unaudited: Unaudited = _direct,
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
        unaudited: In the sandbox, the hook's window for reading the entry point's code and a
            traceback's frames (see :data:`Unaudited`).
    """
    # Bound before the verifier's module runs, which may rebind this module's globals.
    call, fault = _call, _fault
    start = time.perf_counter()
    globals_ = build_namespace() if namespace is None else namespace
    try:
        # Registered for the whole run: get_type_hints and pickle look the module up too.
        with registered_as_module(globals_):
            entry = load_verifier(code, namespace=globals_, function_name=function_name)
            result = call(
                entry, env, final_answer, arguments=arguments, convention=convention, unaudited=unaudited
            )
            if _is_awaitable(result):
                result = _await_in_new_loop(result)
        execution = _scored(result)
    except (Exception, SystemExit) as exc:
        execution = fault(exc, code, unaudited)
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
                unaudited=_direct,
            )
            while _is_awaitable(result):
                result = await result
        execution = _scored(result)
    except (Exception, SystemExit) as exc:
        execution = _fault(exc, code)
    execution.execution_time_ms = (time.perf_counter() - start) * 1000.0
    return execution
