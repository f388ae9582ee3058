"""The request gate's nesting and value-count checks still refuse every body that breaks them,
though it no longer walks a body too short to break them.

A container at nesting level ``MAX_JSON_DEPTH + 1`` needs that many opening and closing
brackets, and every JSON value at least one byte, so the walks are skipped below those sizes
(most requests: every MCP call). These pin the boundaries: the shortest too-deep body is
refused, one level less passes, and a body just over the value limit is refused.
"""

from __future__ import annotations

from fleet_local._manager import MANAGER_PREFIX
from fleet_local._validation import MAX_JSON_VALUES, load_body_schemas
from fleet_sdk.protocol import MAX_JSON_DEPTH

MCP = "/instances/inst_1/mcp"  # a path with no schema operation: only the generic checks


def test_the_shortest_too_deep_body_is_refused_and_one_level_less_passes() -> None:
    bodies = load_body_schemas({"instance-manager": MANAGER_PREFIX})
    deepest_allowed = b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH
    too_deep = b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1)
    assert len(too_deep) == 2 * (MAX_JSON_DEPTH + 1)
    refused = bodies.check("POST", MCP, too_deep)
    assert refused.value is None and refused.issues[0]["type"] == "too_deep"
    passed = bodies.check("POST", MCP, deepest_allowed)
    assert passed.issues == [] and passed.value is not None
    # The same with objects, and in UTF-16 (two bytes a character: longer, still refused).
    nested_objects = b'{"a":' * (MAX_JSON_DEPTH + 1) + b"1" + b"}" * (MAX_JSON_DEPTH + 1)
    assert bodies.check("POST", MCP, nested_objects).issues[0]["type"] == "too_deep"
    assert bodies.check("POST", MCP, too_deep.decode().encode("utf-16")).issues[0]["type"] == "too_deep"


def test_a_body_just_over_the_value_limit_is_refused() -> None:
    bodies = load_body_schemas({"instance-manager": MANAGER_PREFIX})
    # MAX_JSON_VALUES zeros and their array: one value over the limit.
    over = b"[" + b",".join([b"0"] * MAX_JSON_VALUES) + b"]"
    checked = bodies.check("POST", MCP, over)
    assert checked.too_large and checked.issues[0]["type"] == "too_many_values"
    at_limit = b"[" + b",".join([b"0"] * (MAX_JSON_VALUES - 1)) + b"]"
    assert bodies.check("POST", MCP, at_limit).issues == []
