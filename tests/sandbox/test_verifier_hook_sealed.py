"""The audit hook's known bypasses, tried as a hostile verifier would, and refused.

Round 3 switched the hook off from plain Python: ``object.__subclasses__()`` found
``SandboxPolicy``, ``SandboxPolicy.check.__globals__`` (a read no audit event covers) was the
module's dict, and emptying its deny sets there turned the hook off, after which ``ctypes`` and
``_posixsubprocess`` loaded. The hook now runs a sealed copy of its code over private globals,
and never runs the verifier's code exempt. The hook stays a tripwire (see
``docs/threat-model.md``); the OS jail is the boundary, and ``test_verifier_jail.py`` checks it
with the hook off.
"""

from __future__ import annotations

import dis
import types

import pytest
from _jail_runs import probes

from fleet_local.sandbox import DENIED_PREFIX, run_sandboxed_sync

pytestmark = pytest.mark.usefixtures("verifier_runner")

# What a verifier tries once it believes the hook is off; each answer is "loaded" or the error.
AFTERWARDS = """
def attempts():
    import sys
    out = {}
    for name in ("ctypes", "_posixsubprocess"):
        try:
            __import__(name)
            out[name] = "loaded"
        except Exception as exc:
            out[name] = type(exc).__name__ + ": " + str(exc)
    try:
        sys._getframe()
        out["frame"] = "read"
    except Exception as exc:
        out["frame"] = type(exc).__name__ + ": " + str(exc)
    try:
        open("/etc/hostname").close()
        out["open"] = "opened"
    except Exception as exc:
        out["open"] = type(exc).__name__ + ": " + str(exc)
    return out
"""

SUBCLASSES_WALK = """
def classes():
    seen, todo = set(), [object]
    while todo:
        for sub in type.__subclasses__(todo.pop()):
            if sub not in seen:
                seen.add(sub)
                todo.append(sub)
    return seen
"""


def assert_all_refused(result: dict[str, str], keys: tuple[str, ...]) -> None:
    for key in keys:
        assert result[key].startswith(f"PermissionError: {DENIED_PREFIX}: "), (key, result[key])


def test_emptying_the_deny_sets_through_globals_changes_nothing(databases: dict[str, str]) -> None:
    """The round-3 bypass: the deny sets rewritten through ``check.__globals__``, every
    function of the module replaced by one that allows everything, ``builtins`` patched."""
    code = (
        AFTERWARDS
        + SUBCLASSES_WALK
        + """
import builtins
def verify(env):
    found = [c for c in classes() if c.__name__ == "SandboxPolicy"]
    g = found[0].check.__globals__
    for name, value in list(g.items()):
        if type(value) is frozenset:
            g[name] = frozenset()
        elif callable(value) and name.startswith("_") and not isinstance(value, type):
            g[name] = lambda *args, **kwargs: None
    g["_WRITE_PATH_ARGS"], g["_LIST_PATH_ARGS"] = {}, {}
    found[0].check = lambda self, event, args: None
    builtins.PermissionError = None
    try:
        return {"score": 1, "found": len(found), **attempts()}
    finally:
        builtins.PermissionError = g["PermissionError"] if "PermissionError" in g else None
"""
    )
    result = probes(run_sandboxed_sync(code, databases=databases))
    assert result["found"] == 1  # the class is reachable: the test attacks what round 3 reached
    for key in ("ctypes", "_posixsubprocess", "frame", "open"):
        assert DENIED_PREFIX in result[key], (key, result[key])


def test_replacing_code_of_the_reachable_check_is_refused(databases: dict[str, str]) -> None:
    code = (
        SUBCLASSES_WALK
        + """
def verify(env):
    policy = [c for c in classes() if c.__name__ == "SandboxPolicy"][0]
    try:
        policy.check.__code__ = (lambda self, event, args: None).__code__
        return {"score": 1, "swap": "done"}
    except Exception as exc:
        return {"score": 1, "swap": type(exc).__name__ + ": " + str(exc)}
"""
    )
    result = probes(run_sandboxed_sync(code, databases=databases))
    assert_all_refused(result, ("swap",))


def test_code_of_the_verifier_that_runs_inside_the_check_is_audited(databases: dict[str, str]) -> None:
    """The hook used to exempt its thread while it checked an event, so a path-like object's
    ``__fspath__``, called by the check for an event the verifier raised itself, could import
    ``ctypes`` and ``_posixsubprocess`` unchecked."""
    code = """
import os, sys
inside = {}
class Path:
    def __fspath__(self):
        for name in ("ctypes", "_posixsubprocess"):
            try:
                __import__(name)
                inside[name] = "loaded"
            except Exception as exc:
                inside[name] = type(exc).__name__ + ": " + str(exc)
        return os.getcwd()
def verify(env):
    sys.audit("os.listdir", Path())
    return {"score": 1, **inside}
"""
    result = probes(run_sandboxed_sync(code, databases=databases))
    assert_all_refused(result, ("ctypes", "_posixsubprocess"))


