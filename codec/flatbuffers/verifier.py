"""A FlatBuffers verifier for the derived schemas: every offset checked before use.

FlatBuffers' Python runtime has no verifier (the C++ one is not exposed): its
accessors trust every offset in the buffer, so a hostile buffer yields garbage,
an `IndexError` or a `struct.error` only when a field is read, deep in the
business logic. `decode` therefore runs this verifier over the whole buffer first,
as flatc's C++ `Verifier` does, and a buffer it passes can be read field by field
with no error: the file identifier (the schema); every offset non-zero (an offset
of 0 points at itself), below 2**31, aligned to 4 and inside the buffer; every
table aligned to 4, its vtable to 2, its size and every field inside it, each
scalar field aligned to its size; every string inside the buffer, NUL-terminated
and valid UTF-8; every vector's length; every required field present; nesting at
most `MAX_DEPTH`.

Work is bounded by the buffer's size whatever it references. Offsets point forward
only, so a cycle cannot be expressed, but a DAG can: 500,000 offsets in 4 MB to one
2 MiB string. So each distinct string is UTF-8-checked once (by its position), and
two budgets are charged per reference: at most one object per 4 bytes of buffer,
and at most `BYTES_PER_BYTE` times the buffer's size (plus `BYTES_FLOOR`) of bytes
a reader touches (a table's size, a string's or vector's bytes, counted on every
reference). Past either, the buffer is refused: what it would make a full read of
the message decode is bounded before anything reads it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Final, Literal

from codec.base import MalformedBuffer

MAX_DEPTH: Final = 64
"""Nested tables allowed (the C++ verifier's default)."""
BYTES_PER_BYTE: Final = 16
"""Bytes a full read may touch per byte of buffer: shared strings (the builder's
`CreateSharedString`) may be read many times over, within reason."""
BYTES_FLOOR: Final = 1 << 20
"""...and 1 MiB whatever the size: a small message may share a string widely."""

Kind = Literal[
    "scalar",
    "string",
    "bytes",
    "table",
    "vec_scalar",
    "vec_string",
    "vec_table",
    "union",
]

_U32: Final = struct.Struct("<I").unpack_from
_I32: Final = struct.Struct("<i").unpack_from
_U16: Final = struct.Struct("<H").unpack_from
_I64: Final = struct.Struct("<q").unpack_from
_MIN_US: Final = -62_135_596_800_000_000
"""0001-01-01T00:00:00Z in microseconds since the epoch (`datetime.min`)."""
_MAX_US: Final = 253_402_300_799_999_999
"""9999-12-31T23:59:59.999999Z (`datetime.max`)."""


class VerifyError(MalformedBuffer):
    """The buffer breaks the schema's layout (the reason, never the bytes)."""


@dataclass(slots=True)
class FieldPlan:
    """One table field: vtable slot, how it is stored, whether it must be present."""

    slot: int
    kind: Kind
    required: bool
    size: int = 4
    table: TablePlan | None = None
    datetime: bool = False
    """An int64 of microseconds since the epoch: it must fit Python's datetime."""
    members: tuple[TablePlan, ...] = ()
    """A union's member tables: its type (a ubyte in the slot before) names one
    from 1, 0 none."""


@dataclass(slots=True)
class TablePlan:
    """The fields of one table, by slot."""

    name: str
    fields: list[FieldPlan] = field(default_factory=list)


class _State:
    __slots__ = ("budget", "buf", "bytes_left", "n", "strings")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.n = len(buf)
        self.budget = self.n // 4 + 8
        self.bytes_left = BYTES_PER_BYTE * self.n + BYTES_FLOOR
        self.strings: set[int] = set()
        """Positions of the strings already checked (NUL and UTF-8)."""


def verify(buf: bytes, root: TablePlan, identifier: bytes) -> None:
    """Check `buf` against `root`'s layout.

    Raises:
        VerifyError: at the first violation.
    """
    if len(buf) < 8:
        raise VerifyError("buffer shorter than a root offset and identifier")
    if buf[4:8] != identifier:
        raise VerifyError("file identifier of another schema")
    state = _State(buf)
    _table(state, _target(state, 0), root, 0)


def _spend(state: _State, touched: int) -> None:
    state.budget -= 1
    if state.budget < 0:
        raise VerifyError("more objects than the buffer can hold")
    state.bytes_left -= touched
    if state.bytes_left < 0:
        raise VerifyError(
            f"references more bytes than {BYTES_PER_BYTE}x the buffer's size"
        )


def _table(state: _State, pos: int, plan: TablePlan, depth: int) -> None:
    if depth > MAX_DEPTH:
        raise VerifyError("tables nested too deep")
    buf, n = state.buf, state.n
    if pos % 4 or pos + 4 > n:
        raise VerifyError(f"{plan.name}: table unaligned or outside the buffer")
    vt = pos - _I32(buf, pos)[0]
    if vt < 0 or vt % 2 or vt + 4 > n:
        raise VerifyError(f"{plan.name}: vtable unaligned or outside the buffer")
    vsize, tsize = _U16(buf, vt)[0], _U16(buf, vt + 2)[0]
    if vsize < 4 or vsize % 2 or vt + vsize > n:
        raise VerifyError(f"{plan.name}: bad vtable size")
    if tsize < 4 or pos + tsize > n:
        raise VerifyError(f"{plan.name}: bad table size")
    _spend(state, tsize)
    for f in plan.fields:
        entry = 4 + 2 * f.slot
        vo = _U16(buf, vt + entry)[0] if entry < vsize else 0
        if f.kind == "union":
            _union(state, (pos, vt, vsize, tsize), f, vo, depth)
            continue
        if vo == 0:
            if f.required:
                raise VerifyError(f"{plan.name}: required field {f.slot} missing")
            continue
        size = f.size if f.kind == "scalar" else 4
        if vo < 4 or vo + size > tsize:
            raise VerifyError(f"{plan.name}: field {f.slot} outside its table")
        if (pos + vo) % size:
            raise VerifyError(f"{plan.name}: field {f.slot} unaligned")
        if f.kind != "scalar":
            _offset_field(state, pos + vo, f, depth)
        elif f.datetime:
            _in_range(_I64(buf, pos + vo)[0])


def _union(
    state: _State,
    table: tuple[int, int, int, int],
    f: FieldPlan,
    vo: int,
    depth: int,
) -> None:
    """A union field: its type in range and agreeing with its value's presence,
    then the member table the type names, as flatc's `VerifyUnion`."""
    pos, vt, vsize, tsize = table
    entry = 2 + 2 * f.slot  # the type's slot, the one before the value's
    to = _U16(state.buf, vt + entry)[0] if entry < vsize else 0
    if to and (to < 4 or to + 1 > tsize):
        raise VerifyError(f"union field {f.slot} type outside its table")
    kind = state.buf[pos + to] if to else 0
    if kind > len(f.members):
        raise VerifyError(f"union field {f.slot} type {kind} names no member")
    if (kind == 0) != (vo == 0):
        raise VerifyError(f"union field {f.slot} type and value disagree")
    if kind == 0:
        if f.required:
            raise VerifyError(f"required union field {f.slot} missing")
        return
    if vo < 4 or vo + 4 > tsize or (pos + vo) % 4:
        raise VerifyError(f"union field {f.slot} outside its table or unaligned")
    _table(state, _target(state, pos + vo), f.members[kind - 1], depth + 1)


def _in_range(micros: int) -> None:
    if not _MIN_US <= micros <= _MAX_US:
        raise VerifyError("a datetime out of range")


def _target(state: _State, at: int) -> int:
    """Where the offset stored at `at` points, checked as flatc's `VerifyOffset`:
    stored aligned, non-zero, below 2**31, the target inside the buffer."""
    if at % 4 or at + 4 > state.n:
        raise VerifyError("offset unaligned or outside the buffer")
    offset: int = _U32(state.buf, at)[0]
    if offset == 0:
        raise VerifyError("offset of 0 (pointing at itself)")
    if offset >= 1 << 31 or at + offset + 4 > state.n:
        raise VerifyError("offset outside the buffer")
    return at + offset


def _vector(state: _State, at: int, item_size: int) -> tuple[int, int]:
    target = _target(state, at)
    if target % 4:
        raise VerifyError("vector or string unaligned")
    length = _U32(state.buf, target)[0]
    if target + 4 + length * item_size > state.n:
        raise VerifyError("vector longer than the buffer")
    _spend(state, 4 + length * item_size)
    return target + 4, length


def _string(state: _State, at: int) -> None:
    start, length = _vector(state, at, 1)
    if start in state.strings:  # shared: checked once, charged every time
        return
    end = start + length
    if end >= state.n or state.buf[end] != 0:
        raise VerifyError("string without its NUL terminator")
    try:
        state.buf[start:end].decode("utf-8")
    except UnicodeDecodeError:
        raise VerifyError("string is not valid UTF-8") from None
    state.strings.add(start)


def _offset_field(state: _State, at: int, f: FieldPlan, depth: int) -> None:
    kind = f.kind
    if kind == "string":
        _string(state, at)
    elif kind == "bytes":
        _vector(state, at, 1)
    elif kind == "vec_scalar":
        start, length = _vector(state, at, f.size)
        if f.datetime:
            for (micros,) in struct.iter_unpack(
                "<q", state.buf[start : start + 8 * length]
            ):
                _in_range(micros)
    elif kind == "table":
        _table(state, _target(state, at), _plan(f), depth + 1)
    else:
        start, length = _vector(state, at, 4)
        for i in range(length):
            item = start + 4 * i
            if kind == "vec_string":
                _string(state, item)
            else:
                _table(state, _target(state, item), _plan(f), depth + 1)


def _plan(f: FieldPlan) -> TablePlan:
    if f.table is None:
        raise VerifyError("a table field without a plan")
    return f.table
