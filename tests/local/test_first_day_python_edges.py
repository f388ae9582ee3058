"""What a newcomer met on the first day in Python, one test per rough edge.

Each was a real report: a misspelt environment key listed no tasks (``[]``, as if it had none), a
misspelt task key got a bare 404, ``TaskEnv("<task key>")`` answered pydantic's "Input should be
a valid dictionary", an assistant message without its ``role`` was told about native action
keys, an Anthropic ``tool_use`` block without ``id`` or ``input`` was run silently, and the
process-group watchdog outlived ``LocalFleet`` until the script exited.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from _waits import PATIENCE

from fleet_sdk import ActionError, EnvNotFoundError, Fleet, NotFoundError
from fleet_sdk.actions import parse_action
from fleet_sdk.task_env import TaskEnv


def test_tasks_of_a_misspelt_env_key_raise_with_the_closest_key(fleet: Fleet) -> None:
    with pytest.raises(EnvNotFoundError) as raised:
        fleet.tasks.list(env_key="ordrdesk")
    assert "did you mean 'orderdesk'?" in str(raised.value)
    assert raised.value.status_code == 404


def test_an_env_without_matching_tasks_is_still_an_empty_list(fleet: Fleet) -> None:
    """Only an unknown environment raises; a known one whose filter matches nothing is []."""
    assert fleet.tasks.list(env_key="orderdesk", task_keys=["calendar-count-tuesday-meetings"]) == []
    assert fleet.tasks.list(env_key="orderdesk")  # and the key itself is fine


def test_a_misspelt_task_key_names_the_closest_one(fleet: Fleet) -> None:
    with pytest.raises(NotFoundError) as raised:
        fleet.tasks.get("orderdesk-count-pending-order")
    assert "did you mean 'orderdesk-count-pending-orders'?" in str(raised.value)
    assert raised.value.status_code == 404


def test_task_env_given_a_task_key_points_at_tasks_get() -> None:
    with pytest.raises(TypeError) as raised:
        TaskEnv("orderdesk-count-pending-orders")  # type: ignore[arg-type]
    message = str(raised.value)
    assert "fleet.tasks.get('orderdesk-count-pending-orders')" in message
    assert "valid dictionary" not in message


def test_tool_calls_without_a_role_name_the_missing_role() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "list_orders", "arguments": "{}"}}
    with pytest.raises(ActionError) as raised:
        parse_action({"content": None, "tool_calls": [call]})
    assert raised.value.field == "message.role"
    assert "'role': 'assistant'" in str(raised.value)
    with pytest.raises(ActionError) as blocks:
        parse_action({"content": [{"type": "text", "text": "hi"}]})
    assert blocks.value.field == "message.role"


@pytest.mark.parametrize("missing", ["id", "input"])
def test_a_tool_use_block_without_id_or_input_is_refused_naming_it(missing: str) -> None:
    block = {"type": "tool_use", "id": "toolu_1", "name": "list_orders", "input": {}}
    del block[missing]
    with pytest.raises(ActionError) as raised:
        parse_action(block)
    assert raised.value.field == f"tool_use.{missing}"
    message = {"role": "assistant", "content": [block]}
    with pytest.raises(ActionError) as inside:
        parse_action(message)
    assert inside.value.field == f"message.content[0].{missing}"


def test_a_tool_use_block_with_an_empty_id_is_refused() -> None:
    with pytest.raises(ActionError) as raised:
        parse_action({"type": "tool_use", "id": "", "name": "list_orders", "input": {}})
    assert raised.value.field == "tool_use.id"


WATCHDOG_SCRIPT = textwrap.dedent(
    """
    import os, sys
    from fleet_local import LocalFleet
    from fleet_local.sandbox import _process_groups as process_groups

    with LocalFleet():
        watchdog = process_groups._GUARD._watchdog
        assert watchdog is not None and watchdog.poll() is None, "no watchdog while serving"
        pid = watchdog.pid
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        print("gone")
    else:
        print("alive")
    sys.stdout.flush()
    """
)


def test_the_group_watchdog_ends_with_local_fleet() -> None:
    """The script checks, after ``LocalFleet`` stopped and before it exits itself, that the
    watchdog process is gone (reaped, so not even a zombie)."""
    result = subprocess.run(
        [sys.executable, "-c", WATCHDOG_SCRIPT],
        capture_output=True,
        text=True,
        timeout=PATIENCE,
        env=os.environ.copy(),
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "gone"
