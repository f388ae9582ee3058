"""A raising verifier's ``error.type`` is the exception's class name, as the platform reports it.

The server answered ``"exception"``; the public SDK reads ``error.type`` as the Python class to
re-raise (``fleet.verifiers.verifier``), and so do users' dashboards that group failures by it.
Our own SDK keeps its fault kind (``type == "exception"``) and the class in ``exception_type``
(the wire itself: ``tests/local/test_control_plane.py::test_verifier_faults_are_structured``).
"""

from __future__ import annotations

from fleet_sdk import AsyncFleet
from fleet_sdk.remote_verifier import run_remote

RAISES = "def verify(env, final_answer=None):\n    raise KeyError('row_id')\n"


async def test_the_wire_names_the_raised_class_and_the_sdk_keeps_its_kind(afleet: AsyncFleet) -> None:
    async with await afleet.make("orderdesk") as env:
        outcome = await run_remote(afleet, RAISES, key="raises", instance_id=env.instance_id)
    assert outcome.error is not None
    assert (outcome.error.type, outcome.error.exception_type) == ("exception", "KeyError")
    assert outcome.error.wire_type == "KeyError"
    assert outcome.error.message.startswith("KeyError: 'row_id'")


async def test_a_fault_that_is_not_a_raise_keeps_its_kind(afleet: AsyncFleet) -> None:
    async with await afleet.make("orderdesk") as env:
        outcome = await run_remote(
            afleet, "def verify(env)\n    return 1\n", key="broken", instance_id=env.instance_id
        )
    assert outcome.error is not None
    assert (outcome.error.type, outcome.error.exception_type, outcome.error.wire_type) == (
        "syntax_error",
        None,
        "syntax_error",
    )
