"""The reader's Avro schema, adapted to a team's writer schema before resolution.

The worker's Avro schema is derived from its model (`schemas.derive.avro_schema`):
its record names are the model's class names in the namespace `codecab`, a str
enum is a `string`, bytes are `bytes`, a field has no Avro default. A team's own
schema, written by hand, has its own names, `enum`s, `fixed`s and defaults, and
Avro's resolution rules (names must match; an enum reads only as an enum, a fixed
only as a fixed) would refuse every one of its values. The names and those types
are the derived schema's inventions, not the model's, so the reader used for
resolution takes the writer's there:

| writer | derived reader | reader used |
| --- | --- | --- |
| a record (any name) | a record | the record, under the writer's name |
| an `enum` | `string` (a str enum, a Literal) or an enum | the writer's enum (read as its symbol, checked by the model's type) |
| a `fixed` (a decimal one too) | `bytes` (a decimal too) | the writer's fixed |
| a union / not a union | the other | each branch met with its counterpart |
| no field `f` | field `f`, which the model defaults | `f` left out: the model's default fills it |
| no field `f` | field `f`, which the model requires | refused once: `does not resolve` naming `f` |

Everything else is left to Avro's own rules (fastavro's resolution: promotions,
fields the reader lacks skipped, the writer's logical types read as written, so a
`timestamp-millis` value is read in milliseconds).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import fastavro

from schemas.shape import MessageShape, messages

_NAMED: Final = ("record", "enum", "fixed")


class Unresolvable(Exception):
    """The writer's schema cannot meet the reader's (the text says where)."""


def optional_fields(root: MessageShape, namespace: str) -> dict[str, set[str]]:
    """Each derived record's full name mapped to its fields the model defaults."""
    return {
        f"{namespace}.{msg.name}": {f.wire for f in msg.fields if not f.required}
        for msg in messages(root)
    }


def resolution_reader(
    reader: Any,
    writer: Any,
    optional: Mapping[str, set[str]],
    named: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The reader schema to resolve ``writer``'s values with (see the module).

    Args:
        reader: the derived schema (JSON form).
        writer: the writer's schema (JSON form).
        optional: `optional_fields` of the reader.
        named: the named types of the schemas ``writer`` references (parsed).

    Raises:
        Unresolvable: a field the model requires is not written.
    """
    r: Any = fastavro.parse_schema(reader)
    w: Any = fastavro.parse_schema(writer, named_schemas=dict(named or {}))
    adapter = _Adapter(r["__named_schemas"], w["__named_schemas"], optional)
    out: dict[str, Any] = adapter.adapt(r, w)
    return out


def _kind(schema: Any) -> str:
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, dict):
        return str(schema["type"])
    return str(schema)


def _clean(schema: Any) -> Any:
    """A parsed (sub)schema without fastavro's bookkeeping keys."""
    if isinstance(schema, dict):
        return {k: _clean(v) for k, v in schema.items() if not k.startswith("__")}
    if isinstance(schema, list):
        return [_clean(v) for v in schema]
    return schema


class _Adapter:
    def __init__(
        self,
        reader_names: dict[str, Any],
        writer_names: dict[str, Any],
        optional: Mapping[str, set[str]],
    ) -> None:
        self._r_names, self._w_names = reader_names, writer_names
        self._optional = optional
        self._emitted: set[str] = set()

    def _deref(self, schema: Any, names: dict[str, Any]) -> Any:
        return names.get(schema, schema) if isinstance(schema, str) else schema

    def adapt(self, r: Any, w: Any) -> Any:
        r, w = self._deref(r, self._r_names), self._deref(w, self._w_names)
        rk, wk = _kind(r), _kind(w)
        if rk == "union" or wk == "union":
            return self._union(r, w)
        if rk == "record" and wk == "record":
            return self._record(r, w)
        if (wk == "enum" and rk in ("string", "enum")) or (
            wk == "fixed" and rk == "bytes"
        ):
            return self._writers(w)
        if rk == wk == "array":
            return {"type": "array", "items": self.adapt(r["items"], w["items"])}
        if rk == wk == "map":
            return {"type": "map", "values": self.adapt(r["values"], w["values"])}
        return self._own(r)

    def _writers(self, w: dict[str, Any]) -> Any:
        """The writer's named type: its definition once, then its name."""
        if w["name"] in self._emitted:
            return w["name"]
        self._emitted.add(w["name"])
        return _clean(w)

    def _own(self, r: Any) -> Any:
        """A reader type kept as derived (its named types defined once)."""
        if _kind(r) in _NAMED:
            if r["name"] in self._emitted:
                return r["name"]
            self._emitted.add(r["name"])
        if _kind(r) == "record":
            fields = [
                {**_clean(f), "type": self._own(self._deref(f["type"], self._r_names))}
                for f in r["fields"]
            ]
            return {**_clean(r), "fields": fields}
        if _kind(r) == "array":
            return {
                **_clean(r),
                "items": self._own(self._deref(r["items"], self._r_names)),
            }
        if _kind(r) == "map":
            return {
                **_clean(r),
                "values": self._own(self._deref(r["values"], self._r_names)),
            }
        if _kind(r) == "union":
            return [self._own(self._deref(b, self._r_names)) for b in r]
        return _clean(r)

    def _union(self, r: Any, w: Any) -> Any:
        r_branches = r if isinstance(r, list) else [r]
        w_branches = [
            self._deref(b, self._w_names) for b in (w if isinstance(w, list) else [w])
        ]
        out = []
        for branch in r_branches:
            branch = self._deref(branch, self._r_names)
            match = _counterpart(branch, w_branches)
            out.append(
                self._own(branch) if match is None else self.adapt(branch, match)
            )
        return out if isinstance(r, list) else out[0]

    def _record(self, r: dict[str, Any], w: dict[str, Any]) -> Any:
        name = w["name"]
        if name in self._emitted:
            return name
        self._emitted.add(name)
        written = {f["name"]: f for f in w["fields"]}
        defaulted = self._optional.get(r["name"], set())
        fields = []
        for field in r["fields"]:
            theirs = written.get(field["name"])
            if theirs is not None:
                fields.append(
                    {
                        "name": field["name"],
                        "type": self.adapt(field["type"], theirs["type"]),
                    }
                )
            elif field["name"] not in defaulted:
                raise Unresolvable(
                    f"the writer's {name} has no field {field['name']!r}, "
                    "which the model requires (no default)"
                )
        return {"type": "record", "name": name, "fields": fields}


def _counterpart(r: Any, w_branches: list[Any]) -> Any:
    """The writer's branch that ``r`` (a reader branch) reads, if any."""
    rk = _kind(r)
    kinds = [_kind(b) for b in w_branches]
    if rk == "record":
        records = [b for b in w_branches if _kind(b) == "record"]
        short = r["name"].rpartition(".")[2]
        same = [b for b in records if b["name"].rpartition(".")[2] == short]
        if same or len(records) == 1:
            return (same or records)[0]
        return None
    if rk in kinds:
        return w_branches[kinds.index(rk)]
    if rk == "string" and "enum" in kinds:
        return w_branches[kinds.index("enum")]
    if rk == "bytes" and "fixed" in kinds:
        return w_branches[kinds.index("fixed")]
    return None
