"""Reading a pickle's shape without building it (``fleet_local/sandbox/_pickle_shape.py``).

The shape of every plain value, in every protocol, is the value the unpickler builds; what the
unpickler would take exponential time (or fail) to build is refused from the opcodes alone, with a
message that quotes none of the pickle's values.
"""

from __future__ import annotations

import datetime
import pickle
from typing import Any

import pytest
from _pickles import colliding_int_keys, memo_dag

from fleet_local.sandbox import PickledArguments, PlainDataError, load_plain
from fleet_local.sandbox._pickle_shape import MAX_OPCODES, MAX_PICKLE_BYTES, Shape, read_shape
from fleet_local.sandbox._plain_pickle import MAX_ITEMS, check_plain

_BUILD = {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}


def built(shape: Any) -> Any:
    """The value a shape stands for (only for shapes of trusted pickles: this hashes)."""
    if type(shape) is not Shape:
        return shape
    members = [built(member) for member in shape.members]
    if shape.kind == "dict":
        return dict(zip(members[::2], members[1::2], strict=True))
    return _BUILD[shape.kind](members)


def values_in(value: Any) -> int:
    """Values reached in ``value``, each time it is reached (as the bounds count them)."""
    if isinstance(value, dict):
        return 1 + sum(values_in(k) + values_in(v) for k, v in value.items())
    if isinstance(value, list | tuple | set | frozenset):
        return 1 + sum(values_in(member) for member in value)
    return 1


SHARED = [1, "two"]
PLAIN: dict[str, Any] = {
    "args": (None, "42", [1, 2.5, None, True, -(2**70)], {"env": "inst_1"}),
    "kwargs": {
        "final_answer": "x" * 300,
        "s": {1, 2, (3, "t")},
        "f": frozenset({"a"}),
        "c": 1 - 2j,
        "nested": {"a": [[[]]], "b": ((), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4))},
        "twice": [SHARED, SHARED, "two", "two"],  # reused through the memo: counted twice
        "unicode": "é\u20ac\U0001f600",
    },
}


@pytest.mark.parametrize("protocol", range(2, pickle.HIGHEST_PROTOCOL + 1))
def test_the_shape_of_plain_data_is_what_the_unpickler_builds(protocol: int) -> None:
    value = {
        **PLAIN,
        "kwargs": {**PLAIN["kwargs"], **({"b": b"\xff", "big": 2**5000} if protocol >= 3 else {})},
    }
    if protocol >= 5:
        value["kwargs"]["ba"] = bytearray(b"z")
    data = pickle.dumps(value, protocol=protocol)
    shape = read_shape(data)
    assert built(shape) == pickle.loads(data) == load_plain(data)
    assert shape.weight == values_in(value)
    assert PickledArguments.read(data) == PickledArguments(data, 1, 3, True, "inst_1")


def test_the_memo_dag_is_refused_from_its_opcodes() -> None:
    """A 265-byte pickle of a 64-level tuple DAG (each level ``(T, T)`` through the memo) used as a
    dict key made the server's unpickler hash 2**64 leaves while holding the interpreter's lock:
    every route stopped answering for good. Its shape exceeds the value count at level 17."""
    bomb = memo_dag(64)
    with pytest.raises(PlainDataError, match=f"more than {MAX_ITEMS} values"):
        read_shape(bomb)
    with pytest.raises(PlainDataError, match=f"more than {MAX_ITEMS} values"):
        load_plain(bomb)  # reads the shape first: after the assertion above, this cannot hang
    assert built(read_shape(memo_dag(10))) == pickle.loads(memo_dag(10))  # small ones are plain data


def test_check_plain_makes_no_repr_of_what_it_walks() -> None:
    """An int key of more than 4,300 digits made ``check_plain`` fail with a ValueError (a 500 on
    the keyless manager route): it built ``repr(key)`` for every key, in case it had to complain."""
    check_plain({10**5000: [1, 2]})
    with pytest.raises(PlainDataError, match=r"the value\[<int>\]\[1\] is a datetime\.date"):
        check_plain({10**5000: [1, datetime.date(2026, 1, 1)]})


def op(code: str, arg: bytes = b"") -> bytes:
    return bytes([int(code, 16)]) + arg


def frame(*ops: bytes) -> bytes:
    return b"\x80\x05" + b"".join(ops) + b"."


