"""Derive an Avro schema (JSON) from a shape: one record per message.

| shape | Avro |
| --- | --- |
| `str`, `bytes`, `bool`, `float` | `string`, `bytes`, `boolean`, `double` |
| `int` | `long` (`int` when the bounds fit 32 bits); above int64: refused |
| `datetime` | `long` with `logicalType: timestamp-micros` (the Python forms' resolution) |
| `Choice` | `string` or `long` (the value; Avro enum symbols cannot hold every value) |
| `list[X]` | `array` |
| `dict[str, V]`, `dict[int, V]` | `map` (Avro keys are strings: int keys as decimal text) |
| `X | None` | `["null", X]` |

Records are named by the message shape's name (unique within a schema); the
namespace is fixed, so the same shape always gives the same text.
"""

from __future__ import annotations

import json
from typing import Any, Final

from schemas.shape import (
    Choice,
    ListOf,
    MapOf,
    MessageShape,
    Refusals,
    Scalar,
    TypeShape,
    int_range,
)

NAMESPACE: Final = "codecab"
_SCALARS: Final[dict[str, Any]] = {
    "str": "string",
    "bytes": "bytes",
    "bool": "boolean",
    "float": "double",
    "datetime": {"type": "long", "logicalType": "timestamp-micros"},
}
_INT32: Final = (-(2**31), 2**31 - 1)


def avro_schema(root: MessageShape) -> dict[str, Any]:
    """The Avro record schema of `root` (nested records defined at first use).

    Raises:
        ConfigError: naming every field Avro cannot hold, with its path.
    """
    refusals = Refusals()
    out: dict[str, Any] = _Deriver(refusals).record(root, root.name)
    refusals.raise_any()
    return out


def avro_text(root: MessageShape) -> str:
    """`avro_schema(root)` as indented JSON (what `codec-schema derive` prints)."""
    return json.dumps(avro_schema(root), indent=2) + "\n"


class _Deriver:
    def __init__(self, refusals: Refusals) -> None:
        self._refusals = refusals
        self._defined: set[int] = set()

    def record(self, msg: MessageShape, path: str) -> Any:
        if id(msg) in self._defined:
            return f"{NAMESPACE}.{msg.name}"
        self._defined.add(id(msg))
        fields = []
        for f in msg.fields:
            avro_type = self.type(f.type, f"{path}.{f.name}")
            if f.nullable:
                avro_type = ["null", avro_type]
            fields.append({"name": f.name, "type": avro_type})
        return {
            "type": "record",
            "name": msg.name,
            "namespace": NAMESPACE,
            "fields": fields,
        }

    def type(self, shape: TypeShape, path: str) -> Any:
        if isinstance(shape, MessageShape):
            return self.record(shape, path)
        if isinstance(shape, ListOf):
            return {"type": "array", "items": self.type(shape.item, path + "[]")}
        if isinstance(shape, MapOf):
            return {"type": "map", "values": self.type(shape.value, path + "{}")}
        if isinstance(shape, Choice):
            return "string" if isinstance(shape.values[0], str) else "long"
        return _scalar(shape)


def _scalar(shape: Scalar) -> Any:
    if shape.kind != "int":
        return _SCALARS[shape.kind]
    lo, hi = int_range(shape.constraints)
    if lo is not None and hi is not None and _INT32[0] <= lo and hi <= _INT32[1]:
        return "int"
    return "long"