def test_the_hook_calls_no_method_of_the_verifier_objects_it_describes(databases: dict[str, str]) -> None:
    """A denied event's message used to ``repr`` its arguments, running the verifier's
    ``__repr__`` inside the (then exempt) check."""
    code = """
import sys
calls = []
class Loud:
    def __repr__(self):
        calls.append("repr")
        return "loud"
    def __hash__(self):
        calls.append("hash")
        return 0
    @property
    def __class__(self):
        calls.append("__class__")
        return int
def verify(env):
    out = {}
    for event in ("os.system", "socket.connect", "object.__getattr__", "open", "import", "os.remove"):
        try:
            sys.audit(event, Loud(), Loud(), Loud())
            out[event] = "allowed"
        except Exception as exc:
            out[event] = type(exc).__name__ + ": " + str(exc)
    return {"score": 1, "calls": calls, **out}
"""
    result = probes(run_sandboxed_sync(code, databases=databases))
    assert result["calls"] == []
    assert result["os.system"] == f"PermissionError: {DENIED_PREFIX}: os.system(<object>, <object>, <object>)"
    assert result["socket.connect"].startswith(f"PermissionError: {DENIED_PREFIX}: socket.connect(")
    # A path that is an object of the verifier's without __fspath__ cannot be checked: refused.
    assert result["open"] == f"PermissionError: {DENIED_PREFIX}: open (could not be checked)"


def test_a_str_subclass_path_is_checked_as_the_plain_string(databases: dict[str, str]) -> None:
    code = """
import os
class Sly(str):
    def startswith(self, *args):
        return False
    def split(self, *args):
        return [os.getcwd().lstrip("/"), "x"]
    def __str__(self):
        return os.getcwd() + "/x"
def verify(env):
    try:
        return {"score": 1, "read": open(Sly("/etc/hostname")).read()}
    except Exception as exc:
        return {"score": 1, "read": type(exc).__name__ + ": " + str(exc)}
"""
    result = probes(run_sandboxed_sync(code, databases=databases))
    assert result["read"] == f"PermissionError: {DENIED_PREFIX}: open('/etc/hostname')"


def test_the_runner_traceback_window_exempts_only_frame_reads(databases: dict[str, str]) -> None:
    """The runner formats a failing verifier's traceback with the frame rules relaxed. The
    exception's ``__str__`` runs there: it used to run with every rule off."""
    code = (
        AFTERWARDS
        + """
seen = {}
class Boom(Exception):
    def __str__(self):
        if not seen:
            seen.update(attempts())
        return "boom " + repr(sorted((k, v[:60]) for k, v in seen.items()))
def verify(env):
    raise Boom()
"""
    )
    outcome = run_sandboxed_sync(code, databases=databases)
    assert outcome.error is not None
    text = outcome.error.message + (outcome.error.traceback or "")
    assert "boom" in text, text
    assert "loaded" not in text and "opened" not in text, text
    assert "('ctypes', 'PermissionError: denied by the verifier sandbox" in text, text


def test_a_traceback_kept_from_a_denial_gives_no_way_to_the_hook(databases: dict[str, str]) -> None:
    """The runner used to format a failing verifier's traceback with frame reads allowed, and the
    exception's ``__str__`` ran in that window: it walked a traceback it had kept from one of the
    hook's denials to the hook's own frame, read ``check`` from its locals and emptied the deny
    sets in ``check.__globals__``. The runner now reads frames only in C, never around the
    verifier's code."""
    code = """
import os
kept = []
try:
    os.system("true")
except PermissionError as exc:
    kept.append(exc)
found = {}
class Boom(Exception):
    def __str__(self):
        if not found:
            try:
                tb = kept[0].__traceback__
                while tb.tb_next is not None:
                    tb = tb.tb_next
                check = tb.tb_frame.f_locals["check"]
                for name, value in list(check.__globals__.items()):
                    if type(value) is frozenset:
                        check.__globals__[name] = frozenset()
                found["frame"] = "reached"
            except Exception as exc:
                found["frame"] = type(exc).__name__ + ": " + str(exc)
            try:
                __import__("_posixsubprocess")
                found["import"] = "loaded"
            except Exception as exc:
                found["import"] = type(exc).__name__ + ": " + str(exc)
        return repr(sorted(found.items()))
def verify(env):
    raise Boom()
"""
    outcome = run_sandboxed_sync(code, databases=databases)
    assert outcome.error is not None and outcome.error.type == "exception"
    message = outcome.error.message
    assert "reached" not in message and "loaded" not in message, message
    assert f"('frame', 'PermissionError: {DENIED_PREFIX}: reading tb_frame')" in message, message
    assert f"('import', 'PermissionError: {DENIED_PREFIX}: import of _posixsubprocess')" in message


