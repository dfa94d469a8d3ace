"""The FlatBuffers codec: the official Python runtime, flatc's generated accessors.

The .fbs form is derived from the shape (`schemas.derive.fbs_schema`); flatc generates
its Python accessors once into a cache directory (`codec.flatbuffers.accessors`).
`decode` verifies the whole buffer (`codec.flatbuffers.verifier`: the Python runtime
has none, and without it a hostile buffer fails only when a field is read, in the
business logic), then returns a lazy view of the root table (`codec.views`): no
field is read until the logic reads it. Like protobuf, values are not validated
against the schema's enums or bounds (an int enum field holds any int). Verifying
walks every offset, so a
verified decode costs work in proportion to the buffer, not zero: that is what a
consumer of untrusted bytes must pay in Python, and it is what `decode` measures.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

import flatbuffers
import msgspec
import numpy as np

from codec.base import FLATBUFFERS, as_encode_error, safe_decode
from codec.flatbuffers.accessors import generated_modules
from codec.flatbuffers.layout import (
    NUMPY,
    PREPEND,
    Slot,
    entry_slots,
    kind_of,
    reader,
    slots_of,
    table_class,
    table_plans,
    to_micros,
    union_reader,
)
from codec.flatbuffers.verifier import verify
from codec.views import LazyView, build_views, view_to_python
from schemas.derive.fbs_schema import FbsForm, flatbuffers_form
from schemas.derive.msgspec_structs import hooks
from schemas.shape import (
    FieldShape,
    ListOf,
    MapOf,
    MessageShape,
    Scalar,
    TypeShape,
    UnionOf,
)
from schemas.unions import union_tags
from schemas.untagged import member_index


class FlatbuffersCodec:
    """Verify, then a lazy view over flatc's accessors; Builder to encode."""

    name = "flatbuffers"
    content_type = FLATBUFFERS

    def __init__(self, struct: type[msgspec.Struct], shape: MessageShape) -> None:
        self._struct = struct
        self._shape = shape
        self.form: FbsForm = flatbuffers_form(shape)
        modules = generated_modules(self.form)
        self.native_type = _views(shape, self.form, modules)
        root_cls: Any = table_class(modules, shape.name)
        get_root = root_cls.GetRootAs
        plan = table_plans(shape, self.form)
        identifier = self.form.identifier.encode()
        view = self.native_type

        def decode_unchecked(data: bytes) -> LazyView:
            verify(data, plan, identifier)
            root: LazyView = view(get_root(data, 0))
            return root

        self.decode_unchecked = decode_unchecked
        self._encoder = _Encoder(shape, self.form)

    def decode(self, data: bytes, /) -> Any:
        return safe_decode(self.name, self.decode_unchecked, data)

    def encode(self, obj: Any, /) -> bytes:
        try:
            return self._encoder.encode(obj)
        except Exception as exc:
            raise as_encode_error(self.name, exc) from exc

    def to_builtins(self, obj: Any, /) -> dict[str, Any]:
        # As protobuf's: the values as read, not validated against the Struct's
        # enums and bounds (neither format checks them on the wire).
        # A value msgspec has no type for is one carried as text: its text.
        out: dict[str, Any] = msgspec.to_builtins(view_to_python(obj), enc_hook=str)
        return out

    def from_builtins(self, data: dict[str, Any], /) -> Any:
        return msgspec.convert(
            data, self._struct, str_keys=True, dec_hook=hooks(self._struct).dec_hook
        )


def _views(shape: MessageShape, form: FbsForm, modules: dict[str, Any]) -> Any:
    entry_readers: dict[tuple[int, str], Callable[[Any], tuple[Any, Any]]] = {}

    def getter(
        msg: MessageShape, f: FieldShape, view_of: Callable[[MessageShape], Any]
    ) -> Callable[[Any], Any]:
        cls = table_class(modules, form.tables[id(msg)])
        s = next(x for x in slots_of(msg, form) if x.name == f.name)
        if isinstance(f.type, UnionOf):
            views = [view_of(_message(m)) for m in f.type.members]
            read_member = union_reader(s, cls, modules, views)
            return lambda v: read_member(v._r)
        entry = None
        if isinstance(f.type, MapOf):
            entry = _entry_reader(f.type, form, modules, s.entry, view_of)
            entry_readers[(id(msg), f.name)] = entry
        read = reader(s, cls, _view_for(s.shape, view_of), entry)
        return lambda v: read(v._r)

    return build_views(shape, getter)


def _view_for(shape: Any, view_of: Callable[[MessageShape], Any]) -> Any:
    while isinstance(shape, ListOf | MapOf):
        shape = shape.item if isinstance(shape, ListOf) else shape.value
    return view_of(shape) if isinstance(shape, MessageShape) else None


