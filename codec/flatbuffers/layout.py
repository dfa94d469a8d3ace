"""How each field of a derived FlatBuffers schema is stored, read and written.

One `Slot` per field: its vtable slot, its storage kind (for the verifier), the
flatc-generated accessor that reads it and the converter to the Python value the
other codecs hold, and the builder call that writes it. A UUID, Decimal, address
or URL is stored as its text and read back as `uuid.UUID`, `Decimal` or the
user's type (`Foreign.text`), converted as
`schemas.compare.FROM_TEXT` converts protobuf's: text that is not one stays text
(FlatBuffers, like protobuf, does not check it; `codec-schema check` says so).
"""

from __future__ import annotations

import datetime
import struct
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Final

from codec.flatbuffers.verifier import FieldPlan, Kind, TablePlan
from schemas.compare import FROM_TEXT
from schemas.derive.fbs_schema import FbsForm, camel, scalar_type
from schemas.shape import (
    Choice,
    FieldShape,
    Foreign,
    ListOf,
    MapOf,
    MessageShape,
    Scalar,
    TypeShape,
    UnionOf,
    messages,
)

SIZES: Final = {"long": 8, "ulong": 8, "double": 8, "int": 4, "uint": 4, "bool": 1}
NUMPY: Final = {
    "long": "<i8",
    "ulong": "<u8",
    "double": "<f8",
    "int": "<i4",
    "uint": "<u4",
    "bool": "bool",
}
PREPEND: Final = {
    "long": "PrependInt64Slot",
    "ulong": "PrependUint64Slot",
    "double": "PrependFloat64Slot",
    "int": "PrependInt32Slot",
    "uint": "PrependUint32Slot",
    "bool": "PrependBoolSlot",
}
_U32: Final = struct.Struct("<I").unpack_from
EPOCH: Final = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_MICRO: Final = datetime.timedelta(microseconds=1)
_NAIVE_EPOCH: Final = EPOCH.replace(tzinfo=None)


def from_micros(value: int) -> datetime.datetime:
    """A `datetime` field's stored microseconds as an aware UTC datetime."""
    return EPOCH + datetime.timedelta(microseconds=value)


def from_local_micros(value: int) -> datetime.datetime:
    """A naive-only field's stored wall-clock microseconds as a naive datetime."""
    return _NAIVE_EPOCH + datetime.timedelta(microseconds=value)


def micros_reader(shape: TypeShape) -> Callable[[int], datetime.datetime]:
    """`from_micros`, or `from_local_micros` for a field that must be naive.

    A naive datetime is stored as its wall-clock time (`to_micros` takes it as
    UTC) and read back naive, so a model that refuses aware datetimes gets its own
    value back; any other datetime is an instant, read back aware in UTC.
    """
    naive = isinstance(shape, Scalar) and shape.constraints.tz is False
    return from_local_micros if naive else from_micros


def to_micros(value: datetime.datetime) -> int:
    """An aware (or UTC-naive) datetime as microseconds since the epoch."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=datetime.UTC)
    return (value - EPOCH) // _MICRO


@dataclass(frozen=True, slots=True)
class Slot:
    """One field of one table.

    Attributes:
        name: the field's name (the view's attribute, the Struct's field).
        slot: its vtable slot (declaration order).
        fb: its FlatBuffers type (`long`, `string`, `[double]`, a table name...).
        shape: its value's shape (for maps, the map).
        nullable: None is a value of it.
        accessor: flatc's accessor name (`CustomerId`).
        entry: for a map, its entry table's name.
    """

    name: str
    slot: int
    fb: str
    shape: TypeShape
    nullable: bool
    accessor: str
    entry: str = ""


def slots_of(msg: MessageShape, form: FbsForm) -> list[Slot]:
    """The slots of message `msg`'s table.

    A union field takes two vtable slots, its type (a ubyte, the member's index
    from 1; 0 is none) then its value: its `Slot` is the value's, the type's the
    one before it.
    """
    out = []
    n = 0
    for f in msg.fields:
        entry = form.entries.get((id(msg), f.name), "")
        if isinstance(f.type, UnionOf):
            n += 1
            fb = form.unions[id(f.type)]
        else:
            fb = f"[{entry}]" if entry else _fb(f.type, form)
        out.append(Slot(f.name, n, fb, f.type, f.nullable, camel(f.name), entry))
        n += 1
    return out


def entry_slots(m: MapOf, form: FbsForm) -> list[Slot]:
    """The `key` and `value` slots of a map's entry table."""
    return [
        Slot("key", 0, _fb(m.key, form), m.key, False, "Key"),
        Slot("value", 1, _fb(m.value, form), m.value, False, "Value"),
    ]


