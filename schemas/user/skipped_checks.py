"""Which codec skips which check the user's own form makes on decode.

A CPU figure is only comparable when every codec does the same work: a codec that
skips a check another pays for looks cheaper than it would be in production. The
derived forms enforce what they can express (msgspec: enum and Literal membership,
lengths, patterns, int and float bounds, the unknown-field policy); what remains is
listed here, one `Skipped` per field and check, and printed by `codec-schema check`
and the A/B report:

| codec | skips |
| --- | --- |
| `protobuf` (derived) | every value check: bounds, lengths, patterns, enum and Literal values, UUID and Decimal text, required fields (a missing field decodes as its zero value), the unknown-field policy |
| `msgspec-json`, `msgspec-msgpack` (derived) | Decimal `max_digits`, `decimal_places` and bounds, int bounds past int64; and it is strict where a lax model coerces (`"123"` for an int) |
| `flatbuffers` | what protobuf skips, but a missing string, bytes, list, map or nested message is refused (`(required)`); a missing number, bool, int choice or datetime decodes as zero |
| `capnp` (into the Struct) | what msgspec skips; required fields (a missing one decodes as its zero value); the unknown-field policy |
| `avro` (into the Struct) | what msgspec skips, but a Decimal of the `decimal` logical type has its scale (`decimal_places`) from the type; nothing about presence: a record holds every field and nothing else |

The lax model's coercions are listed for msgspec only: the binary formats are typed,
so no writer can put `"123"` in an int field.

protobuf and FlatBuffers parse without validating; adding a validator written here in Python to
its decode would measure that validator, not the format, so it is reported instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from schemas.derive.avro_schema import logical_decimal
from schemas.derive.fbs_schema import is_offset
from schemas.derive.msgspec_structs import msgspec_bounds
from schemas.shape import (
    Choice,
    Constraints,
    FieldShape,
    ListOf,
    MapOf,
    MessageShape,
    Scalar,
    TupleOf,
    TypeShape,
    UnionOf,
    describe,
    int_range,
    int_width,
)

PROTOBUF: Final = ("protobuf",)
MSGSPEC: Final = ("msgspec-json", "msgspec-msgpack")
UNCHECKED: Final = ("protobuf", "flatbuffers")
"""The codecs that check no value: what is on the wire is what is read."""
CONVERTED: Final = (*MSGSPEC, "capnp", "avro")
"""The codecs whose values go through the derived Struct's checks."""

_WIDTHS: Final[dict[str, tuple[int, int]]] = {
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint64": (0, 2**64 - 1),
}


@dataclass(frozen=True, slots=True)
class Skipped:
    """A check the user's form makes on decode that some codecs do not.

    Attributes:
        codecs: the codecs that skip it.
        path: the field's dotted path (the message's, for a message-wide check).
        check: what is not checked, in plain words.
    """

    codecs: tuple[str, ...]
    path: str
    check: str

    def line(self) -> str:
        """`Order.status: protobuf skips the allowed values (any string decodes)`."""
        return f"{self.path}: {self.who()} {self.check}"

    def who(self) -> str:
        """`protobuf skips`, `msgspec-json, msgspec-msgpack skip`."""
        return f"{', '.join(self.codecs)} skip{'s' if len(self.codecs) == 1 else ''}"


def skipped_checks(shape: MessageShape, source: str, own: Any = None) -> list[Skipped]:
    """Every check of the user's form that a derived codec skips.

    Args:
        shape: the schema's shape.
        source: which form is the user's own (`pydantic`, `msgspec`, `proto`).
        own: the user's class (a pydantic model's config says lax or strict).
    """
    out: list[Skipped] = []
    seen: set[int] = set()
    _message(shape, shape.name, source, out, seen)
    if source == "pydantic" and shape.lax:
        out.insert(
            0,
            Skipped(
                MSGSPEC,
                shape.name,
                "the coercions of your lax model: msgspec is strict, so a value "
                'pydantic converts ("123" or 2.0 for an int) is rejected',
            ),
        )
    return out