def _entry_reader(
    m: MapOf,
    form: FbsForm,
    modules: dict[str, Any],
    entry: str,
    view_of: Callable[[MessageShape], Any],
) -> Callable[[Any], tuple[Any, Any]]:
    cls = table_class(modules, entry)
    key_slot, value_slot = entry_slots(m, form)
    key = reader(key_slot, cls, None, None)
    value = reader(value_slot, cls, _view_for(m.value, view_of), None)
    return lambda e: (key(e), value(e))


class _Encoder:
    """Writes any object with the schema's attributes (a Struct, a view)."""

    def __init__(self, shape: MessageShape, form: FbsForm) -> None:
        self._form = form
        self._root = shape
        self._identifier = form.identifier.encode()
        self._slots: dict[int, list[Slot]] = {}

    def encode(self, obj: Any) -> bytes:
        builder = flatbuffers.Builder(256)
        root = self._table(builder, self._root, obj)
        builder.Finish(root, file_identifier=self._identifier)
        return bytes(builder.Output())

    def _member(self, shape: UnionOf, value: Any) -> int:
        """The index of the member `value` is: by its tag, else by its class."""
        if shape.tag_field is None:
            return member_index(shape, value)
        tag = getattr(value, shape.tag_field)
        return union_tags(shape).index(getattr(tag, "value", tag))

    def _slots_of(self, msg: MessageShape) -> list[Slot]:
        found = self._slots.get(id(msg))
        if found is None:
            found = self._slots[id(msg)] = slots_of(msg, self._form)
        return found

    def _table(self, b: flatbuffers.Builder, msg: MessageShape, obj: Any) -> int:
        values = [(s, getattr(obj, s.name)) for s in self._slots_of(msg)]
        return self._write(b, values)

    def _write(self, b: flatbuffers.Builder, values: list[tuple[Slot, Any]]) -> int:
        offsets = {
            s.slot: self._offset(b, s, v)
            for s, v in values
            if v is not None and kind_of(s.fb)[0] != "scalar"
        }
        b.StartObject(values[-1][0].slot + 1 if values else 0)
        for s, v in values:
            if v is None:
                continue
            if isinstance(s.shape, UnionOf):  # its type, in the slot before
                b.PrependUint8Slot(s.slot - 1, self._member(s.shape, v) + 1, 0)
            if s.slot in offsets:
                b.PrependUOffsetTRelativeSlot(s.slot, offsets[s.slot], 0)
                continue
            if isinstance(s.shape, Scalar) and s.shape.kind == "datetime":
                v = to_micros(v)
            default = None if s.nullable else (False if s.fb == "bool" else 0)
            getattr(b, PREPEND[s.fb])(s.slot, v, default)
        return int(b.EndObject())

    def _offset(self, b: flatbuffers.Builder, s: Slot, v: Any) -> int:
        kind = kind_of(s.fb)[0]
        if kind == "string":
            return int(b.CreateString(_text(v)))
        if kind == "bytes":
            return int(b.CreateByteVector(bytes(v)))
        if kind == "vec_scalar":
            items = [to_micros(x) for x in v] if _dt_items(s) else list(v)
            return int(b.CreateNumpyVector(np.array(items, dtype=NUMPY[s.fb[1:-1]])))
        if isinstance(s.shape, UnionOf):
            member = s.shape.members[self._member(s.shape, v)]
            return self._table(b, _message(member), v)
        if kind == "table":
            return self._table(b, _message(s.shape), v)
        if kind == "vec_string":
            items = [int(b.CreateString(_text(x))) for x in v]
        elif isinstance(s.shape, MapOf):
            k_slot, v_slot = entry_slots(s.shape, self._form)
            items = [self._write(b, [(k_slot, k), (v_slot, x)]) for k, x in v.items()]
        else:
            inner = _message(s.shape.item if isinstance(s.shape, ListOf) else s.shape)
            items = [self._table(b, inner, x) for x in v]
        b.StartVector(4, len(items), 4)
        for off in reversed(items):
            b.PrependUOffsetTRelative(off)
        return int(b.EndVector())


def _text(value: Any) -> str:
    """What a string field holds: an enum's value, a date, time or timedelta's ISO
    8601 text (msgspec's, which `schemas.compare.FROM_TEXT` reads), else `str`."""
    if isinstance(value, datetime.date | datetime.time | datetime.timedelta):
        out: str = msgspec.to_builtins(value)
        return out
    return str(getattr(value, "value", value))


def _message(shape: TypeShape) -> MessageShape:
    if not isinstance(shape, MessageShape):
        raise TypeError(f"not a table: {shape!r}")
    return shape


def _dt_items(s: Slot) -> bool:
    return isinstance(s.shape, ListOf) and (
        isinstance(s.shape.item, Scalar) and s.shape.item.kind == "datetime"
    )