def _fb(shape: TypeShape, form: FbsForm) -> str:
    if isinstance(shape, MessageShape):
        return form.tables[id(shape)]
    if isinstance(shape, ListOf):
        return f"[{_fb(shape.item, form)}]"
    if isinstance(shape, Scalar | Choice):
        return scalar_type(shape)
    if isinstance(shape, Foreign):  # an address, a URL: its text
        return "string"
    raise AssertionError("maps in lists are refused by the form")


def kind_of(fb: str) -> tuple[Kind, int]:
    """The verifier's storage kind of FlatBuffers type `fb`, and its item size."""
    if fb in SIZES:
        return "scalar", SIZES[fb]
    if fb == "string":
        return "string", 4
    if fb == "[ubyte]":
        return "bytes", 1
    if fb == "[string]":
        return "vec_string", 4
    if fb.startswith("["):
        inner = fb[1:-1]
        return ("vec_scalar", SIZES[inner]) if inner in SIZES else ("vec_table", 4)
    return "table", 4


def table_plans(root: MessageShape, form: FbsForm) -> TablePlan:
    """The verifier's plan of `root`'s table and every table it reaches."""
    plans: dict[str, TablePlan] = {}
    maps: list[tuple[str, MapOf]] = []
    for msg in messages(root):
        plans[msg.name] = TablePlan(msg.name)
        maps.extend(
            (s.entry, s.shape)
            for s in slots_of(msg, form)
            if s.entry and isinstance(s.shape, MapOf)
        )
    for entry, _ in maps:
        plans[entry] = TablePlan(entry)
    for msg in messages(root):
        _fill(plans[msg.name], slots_of(msg, form), plans)
    for entry, m in maps:
        _fill(plans[entry], entry_slots(m, form), plans)
    return plans[root.name]


def _fill(plan: TablePlan, slots: list[Slot], plans: dict[str, TablePlan]) -> None:
    for s in slots:
        if isinstance(s.shape, UnionOf):
            members = tuple(plans[_table_of(m).name] for m in s.shape.members)
            plan.fields.append(
                FieldPlan(s.slot, "union", not s.nullable, members=members)
            )
            continue
        kind, size = kind_of(s.fb)
        table = plans.get(s.fb.strip("[]")) if kind in ("table", "vec_table") else None
        required = not s.nullable and kind != "scalar"
        shape = s.shape.item if isinstance(s.shape, ListOf) else s.shape
        dt = isinstance(shape, Scalar) and shape.kind == "datetime"
        plan.fields.append(FieldPlan(s.slot, kind, required, size, table, dt))


def _table_of(shape: TypeShape) -> MessageShape:
    if not isinstance(shape, MessageShape):
        raise TypeError("a FlatBuffers union holds tables only")
    return shape


def union_reader(
    s: Slot, cls: type, modules: dict[str, ModuleType], views: list[Any]
) -> Callable[[Any], Any]:
    """A union field as the view of the member its type names (None: none).

    `views` are the members' view classes, in member order (type 1 is the first).
    """
    assert isinstance(s.shape, UnionOf)  # noqa: S101  (a union slot)
    kind_of_value = getattr(cls, s.accessor + "Type")
    table = getattr(cls, s.accessor)
    classes = [table_class(modules, _table_of(m).name) for m in s.shape.members]
    members = list(zip(classes, views, strict=True))

    def read(r: Any) -> Any:
        t = kind_of_value(r)
        if not t:
            return None
        member_cls, view = members[t - 1]  # the verifier checked the type
        found = table(r)
        obj = member_cls()
        obj.Init(found.Bytes, found.Pos)
        return view(obj)

    return read