def test_tracebacks_and_decorated_entry_points_still_work_without_the_window(
    databases: dict[str, str],
) -> None:
    """What the window was for: a ``functools.wraps`` entry point gets as many arguments as the
    function it wraps, and a chained failure is shown with its cause and both tracebacks."""
    code = """
import functools
def logged(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs)
    return wrapper
class Loud(Exception):
    def __str__(self):
        return "loud message"
@logged
def verify(env):
    try:
        {}["missing"]
    except KeyError as exc:
        raise Loud() from exc
"""
    outcome = run_sandboxed_sync(code, databases=databases)
    assert outcome.error is not None and outcome.error.traceback is not None
    assert outcome.error.message == "Loud: loud message"
    trace = outcome.error.traceback
    assert "KeyError: 'missing'" in trace
    assert "The above exception was the direct cause of the following exception:" in trace
    assert 'File "<verifier>", line 14, in verify\n    {}["missing"]' in trace
    assert trace.rstrip().endswith("verifier.Loud: loud message"), trace


def test_rebinding_the_runner_globals_hands_out_no_window(databases: dict[str, str]) -> None:
    """The runner's module globals are reachable (``Execution.__init__.__globals__``): rebinding
    ``_positional`` there once handed the hook's window to the verifier, which read the hook's
    frame from a kept denial, emptied the deny sets and imported ``_posixsubprocess``. The
    runner binds its helpers as defaults, and the hook refuses changing those."""
    code = (
        SUBCLASSES_WALK
        + """
import os
kept, called = [], []
try:
    os.system("true")
except PermissionError as exc:
    kept.append(exc)
def take_the_window(name):
    def hijacked(*args, **kwargs):
        called.append(name)
        for unaudited in args:
            if callable(unaudited) and getattr(unaudited, "__name__", "") == "unaudited":
                tb = kept[0].__traceback__
                while tb.tb_next is not None:
                    tb = tb.tb_next
                frame = unaudited(lambda: tb.tb_frame)
                for key, value in list(frame.f_globals.items()):
                    if type(value) is frozenset:
                        frame.f_globals[key] = frozenset()
        raise RuntimeError("hijacked " + name)
    return hijacked
g = next(c.__init__.__globals__ for c in classes() if c.__name__ == "Execution")
originals = {name: g[name] for name in ("_call", "_positional", "_fault", "_format_traceback")}
for name in ("_call", "_positional", "_plain_code", "_fault", "_format_traceback", "_read_chain"):
    g[name] = take_the_window(name)
refused = {}
for name, function in originals.items():
    try:
        function.__defaults__ = tuple(take_the_window(name) for _ in function.__defaults__)
        refused[name] = "changed"
    except Exception as exc:
        refused[name] = type(exc).__name__
def verify(env):
    try:
        __import__("_posixsubprocess")
        imported = "loaded"
    except Exception as exc:
        imported = type(exc).__name__
    raise ValueError(repr({"called": called, "imported": imported, "refused": refused}))
"""
    )
    outcome = run_sandboxed_sync(code, databases=databases)
    assert outcome.error is not None and outcome.error.message.startswith("ValueError: "), outcome.error
    assert "'called': []" in outcome.error.message, outcome.error.message
    assert "'imported': 'PermissionError'" in outcome.error.message
    for name in ("_call", "_positional", "_fault", "_format_traceback"):
        assert f"'{name}': 'PermissionError'" in outcome.error.message, outcome.error.message
    assert 'File "<verifier>"' in (outcome.error.traceback or "")


@pytest.mark.parametrize("name", ["_read_chain", "_plain_code"])
def test_what_runs_in_the_window_looks_up_no_global(name: str) -> None:
    """In the hook's window frames are readable: a global looked up there (a builtin, a module
    constant) could be one the verifier rebound, and its code would run with that power."""
    from fleet_sdk.verifiers import _entry

    code = getattr(_entry, name).__code__
    todo, names = [code], []
    while todo:
        current = todo.pop()
        names += [i.argval for i in dis.get_instructions(current) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")]
        todo += [const for const in current.co_consts if isinstance(const, types.CodeType)]
    assert names == []
