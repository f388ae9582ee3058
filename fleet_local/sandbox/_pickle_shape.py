"""A pickle's shape, read without building what it describes.

Unpickling can cost far more than the pickle's size. A container reused through the memo is
one opcode wherever it appears again, so 265 bytes can describe a tuple of 2**64 leaves (each
level ``(T, T)`` of the one below); using it as a dict key makes the unpickler hash all of
them, in one C call that holds the interpreter's lock. :func:`read_shape` walks the opcodes in
pure Python instead, building a light tree (:class:`Shape` for containers, the values
themselves for scalars) and refusing, before anything is decoded for real:

- more than :data:`MAX_PICKLE_BYTES` bytes or :data:`MAX_OPCODES` opcodes;
- a value of more than ``MAX_ITEMS`` values (a container reused through the memo counts each
  time it is reached, as :func:`~fleet_sdk.verifiers.load_plain`'s check counts them) or
  nested more than ``MAX_DEPTH`` containers deep, at the opcode that makes it so;
- a container changed after the pickle reused it (which is also how a container comes to
  contain itself), and an unhashable dict key or set member;
- any global but the builtins older protocols build plain values with (``set``,
  ``frozenset``, ``complex``), and every opcode that builds objects, imports, or reaches
  outside the pickle (persistent ids, the extension registry, out-of-band buffers).

Nothing read is hashed (the memo is keyed by the pickle's own small indices), nothing is
``repr``'d into a message, and every step is linear in what it reads, so reading a pickle
costs time and memory in proportion to its size. Reading it does not make it safe to unpickle
in a process that must stay responsive: a dict of keys chosen to collide still hashes in
quadratic time (bounded by the counts above), so untrusted pickles are decoded where a CPU
limit applies (the verifier's sandboxed run).

Standard library only: the sandbox child loads this file without importing ``fleet_sdk``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from ._plain_bounds import MAX_DEPTH, MAX_ITEMS, PlainDataError

__all__ = ["MAX_OPCODES", "MAX_PICKLE_BYTES", "Shape", "read_shape"]

MAX_PICKLE_BYTES = 16 * 1024 * 1024
"""The largest pickle read at all."""

MAX_OPCODES = 4 * MAX_ITEMS + 1024
"""At most this many opcodes: a pickle of ``MAX_ITEMS`` plain values needs no more than four
per value (the value, its memo entry, a container's mark and the opcode closing it)."""

_MAX_LINE = 4400
"""The longest argument of a text opcode (protocols 0 and 1): room for the 4,300 digits an int
may have when read from text."""

_MAX_NAME = 100
"""A global's module or name is quoted in a refusal up to this many characters."""

_TRUNCATED = "not a readable pickle: it ends in the middle of an opcode"
_UNDERFLOW = "not a readable pickle: the unpickling stack underflows"
_MISSING = object()


class Shape:
    """A container as the pickle describes it.

    Attributes:
        kind: ``"list"``, ``"tuple"``, ``"dict"``, ``"set"`` or ``"frozenset"``.
        members: Its members in pickle order; a dict's keys and values alternate.
        weight: The values it holds, itself included, each counted every time it is reached.
        height: The containers in its deepest chain of nested containers, itself included.
        hashable: Whether the value could be a dict key.
        reused: The pickle refers to it a second time (memo or ``DUP``); it may not change after.
    """

    __slots__ = ("hashable", "height", "kind", "members", "reused", "weight")

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.members: list[Any] = []
        self.weight = 1
        self.height = 1
        self.hashable = kind in ("tuple", "frozenset")
        self.reused = False

    def add(self, member: Any) -> None:
        """Add ``member``, within the bounds.

        Raises:
            PlainDataError: The container was reused before, or would exceed a bound.
        """
        if self.reused:
            raise PlainDataError(
                f"a {self.kind} in the pickle contains itself, or is changed after the pickle reused it"
            )
        if type(member) is Shape:
            self.weight += member.weight
            if member.height >= self.height:
                self.height = member.height + 1
                if self.height > MAX_DEPTH:
                    raise PlainDataError(f"the value is nested more than {MAX_DEPTH} containers deep")
            if self.kind == "tuple" and not member.hashable:
                self.hashable = False
        else:
            self.weight += 1
            if self.kind == "tuple" and type(member) is bytearray:
                self.hashable = False
        if self.weight > MAX_ITEMS:
            raise PlainDataError(f"more than {MAX_ITEMS} values")
        self.members.append(member)


class _Builder:
    """A builtin an older protocol builds plain values with, as found by a global."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


_BUILDERS = frozenset({"set", "frozenset", "complex"})


def _unwritten(index: int) -> str:
    return f"not a readable pickle: memo entry {index} is read before it is written"


def _kind(value: Any) -> str:
    return value.kind if type(value) is Shape else type(value).__name__


def _hashable(value: Any) -> bool:
    return value.hashable if type(value) is Shape else type(value) is not bytearray


def _quoted(text: str) -> str:
    return text if len(text) <= _MAX_NAME else text[:_MAX_NAME] + "..."


class _Reader:
    """One walk over a pickle's opcodes (:func:`read_shape`)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0
        self.stack: list[Any] = []
        self.marks: list[int] = []
        self.memo: dict[int, Any] = {}
        self.done = False

    # -- reading arguments

    def take(self, size: int) -> bytes:
        end = self.pos + size
        if size < 0 or end > len(self.data):
            raise PlainDataError(_TRUNCATED)
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def unsigned(self, size: int) -> int:
        return int.from_bytes(self.take(size), "little")

    def line(self) -> bytes:
        end = self.data.find(b"\n", self.pos, self.pos + _MAX_LINE + 1)
        if end < 0:
            raise PlainDataError(
                f"not a readable pickle: a text argument at byte {self.pos} is unterminated or longer "
                f"than {_MAX_LINE} bytes"
            )
        text = self.data[self.pos : end]
        self.pos = end + 1
        return text

    def index_line(self) -> int:
        text = self.line()
        if not text.isdigit() or len(text) > 10:
            raise PlainDataError("not a readable pickle: a memo index that is not a small number")
        return int(text)

    # -- the stack

    def push(self, value: Any) -> None:
        self.stack.append(value)

    def pop(self) -> Any:
        if len(self.stack) <= (self.marks[-1] if self.marks else 0):
            raise PlainDataError(_UNDERFLOW)
        return self.stack.pop()

    def peek(self) -> Any:
        if len(self.stack) <= (self.marks[-1] if self.marks else 0):
            raise PlainDataError(_UNDERFLOW)
        return self.stack[-1]

    def top(self, kind: str) -> Shape:
        target = self.peek()
        if type(target) is not Shape or target.kind != kind:
            raise PlainDataError(f"not a readable pickle: a {_kind(target)} is not a {kind} to add to")
        return target

    def pop_mark(self) -> list[Any]:
        if not self.marks:
            raise PlainDataError("not a readable pickle: an opcode needs a MARK that is not there")
        start = self.marks.pop()
        items = self.stack[start:]
        del self.stack[start:]
        return items

    def reuse(self, value: Any) -> None:
        if type(value) is Shape:
            value.reused = True
        self.push(value)

    # -- containers

    def add_key(self, target: Shape, key: Any) -> None:
        if not _hashable(key):
            where = "dict key" if target.kind == "dict" else f"{target.kind} member"
            raise PlainDataError(f"a {_kind(key)} cannot be a {where} (it is not hashable)")
        target.add(key)

    def set_items(self, target: Shape, items: list[Any]) -> None:
        if len(items) % 2:
            raise PlainDataError("not a readable pickle: a dict's keys and values do not pair up")
        for index in range(0, len(items), 2):
            self.add_key(target, items[index])
            target.add(items[index + 1])

    def collection(self, kind: str, items: list[Any]) -> Shape:
        made = Shape(kind)
        if kind == "dict":
            self.set_items(made, items)
        elif kind in ("set", "frozenset"):
            for item in items:
                self.add_key(made, item)
        else:
            for item in items:
                made.add(item)
        return made

    def reduce(self) -> None:
        arguments = self.pop()
        builder = self.pop()
        if type(builder) is not _Builder:
            raise PlainDataError(f"not a readable pickle: REDUCE calls a {_kind(builder)}")
        if type(arguments) is not Shape or arguments.kind != "tuple":
            raise PlainDataError(f"not a readable pickle: REDUCE's arguments are a {_kind(arguments)}")
        values = arguments.members
        if builder.name == "complex":
            if not 1 <= len(values) <= 2 or any(type(v) not in (int, float, bool) for v in values):
                raise PlainDataError("complex() is accepted of one or two numbers only")
            self.push(complex(*values))
            return
        if not values:
            self.push(Shape(builder.name))
            return
        source = values[0]
        if len(values) > 1 or type(source) is not Shape or source.kind == "dict":
            raise PlainDataError(f"{builder.name}() is accepted of one list, tuple or set only")
        self.push(self.collection(builder.name, source.members))

    def find(self, module: str, name: str) -> None:
        # Protocols 0-2 write Python 2's module name; the stock unpickler maps it the same way.
        if module in ("builtins", "__builtin__") and name in _BUILDERS:
            self.push(_Builder(name))
            return
        offending = f"{_quoted(module)}.{_quoted(name)}"
        raise PlainDataError(
            f"the pickle refers to {offending}; only builtin containers and scalars are accepted",
            offending=offending,
        )

    # -- the walk

    def run(self) -> Any:
        handlers = _HANDLERS
        data, stack, memo, marks = self.data, self.stack, self.memo, self.marks
        size = len(data)
        pos = 0
        for _ in range(MAX_OPCODES):
            if pos >= size:
                raise PlainDataError("not a readable pickle: it ends before its STOP opcode")
            code = data[pos]
            pos += 1
            # The opcodes of nearly every value, read here rather than through a handler: a
            # pickle of MAX_ITEMS values then takes a few tenths of a second to read.
            if code in (0x8C, 0x4B):  # SHORT_BINUNICODE, BININT1
                if pos >= size:
                    raise PlainDataError(_TRUNCATED)
                if code == 0x4B:
                    stack.append(data[pos])
                    pos += 1
                    continue
                end = pos + 1 + data[pos]
                if end > size:
                    raise PlainDataError(_TRUNCATED)
                stack.append(data[pos + 1 : end].decode("utf-8", "surrogatepass"))
                pos = end
            elif code == 0x94:  # MEMOIZE
                if len(stack) <= (marks[-1] if marks else 0):
                    raise PlainDataError(_UNDERFLOW)
                memo[len(memo)] = stack[-1]
            elif code == 0x68 and pos < size:  # BINGET
                value = memo.get(data[pos], _MISSING)
                if value is _MISSING:
                    raise PlainDataError(_unwritten(data[pos]))
                pos += 1
                if type(value) is Shape:
                    value.reused = True
                stack.append(value)
            elif code == 0x28:  # MARK
                marks.append(len(stack))
            else:
                handler = handlers.get(code)
                if handler is None:
                    raise PlainDataError(_refusal(code, pos - 1))
                self.pos = pos
                handler(self)
                pos = self.pos
                if self.done:
                    if pos != size:
                        raise PlainDataError("not a readable pickle: data follows its STOP opcode")
                    if len(stack) != 1 or marks:
                        raise PlainDataError("not a readable pickle: its stack does not end with one value")
                    return stack[0]
        raise PlainDataError(f"the pickle has more than {MAX_OPCODES} opcodes")


_Handler = Callable[[_Reader], None]


def _text_int(reader: _Reader) -> None:
    text = reader.line()
    reader.push(False if text == b"00" else True if text == b"01" else int(text))


def _text_long(reader: _Reader) -> None:
    text = reader.line()
    reader.push(int(text[:-1] if text.endswith(b"L") else text))


def _long4(reader: _Reader) -> None:
    (length,) = struct.unpack("<i", reader.take(4))
    if length < 0:
        raise PlainDataError("not a readable pickle: a LONG4 of negative length")
    reader.push(int.from_bytes(reader.take(length), "little", signed=True))


def _tuple(count: int) -> _Handler:
    def handler(reader: _Reader) -> None:
        items = [reader.pop() for _ in range(count)]
        items.reverse()
        reader.push(reader.collection("tuple", items))

    return handler


def _from_mark(kind: str) -> _Handler:
    def handler(reader: _Reader) -> None:
        reader.push(reader.collection(kind, reader.pop_mark()))

    return handler


def _empty(kind: str) -> _Handler:
    def handler(reader: _Reader) -> None:
        reader.push(Shape(kind))

    return handler


def _get(index: Callable[[_Reader], int]) -> _Handler:
    def handler(reader: _Reader) -> None:
        key = index(reader)
        if key not in reader.memo:
            raise PlainDataError(_unwritten(key))
        reader.reuse(reader.memo[key])

    return handler


def _put(index: Callable[[_Reader], int]) -> _Handler:
    def handler(reader: _Reader) -> None:
        key = index(reader)
        reader.memo[key] = reader.peek()

    return handler


def _memoize(reader: _Reader) -> None:
    reader.memo[len(reader.memo)] = reader.peek()


def _pop(reader: _Reader) -> None:
    if reader.stack and len(reader.stack) > (reader.marks[-1] if reader.marks else 0):
        reader.stack.pop()
    else:
        reader.pop_mark()


def _dup(reader: _Reader) -> None:
    reader.reuse(reader.peek())


def _append(reader: _Reader) -> None:
    value = reader.pop()
    reader.top("list").add(value)


def _appends(reader: _Reader) -> None:
    items = reader.pop_mark()
    target = reader.top("list")
    for item in items:
        target.add(item)


def _setitem(reader: _Reader) -> None:
    value = reader.pop()
    key = reader.pop()
    reader.set_items(reader.top("dict"), [key, value])


def _setitems(reader: _Reader) -> None:
    items = reader.pop_mark()
    reader.set_items(reader.top("dict"), items)


def _additems(reader: _Reader) -> None:
    items = reader.pop_mark()
    target = reader.top("set")
    for item in items:
        reader.add_key(target, item)


def _global(reader: _Reader) -> None:
    module = reader.line().decode("utf-8")
    name = reader.line().decode("utf-8")
    reader.find(module, name)


def _stack_global(reader: _Reader) -> None:
    name = reader.pop()
    module = reader.pop()
    if type(module) is not str or type(name) is not str:
        raise PlainDataError("not a readable pickle: STACK_GLOBAL of something other than two strings")
    reader.find(module, name)


def _inst(reader: _Reader) -> None:  # an instance of a class: refused, by the class's name
    module = reader.line().decode("utf-8")
    name = reader.line().decode("utf-8")
    if name not in _BUILDERS:
        reader.find(module, name)
    raise PlainDataError(_refusal(ord("i"), reader.pos))


def _mark(reader: _Reader) -> None:
    reader.marks.append(len(reader.stack))


def _pop_mark(reader: _Reader) -> None:
    reader.pop_mark()


def _reduce(reader: _Reader) -> None:
    reader.reduce()


def _frame(reader: _Reader) -> None:  # a length hint only
    reader.take(8)


def _proto(reader: _Reader) -> None:
    if reader.unsigned(1) > 5:
        raise PlainDataError("not a readable pickle: a protocol newer than 5")


def _stop(reader: _Reader) -> None:
    reader.done = True


def _persistent(reader: _Reader) -> None:
    raise PlainDataError("the pickle uses persistent ids; only builtin containers and scalars are accepted")


def _scalar(read: Callable[[_Reader], Any]) -> _Handler:
    def handler(reader: _Reader) -> None:
        reader.push(read(reader))

    return handler


def _sized(width: int, make: Callable[[bytes], Any]) -> _Handler:
    def handler(reader: _Reader) -> None:
        data, pos = reader.data, reader.pos
        start = pos + width
        end = start + int.from_bytes(data[pos:start], "little")
        if end > len(data):
            raise PlainDataError(_TRUNCATED)
        reader.pos = end
        reader.stack.append(make(data[start:end]))

    return handler


def _utf8(chunk: bytes) -> str:
    return chunk.decode("utf-8", "surrogatepass")


def _ascii(chunk: bytes) -> str:  # Python 2's str, read as the stock unpickler reads it by default
    return chunk.decode("ascii")


_HANDLERS: dict[int, _Handler] = {
    ord("N"): _scalar(lambda reader: None),
    0x88: _scalar(lambda reader: True),
    0x89: _scalar(lambda reader: False),
    ord("J"): _scalar(lambda reader: struct.unpack("<i", reader.take(4))[0]),
    ord("K"): _scalar(lambda reader: reader.unsigned(1)),
    ord("M"): _scalar(lambda reader: reader.unsigned(2)),
    ord("I"): _text_int,
    ord("L"): _text_long,
    0x8A: _sized(1, lambda chunk: int.from_bytes(chunk, "little", signed=True)),
    0x8B: _long4,
    ord("G"): _scalar(lambda reader: struct.unpack(">d", reader.take(8))[0]),
    ord("F"): _scalar(lambda reader: float(reader.line())),
    ord("X"): _sized(4, _utf8),
    0x8C: _sized(1, _utf8),
    0x8D: _sized(8, _utf8),
    ord("V"): _scalar(lambda reader: reader.line().decode("raw-unicode-escape")),
    ord("T"): _sized(4, _ascii),
    ord("U"): _sized(1, _ascii),
    ord("B"): _sized(4, bytes),
    ord("C"): _sized(1, bytes),
    0x8E: _sized(8, bytes),
    0x96: _sized(8, bytearray),
    ord("]"): _empty("list"),
    ord("}"): _empty("dict"),
    ord(")"): _empty("tuple"),
    0x8F: _empty("set"),
    ord("l"): _from_mark("list"),
    ord("d"): _from_mark("dict"),
    ord("t"): _from_mark("tuple"),
    0x91: _from_mark("frozenset"),
    0x85: _tuple(1),
    0x86: _tuple(2),
    0x87: _tuple(3),
    ord("a"): _append,
    ord("e"): _appends,
    ord("s"): _setitem,
    ord("u"): _setitems,
    0x90: _additems,
    ord("("): _mark,
    ord("0"): _pop,
    ord("1"): _pop_mark,
    ord("2"): _dup,
    ord("g"): _get(_Reader.index_line),
    ord("h"): _get(lambda reader: reader.unsigned(1)),
    ord("j"): _get(lambda reader: reader.unsigned(4)),
    ord("p"): _put(_Reader.index_line),
    ord("q"): _put(lambda reader: reader.unsigned(1)),
    ord("r"): _put(lambda reader: reader.unsigned(4)),
    0x94: _memoize,
    ord("c"): _global,
    0x93: _stack_global,
    ord("i"): _inst,
    ord("R"): _reduce,
    ord("P"): _persistent,
    ord("Q"): _persistent,
    0x80: _proto,
    0x95: _frame,
    ord("."): _stop,
}

_REFUSED = {
    ord("b"): "BUILD",
    ord("o"): "OBJ",
    0x81: "NEWOBJ",
    0x92: "NEWOBJ_EX",
    0x82: "EXT1",
    0x83: "EXT2",
    0x84: "EXT4",
    0x97: "NEXT_BUFFER",
    0x98: "READONLY_BUFFER",
    ord("S"): "STRING",
    ord("i"): "INST",
}


def _refusal(code: int, position: int) -> str:
    name = _REFUSED.get(code)
    if name is not None:
        return (
            f"the pickle uses the {name} opcode (byte {position}); "
            "only builtin containers and scalars are accepted"
        )
    return f"not a readable pickle: unknown opcode 0x{code:02x} at byte {position}"


def read_shape(data: bytes) -> Any:
    """The value a pickle describes, as its shape: :class:`Shape` for containers, scalars as they are.

    Args:
        data: The pickle.

    Raises:
        PlainDataError: The pickle is larger or longer than the bounds, describes a value
            ``check_plain`` would refuse (too many values, too deep, a container inside itself,
            anything but builtin containers and scalars) or that could not be built (an
            unhashable key), or is not a readable pickle. The message never quotes the pickle's
            values.
    """
    if len(data) > MAX_PICKLE_BYTES:
        raise PlainDataError(f"the pickle is {len(data)} bytes; at most {MAX_PICKLE_BYTES} are accepted")
    reader = _Reader(bytes(data))
    try:
        return reader.run()
    except PlainDataError:
        raise
    # Every other way a malformed pickle fails (a bad UTF-8 string, a number that is not one, a
    # float too large for complex()): named by its type only, as its text may quote the data.
    except Exception as exc:
        raise PlainDataError(f"not a readable pickle: {type(exc).__name__} at byte {reader.pos}") from None