def reader(
    s: Slot,
    cls: type,
    view: Callable[[Any], Any] | None,
    entry: Callable[[Any], tuple[Any, Any]] | None,
) -> Callable[[Any], Any]:
    """A function of a generated table object returning field `s` as Python values.

    `view` wraps a nested table (its view class); `entry` reads a map entry.
    """
    acc = getattr(cls, s.accessor)
    kind, _ = kind_of(s.fb)
    dt = isinstance(s.shape, Scalar) and s.shape.kind == "datetime"
    is_none = getattr(cls, s.accessor + "IsNone", None)
    if kind == "scalar":
        if dt:
            when = micros_reader(s.shape)
            return lambda r: None if (v := acc(r)) is None else when(v)
        scalar: Callable[[Any], Any] = acc
        return scalar
    text = _from_text(s.shape)
    if kind == "string":
        if text is not None:
            return lambda r: None if (v := acc(r)) is None else text(v.decode())
        return lambda r: None if (v := acc(r)) is None else v.decode()
    if kind == "table":
        wrap = _need(view)
        return lambda r: None if (v := acc(r)) is None else wrap(v)
    if s.nullable and is_none is not None:
        inner = reader(Slot(**{**_asdict(s), "nullable": False}), cls, view, entry)
        return lambda r: None if is_none(r) else inner(r)
    if kind in ("bytes", "vec_scalar"):
        as_numpy = getattr(cls, s.accessor + "AsNumpy")
        to = bytes if kind == "bytes" else list
        if kind == "vec_scalar" and isinstance(s.shape, ListOf) and _is_dt(s.shape):
            each = micros_reader(s.shape.item)
            return lambda r: [each(v) for v in _np(as_numpy(r), list)]
        return lambda r: _np(as_numpy(r), to)
    length = getattr(cls, s.accessor + "Length")
    if kind == "vec_string":
        item = _from_text(s.shape.item) if isinstance(s.shape, ListOf) else None
        return _string_list(s.slot, item)
    if entry is not None:
        return lambda r: dict(entry(acc(r, i)) for i in range(length(r)))
    wrap = _need(view)
    return lambda r: [wrap(acc(r, i)) for i in range(length(r))]


def _string_list(
    slot: int, item: Callable[[str], Any] | None
) -> Callable[[Any], list[Any]]:
    """A `[string]` field as a list, each distinct string decoded once.

    A vector may hold many offsets to one string (issue 30: 500,000 to one of 2 MiB
    in 4 MB): flatc's accessor decodes per offset, which multiplies the read by the
    sharing; here the list holds the same `str` at each offset, so reading costs
    the vector's length plus each distinct string's bytes, at most the buffer's.
    """
    field = 4 + 2 * slot  # the slot's entry in the vtable, as flatc's accessor reads

    def read(r: Any) -> list[Any]:
        tab = r._tab
        o = tab.Offset(field)
        if not o:
            return []
        buf, start = tab.Bytes, tab.Vector(o)
        seen: dict[int, Any] = {}
        out = []
        for at in range(start, start + 4 * tab.VectorLen(o), 4):
            pos = at + _U32(buf, at)[0]
            value = seen.get(pos)
            if value is None:
                text = buf[pos + 4 : pos + 4 + _U32(buf, pos)[0]].decode()
                value = seen[pos] = text if item is None else item(text)
            out.append(value)
        return out

    return read


def _from_text(shape: TypeShape) -> Callable[[str], Any] | None:
    """The converter of a string that carries a UUID, a Decimal, an address or a
    URL (None: other)."""
    convert = FROM_TEXT.get(shape.kind) if isinstance(shape, Scalar) else None
    if isinstance(shape, Foreign):
        convert = shape.text
    if convert is None:
        return None
    as_value = convert

    def read(value: str) -> Any:
        try:
            return as_value(value)
        except (ValueError, ArithmeticError):
            return value  # not one: FlatBuffers does not check it

    return read


def _need(view: Callable[[Any], Any] | None) -> Callable[[Any], Any]:
    if view is None:
        raise TypeError("a table field without its view class")
    return view


def _is_dt(shape: ListOf) -> bool:
    return isinstance(shape.item, Scalar) and shape.item.kind == "datetime"


def _np(array: Any, to: type) -> Any:
    if isinstance(array, int):  # the accessor's 0 for an absent vector
        return to()
    return array.tobytes() if to is bytes else array.tolist()


def _asdict(s: Slot) -> dict[str, Any]:
    return {k: getattr(s, k) for k in Slot.__slots__}


def table_class(modules: dict[str, ModuleType], name: str) -> type:
    """flatc's class of table `name`."""
    cls: type = getattr(modules[name], name)
    return cls


def field_shape(s: Slot) -> FieldShape:
    """A slot as the field shape it came from (for builder code)."""
    return FieldShape(s.name, s.shape, s.nullable)
