"""Hostile pickles, written opcode by opcode (``pickle.dumps`` cannot make them, or not in time).

The public SDK sends a verifier's arguments as base64 of a pickle (schemas/env-instance.yaml,
``VerifiersExecuteRequest.args``); these are what an attacker sends instead.
"""

from __future__ import annotations

import base64

__all__ = ["as_args", "colliding_int_keys", "memo_dag"]

PROTO_5 = b"\x80\x05"
EMPTY_DICT, EMPTY_TUPLE, MEMOIZE, TUPLE2 = b"}", b")", b"\x94", b"\x86"
NONE, SETITEM, STOP, MARK, SETITEMS = b"N", b"s", b".", b"(", b"u"
MERSENNE_61 = 2**61 - 1
"""Python hashes an int ``n`` as ``n mod (2**61 - 1)``: every multiple of it hashes to 0."""


def memo_dag(levels: int = 64) -> bytes:
    """A dict whose one key is a tuple DAG of ``levels`` levels built through the memo.

    Level ``i + 1`` is ``(T_i, T_i)``: ``BINGET i``, ``TUPLE2``, ``MEMOIZE``, four bytes a level,
    265 bytes at 64 levels. Unpickled, ``SETITEM`` hashes the key's 2**64 leaves in one C call
    holding the interpreter's lock (and ``repr`` of it is as long).
    """
    out = bytearray(PROTO_5 + EMPTY_DICT + MEMOIZE + EMPTY_TUPLE + MEMOIZE)  # memo 0: the dict, 1: ()
    for level in range(levels):
        out += b"h" + bytes([level + 1]) + TUPLE2 + MEMOIZE
    return bytes(out + NONE + SETITEM + STOP)


def colliding_int_keys(count: int) -> bytes:
    """``{"args": (None, {k: 0 for k in keys}), "kwargs": {}}`` with ``count`` int keys that all hash
    to 0: building the dict compares each key with every one before it (quadratic; 20,000 keys
    take seconds), within the bounds a pickle's shape is checked against."""
    out = bytearray(PROTO_5 + EMPTY_DICT + b"\x8c\x04args" + NONE + EMPTY_DICT + MARK)
    for i in range(1, count + 1):
        key = (i * MERSENNE_61).to_bytes(((i * MERSENNE_61).bit_length() + 8) // 8, "little", signed=True)
        out += b"\x8a" + bytes([len(key)]) + key + b"K\x00"  # LONG1 key, BININT1 0
    out += SETITEMS + TUPLE2 + SETITEM + b"\x8c\x06kwargs" + EMPTY_DICT + SETITEM
    return bytes(out + STOP)


def as_args(data: bytes) -> str:
    """The ``args`` field carrying ``data``."""
    return base64.b64encode(data).decode("ascii")
