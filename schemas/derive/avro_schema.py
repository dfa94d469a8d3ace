"""Derive an Avro schema (JSON) from a shape: one record per message.

| shape | Avro |
| --- | --- |
| `str`, `bytes`, `bool`, `float` | `string`, `bytes`, `boolean`, `double` |
| `int` | `long` (`int` when the bounds fit 32 bits); above int64: refused |
| `datetime` | `long` with `logicalType: timestamp-micros` (the Python forms' resolution) |
| naive-only `datetime` (`tz=False`) | `long` with `logicalType: local-timestamp-micros` |
| `uuid` | `string` with `logicalType: uuid` (the canonical text; read as `uuid.UUID`) |
| `date` | `int` with `logicalType: date` (days since the epoch; read as `datetime.date`) |
| `decimal` with `max_digits` and `decimal_places` | `bytes` with `logicalType: decimal` |
| `decimal` otherwise | `string` (the exact text, converted back) |
| `Choice` | `string` or `long` (the value; Avro enum symbols cannot hold every value) |
| `list[X]` | `array` |
| `dict[str, V]`, `dict[int, V]` | `map` (Avro keys are strings: int keys as decimal text) |
| `X | None` | `["null", X]` (inside a list or map too) |
| a tagged union of messages | a union of the member records; each member's tag field an `enum` of its one tag (one byte) |
| a union of distinct `bool`, `int`, `float`, `str`, `bytes` | a union of those types (in that order, so fastavro writes an int as `long`) |
| `IPv4Address`, `HttpUrl`... (`Foreign.text`) | `string`: its text, made the value again at decode |

Records are named by the message shape's name (unique within a schema); the
namespace is fixed, so the same shape always gives the same text. Avro field names
are data, not code (the keys of Avro's JSON encoding, what schema resolution
matches): a field is named by its wire key, the alias when it has one, as on the
JSON and MessagePack wires. A wire key that is not an Avro name is refused.

A Decimal is Avro's `decimal` logical type (`precision` = `max_digits`, `scale` =
`decimal_places`) only when the model bounds both: the Avro specification requires
a precision, and with both bounds the type allows exactly the values the model
does, as a decimal Avro readers in every language take (fastavro writes a
Decimal with more places than the scale as an error, never rounded). The value
read back has exactly `scale` places: `12.5` is written as the unscaled 1250 and
read as `Decimal("12.50")`, equal to the value written (its text differs). With a
bound missing, any precision would be invented here, so the Decimal travels as its
exact text, as on protobuf, and is converted back on read.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from schemas.formats import Refusals, node_reasons
from schemas.shape import (
    Choice,
    Foreign,
    ListOf,
    MapOf,
    MessageShape,
    Scalar,
    TypeShape,
    UnionOf,
    describe,
    int_range,
    messages,
    unique_name,
)

NAMESPACE: Final = "codecab"
_SCALARS: Final[dict[str, Any]] = {
    "str": "string",
    "bytes": "bytes",
    "bool": "boolean",
    "float": "double",
    "datetime": {"type": "long", "logicalType": "timestamp-micros"},
    "uuid": {"type": "string", "logicalType": "uuid"},
    "date": {"type": "int", "logicalType": "date"},
    "decimal": "string",
}
_INT32: Final = (-(2**31), 2**31 - 1)
_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""An Avro name (the specification's rule for record and field names)."""


def avro_schema(root: MessageShape) -> dict[str, Any]:
    """The Avro record schema of `root` (nested records defined at first use).

    Raises:
        ConfigError: naming every field Avro cannot hold, with its path.
    """
    refusals = Refusals()
    out: dict[str, Any] = _Deriver(refusals, root).record(root, root.name)
    refusals.raise_any()
    return out


def avro_text(root: MessageShape) -> str:
    """`avro_schema(root)` as indented JSON (what `codec-schema derive` prints)."""
    return json.dumps(avro_schema(root), indent=2) + "\n"


def logical_decimal(shape: TypeShape) -> bool:
    """True when `shape` is a Decimal written as Avro's `decimal` logical type."""
    if not (isinstance(shape, Scalar) and shape.kind == "decimal"):
        return False
    digits, places = shape.constraints.max_digits, shape.constraints.decimal_places
    # Avro requires 0 < precision and 0 <= scale <= precision.
    return digits is not None and places is not None and 0 <= places <= digits > 0


