"""The public SDK's pickled arguments, decoded by the sandboxed run itself (``pickled_args``).

The process that receives the pickle only reads its shape (``PickledArguments.read``); the run's
child decodes it under the run's limits, so what is costly to decode costs the run, and what cannot
be decoded there is a :class:`PlainDataError` (the verifier never runs).
"""

from __future__ import annotations

import pickle
import sys

import pytest
from _pickles import colliding_int_keys

from fleet_local.sandbox import PickledArguments, PlainDataError, SandboxError, run_sandboxed_sync

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox child is tested on Linux")

ECHO = """
def verify(env, *args, final_answer=None, **extra):
    kinds = {name: type(value).__name__ for name, value in extra.items()}
    return {"score": 1, "args": [type(a).__name__ for a in args], "answer": final_answer, "kinds": kinds}
"""


def test_pickled_arguments_reach_the_verifier_in_their_own_types(databases: dict[str, str]) -> None:
    call = {
        "args": (None, (1, 2), {3}, b"\x00", {"env": "inst_1"}),
        "kwargs": {"final_answer": "42", "tags": frozenset({"a"}), "number": 2j},
    }
    pickled = PickledArguments.read(pickle.dumps(call, protocol=5))
    outcome = run_sandboxed_sync(ECHO, databases=databases, pickled_args=pickled)
    assert outcome.score == 1.0, outcome.error
    assert outcome.result == {
        "score": 1,
        "args": ["tuple", "set", "bytes"],
        "answer": "42",
        "kinds": {"tags": "frozenset", "number": "complex"},
    }


def test_a_pickle_the_run_cannot_decode_is_refused_and_nothing_runs(databases: dict[str, str]) -> None:
    """Only :meth:`PickledArguments.read` makes these; one made otherwise is still decoded (and
    refused) in the run, never in this process."""
    unreadable = PickledArguments(b"\x80\x05cos\nsystem\n.", 0, 0, True, None)
    with pytest.raises(PlainDataError, match=r"refers to os\.system"):
        run_sandboxed_sync(
            "def verify(env):\n    print('ran')\n    return 1\n", databases=databases, pickled_args=unreadable
        )


def test_pickled_arguments_go_alone(databases: dict[str, str]) -> None:
    pickled = PickledArguments.read(pickle.dumps({"args": (None, 1), "kwargs": {}}, protocol=5))
    with pytest.raises(SandboxError, match="pickled_args go alone"):
        run_sandboxed_sync(ECHO, databases=databases, pickled_args=pickled, final_answer="x")
    with pytest.raises(SandboxError, match="pickled_args go alone"):
        run_sandboxed_sync(ECHO, databases=databases, pickled_args=pickled, args=[1])


def test_keys_that_collide_cost_the_run_its_time_not_the_caller(databases: dict[str, str]) -> None:
    """40,000 int keys hashing alike take about 20 s of one C call to unpickle, holding the
    interpreter's lock; their shape is within the bounds. The run decodes them, and its limits
    stop it."""
    pickled = PickledArguments.read(colliding_int_keys(40_000))
    outcome = run_sandboxed_sync(ECHO, databases=databases, pickled_args=pickled, timeout=2)
    assert outcome.error is not None and outcome.error.type == "timeout", outcome