def _message(
    msg: MessageShape, path: str, source: str, out: list[Skipped], seen: set[int]
) -> None:
    if id(msg) in seen:
        return
    seen.add(id(msg))
    proto = source != "proto"
    required = [f.name for f in msg.fields if f.required]
    if proto and required:
        for codecs, fmt in ((PROTOBUF, "protobuf"), (("capnp",), "Cap'n Proto")):
            out.append(
                Skipped(
                    codecs,
                    path,
                    f"the required-field check on {', '.join(required)} ({fmt} has "
                    "no required fields: a missing one decodes as its zero value)",
                )
            )
        inline = [
            f.name for f in msg.fields if f.required and (f.nullable or not _ptr(f))
        ]
        if inline:
            out.append(
                Skipped(
                    ("flatbuffers",),
                    path,
                    f"the required-field check on {', '.join(inline)} (a missing "
                    "number, bool or datetime decodes as zero, an optional one as None)",
                )
            )
    if proto and msg.forbid_unknown:
        out.append(
            Skipped(PROTOBUF, path, "the unknown-field check (kept, not refused)")
        )
        out.append(
            Skipped(
                ("flatbuffers", "capnp"),
                path,
                "the unknown-field check (another schema's fields are read past)",
            )
        )
    if _config(msg.source).get("extra") == "allow":
        out.append(
            Skipped(
                (*MSGSPEC, *PROTOBUF, "flatbuffers", "capnp"),
                path,
                "keeping unknown fields (extra='allow'): they are read past and dropped",
            )
        )
        out.append(
            Skipped(
                ("avro",),
                path,
                "keeping unknown fields (extra='allow'): a record has no place for them",
            )
        )
    aliased = [f.alias for f in msg.fields if f.alias]
    if aliased and _by_name(msg.source):
        out.append(
            Skipped(
                MSGSPEC,
                path,
                "the field names your model reads besides the aliases "
                f"(populate_by_name): only {', '.join(aliased[:3])}"
                f"{', ...' if len(aliased) > 3 else ''} are read",
            )
        )
    for f in msg.fields:
        where = f"{path}.{f.name}"
        _value(f.type, where, source, out)
        for inner, suffix in _nested(f.type):
            _message(inner, where + suffix, source, out, seen)


def _ptr(f: FieldShape) -> bool:
    """A field FlatBuffers stores through an offset (so `(required)` when not None)."""
    return is_offset(f.type)


def _config(source: Any) -> dict[str, Any]:
    """A pydantic model's `model_config` (empty for any other source)."""
    return dict(getattr(source, "model_config", None) or {})


def _by_name(source: Any) -> bool:
    """A pydantic model that validates by field name as well as by alias."""
    config = _config(source)
    return bool(config.get("populate_by_name") or config.get("validate_by_name"))


def _value(shape: TypeShape, path: str, source: str, out: list[Skipped]) -> None:
    if isinstance(shape, ListOf | MapOf):
        _bounds(shape.constraints, "", path, source, out)
        inner = shape.item if isinstance(shape, ListOf) else shape.value
        _value(inner, path + ("[]" if isinstance(shape, ListOf) else "{}"), source, out)
        return
    if source == "proto":
        if isinstance(shape, Scalar):
            _bounds(shape.constraints, shape.kind, path, source, out)
        return
    if isinstance(shape, Choice):
        kind = "string" if isinstance(shape.values[0], str) else "int"
        out.append(Skipped(UNCHECKED, path, f"the allowed values (any {kind} decodes)"))
    elif isinstance(shape, Scalar):
        if shape.kind in ("uuid", "decimal"):
            what = "a UUID" if shape.kind == "uuid" else "a number"
            out.append(
                Skipped(
                    UNCHECKED, path, f"that the text is {what} (any string decodes)"
                )
            )
        _bounds(shape.constraints, shape.kind, path, source, out, shape)


def _bounds(
    constraints: Constraints,
    kind: str,
    path: str,
    source: str,
    out: list[Skipped],
    shape: TypeShape | None = None,
) -> None:
    items = {k: v for k, v in constraints.items().items() if k != "tz"}
    if source != "proto":
        # FlatBuffers' int types are protobuf's (the same widths from the bounds).
        unchecked = _past_proto_type(items, constraints) if kind == "int" else items
        if unchecked:
            out.append(Skipped(UNCHECKED, path, _listed(unchecked)))
    if source != "msgspec":
        _, skipped = msgspec_bounds(constraints, kind)
        if skipped and shape is not None and logical_decimal(shape):
            # Avro's decimal reads every value at the type's scale: the places hold.
            out.append(Skipped(CONVERTED[:-1], path, _listed(skipped)))
            skipped = {k: v for k, v in skipped.items() if k != "decimal_places"}
            if skipped:
                out.append(Skipped(("avro",), path, _listed(skipped)))
        elif skipped:
            out.append(Skipped(CONVERTED, path, _listed(skipped)))


def _past_proto_type(items: dict[str, Any], constraints: Constraints) -> dict[str, Any]:
    """The int bounds the protobuf type's own range does not already enforce."""
    low, high = _WIDTHS[int_width(constraints)]
    lo, hi = int_range(constraints)
    left = dict(items)
    if lo is not None and lo <= low:
        left.pop("ge", None)
        left.pop("gt", None)
    if hi is not None and hi >= high:
        left.pop("le", None)
        left.pop("lt", None)
    return left


def _listed(bounds: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in bounds.items())


def _nested(shape: TypeShape) -> list[tuple[MessageShape, str]]:
    if isinstance(shape, MessageShape):
        return [(shape, "")]
    if isinstance(shape, ListOf):
        return [(m, "[]" + s) for m, s in _nested(shape.item)]
    if isinstance(shape, MapOf):
        return [(m, "{}" + s) for m, s in _nested(shape.value)]
    if isinstance(shape, UnionOf):  # a member's path: `Event.payload<PickedUp>`
        return [
            (m, f"<{describe(member)}>" + s)
            for member in shape.members
            for m, s in _nested(member)
        ]
    if isinstance(shape, TupleOf):
        return [
            (m, f"[{i}]" + s)
            for i, item in enumerate(shape.items)
            for m, s in _nested(item)
        ]
    return []