_BRANCH_ORDER: Final = {"boolean": 0, "int": 1, "long": 1, "double": 2}
"""Branch order in a union of scalars: fastavro writes a value in the first branch
that accepts it, and its `double` accepts an int, its `long` a bool."""


class _Deriver:
    def __init__(self, refusals: Refusals, root: MessageShape) -> None:
        self._refusals = refusals
        self._defined: set[int] = set()
        self._tags: dict[tuple[int, str], Any] = {}
        taken = {m.name for m in messages(root)}
        for msg in messages(root):
            for f in msg.fields:
                self._tag_enums(f.type, taken)

    def _tag_enums(self, shape: TypeShape, taken: set[str]) -> None:
        """Each tagged union member's tag field as an enum of its one symbol."""
        if isinstance(shape, ListOf):
            self._tag_enums(shape.item, taken)
        elif isinstance(shape, MapOf):
            self._tag_enums(shape.value, taken)
        elif isinstance(shape, UnionOf) and shape.tag_field is not None:
            for member in shape.members:
                assert isinstance(member, MessageShape)  # noqa: S101  (tagged)
                tag = next(f for f in member.fields if f.name == shape.tag_field)
                assert isinstance(tag.type, Choice)  # noqa: S101  (tagged)
                name = unique_name(f"{member.name}Tag", taken)
                self._tags[(id(member), tag.name)] = {
                    "type": "enum",
                    "name": name,
                    "symbols": [tag.type.values[0]],
                }

    def record(self, msg: MessageShape, path: str) -> Any:
        if id(msg) in self._defined:
            return f"{NAMESPACE}.{msg.name}"
        self._defined.add(id(msg))
        fields = []
        for f in msg.fields:
            where = f"{path}.{f.name}"
            if not _NAME.fullmatch(f.wire):
                self._refusals.add(where, f"{f.wire!r} is not an Avro field name")
            avro_type = self._tags.get((id(msg), f.name)) or self.type(f.type, where)
            if f.nullable:  # a union holds no union: `X | Y | None` is one
                branches = avro_type if isinstance(avro_type, list) else [avro_type]
                avro_type = ["null", *branches]
            fields.append({"name": f.wire, "type": avro_type})
        return {
            "type": "record",
            "name": msg.name,
            "namespace": NAMESPACE,
            "fields": fields,
        }

    def type(self, shape: TypeShape, path: str) -> Any:
        unmapped = node_reasons(shape, "avro")
        if unmapped:  # a date, a set, a union...: refused, with the same reason
            self._refusals.add(path, "; ".join(unmapped))
            return "string"
        if isinstance(shape, MessageShape):
            return self.record(shape, path)
        if isinstance(shape, ListOf):
            return {"type": "array", "items": self.type(shape.item, path + "[]")}
        if isinstance(shape, MapOf):
            return {"type": "map", "values": self.type(shape.value, path + "{}")}
        if isinstance(shape, Choice):
            return "string" if isinstance(shape.values[0], str) else "long"
        if isinstance(shape, Foreign):  # one with a text form (others are refused)
            return "string"
        if isinstance(shape, Scalar):
            return _scalar(shape)
        if isinstance(shape, UnionOf):
            branches = [self.type(m, f"{path}<{describe(m)}>") for m in shape.members]
            branches.sort(key=lambda b: _BRANCH_ORDER.get(str(b), 3))
            return ["null", *branches] if shape.nullable else branches
        self._refusals.add(path, f"Avro has no {describe(shape)} type")
        return "string"


def _scalar(shape: Scalar) -> Any:
    if shape.kind == "datetime" and shape.constraints.tz is False:
        return {"type": "long", "logicalType": "local-timestamp-micros"}
    if logical_decimal(shape):
        return {
            "type": "bytes",
            "logicalType": "decimal",
            "precision": shape.constraints.max_digits,
            "scale": shape.constraints.decimal_places,
        }
    if shape.kind != "int":
        return _SCALARS[shape.kind]
    lo, hi = int_range(shape.constraints)
    if lo is not None and hi is not None and _INT32[0] <= lo and hi <= _INT32[1]:
        return "int"
    return "long"