@pytest.mark.parametrize(
    ("data", "message"),
    [
        # An empty list, reused (BINGET), then appended to: it would contain itself.
        (frame(b"]", b"\x94", b"h\x00", b"a"), "contains itself, or is changed after the pickle reused it"),
        # A list reused by DUP inside a tuple, then changed: the tuple's count of values would be stale.
        (frame(b"]", b"2", b"\x85", b"0", b"N", b"a"), "changed after the pickle reused it"),
        (frame(b"h\x00"), "memo entry 0 is read before it is written"),
        (frame(b"}", b"]", b"N", b"s"), "a list cannot be a dict key"),
        (frame(b"\x8f", b"(", b"]", b"\x85", b"\x90"), "a tuple cannot be a set member"),
        (frame(b"N", b"N"), "its stack does not end with one value"),
        (frame(b"N") + b"trailing", "data follows its STOP opcode"),
        (b"\x80\x05X\xff\xff\xff\x7fabc.", "ends in the middle of an opcode"),
        (b"\x80\x05X\x01\x00\x00\x00\xff.", "not a readable pickle: UnicodeDecodeError at byte"),
        (frame(b"\x8c\x08datetime\x8c\x04date\x93"), "refers to datetime.date"),
        (frame(b"cos\nsystem\n"), "refers to os.system"),
        (frame(b"(ibuiltins\nset\n"), "uses the INST opcode"),
        (frame(b"Pid\n"), "persistent ids"),
        (frame(b"\x82\x01"), "uses the EXT1 opcode"),
        (frame(b"\x97"), "uses the NEXT_BUFFER opcode"),
        (frame(b"\x8c\x08builtins\x8c\x07complex\x93", b"\x8c\x011", b"\x85", b"R"), "complex() is accepted"),
        (frame(b"\x8c\x08builtins\x8c\x03set\x93", b"\x8c\x03abc", b"\x85", b"R"), "set() is accepted"),
        (frame(b"L" + b"9" * 5000 + b"L\n"), "longer than 4400 bytes"),
        (frame(b"I" + b"9" * 4400 + b"\n"), "not a readable pickle: ValueError"),
        (b"\x80\x06N.", "a protocol newer than 5"),
        (b"not a pickle", "not a readable pickle: unknown opcode 0x6e at byte 0"),
    ],
)
def test_what_the_unpickler_could_not_build_is_refused_by_name(data: bytes, message: str) -> None:
    with pytest.raises(PlainDataError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_shape(data)
    with pytest.raises(PlainDataError):
        load_plain(data)


def test_a_refusal_never_quotes_the_pickles_values() -> None:
    secret = "s3cr3t-" * 10
    refused = [
        pickle.dumps({secret: datetime.date(2026, 1, 1)}, protocol=5),
        pickle.dumps({"args": (None,), "kwargs": {(secret,): 1}}, protocol=5),
        pickle.dumps({"args": secret, "kwargs": {}}, protocol=5),
        b"\x80\x05X\x08\x00\x00\x00" + secret.encode()[:7] + b"\xff.",
    ]
    for data in refused:
        with pytest.raises(PlainDataError) as caught:
            PickledArguments.read(data)
        assert "s3cr3t" not in str(caught.value)


def test_the_pickle_is_bounded_in_bytes_and_opcodes() -> None:
    with pytest.raises(PlainDataError, match=f"at most {MAX_PICKLE_BYTES}"):
        read_shape(b"\x80\x05" + b"N0" * (MAX_PICKLE_BYTES // 2) + b"N.")
    with pytest.raises(PlainDataError, match=f"more than {MAX_OPCODES} opcodes"):
        read_shape(b"\x80\x05" + b"(1" * MAX_OPCODES + b"N.")  # marks pushed and dropped: no value at all


def test_colliding_keys_pass_the_shape_and_are_left_to_the_sandbox() -> None:
    """Keys that all hash alike are plain data of a legal size; building them is quadratic, which
    is why the server never unpickles arguments and the sandboxed run (with its CPU limit) does."""
    read = PickledArguments.read(colliding_int_keys(2000))
    assert (read.start, read.stop, read.has_kwargs, read.instance_id) == (1, 2, False, None)
    assert len(load_plain(colliding_int_keys(2000))["args"][1]) == 2000


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (["a", "list"], 'expected a pickled {"args": [...], "kwargs": {...}}, got list'),
        ({"args": (), "other": 1}, "got a dict with a str key other than those"),
        ({"args": "text", "kwargs": {}}, '"args" must be a tuple or list and "kwargs" a dict'),
        ({"args": (), "kwargs": [1]}, '"args" must be a tuple or list and "kwargs" a dict'),
        ({"args": (None,), "kwargs": {10**5000: "x"}}, "keyword argument names must be strings, not int"),
    ],
)
def test_the_public_sdks_form_is_checked_from_the_shape(value: Any, message: str) -> None:
    with pytest.raises(PlainDataError) as caught:
        PickledArguments.read(pickle.dumps(value, protocol=5))
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((None, "a", {"env": "i"}), (1, 2, "i")),
        (("a", {"env": "i"}), (0, 1, "i")),
        ((None,), (1, 1, None)),
        ((None, {"env": 3}), (1, 2, None)),  # not an instance id: an argument like any other
        ((None, {"env": "i", "x": 1}), (1, 2, None)),
        ((), (0, 0, None)),
    ],
)
def test_the_env_stand_in_and_the_instance_entry_are_found(
    args: tuple[Any, ...], expected: tuple[int, int, str | None]
) -> None:
    read = PickledArguments.read(pickle.dumps({"args": args, "kwargs": {}}, protocol=5))
    assert (read.start, read.stop, read.instance_id) == expected
    assert read.empty is (expected[0] == expected[1])
