"""Whether a registered Protobuf message is, field for field, the one the codec reads.

Protobuf's wire carries field numbers and wire types, not names: a message derived
from a model (`--schema MODULE:NAME`, fields numbered in the model's order) read from
a team's file numbered otherwise decodes without an error into the wrong fields, or
into none (an unknown field is skipped). So, once per schema id, every field the
codec's message declares is looked up by number in the registered message, nested
messages too: where the file has it, it must have the same name, a type whose
values read the same, and the same repetition. A field only one side has is fine
(the file's is skipped as unknown; the codec's keeps its default, as protobuf
defines it for an older writer).

Types that read the same values: equal ones, and a narrower varint read as a wider
one (an `enum` or `int32` as `int32`/`int64`, a `uint32` as `uint64`/`int64`). A
message field outside the file (`google.protobuf.Timestamp`) must name the same type.
"""

from __future__ import annotations

from typing import Any, Final

from google.protobuf import descriptor_pb2

_T = descriptor_pb2.FieldDescriptorProto
_WIDER: Final[frozenset[tuple[int, int]]] = frozenset(
    {
        (_T.TYPE_ENUM, _T.TYPE_INT32),
        (_T.TYPE_ENUM, _T.TYPE_INT64),
        (_T.TYPE_INT32, _T.TYPE_INT64),
        (_T.TYPE_INT32, _T.TYPE_ENUM),
        (_T.TYPE_UINT32, _T.TYPE_UINT64),
        (_T.TYPE_UINT32, _T.TYPE_INT64),
    }
)
"""(written, read) pairs of different types that read the same values."""


def _type_name(number: int) -> str:
    return _T.Type.Name(number).removeprefix("TYPE_").lower()  # type: ignore[arg-type]


def field_mismatch(
    file: descriptor_pb2.FileDescriptorProto, path: tuple[int, ...], ours: Any
) -> str | None:
    """Why the message at index ``path`` of ``file`` is not read right by the
    generated message ``ours`` (its descriptor), or None (see the module)."""
    theirs: Any = file
    for index in path:
        theirs = (theirs.message_type if theirs is file else theirs.nested_type)[index]
    declared: dict[str, Any] = {}

    def index_messages(messages: Any, prefix: str) -> None:
        for message in messages:
            declared[f"{prefix}.{message.name}"] = message
            index_messages(message.nested_type, f"{prefix}.{message.name}")

    index_messages(file.message_type, f".{file.package}" if file.package else "")
    return _compare(theirs, ours, declared, set(), ours.name)


def _compare(
    theirs: Any, ours: Any, declared: dict[str, Any], seen: set[Any], where: str
) -> str | None:
    if (id(theirs), ours.full_name) in seen:
        return None
    seen.add((id(theirs), ours.full_name))
    by_number = {f.number: f for f in theirs.field}
    for field in ours.fields:
        written = by_number.get(field.number)
        if written is None:
            continue
        at = f"{where}.{field.name}"
        if written.name != field.name:
            return (
                f"{at}: field {field.number} is {written.name!r} in the registered file"
            )
        if written.type != field.type and (written.type, field.type) not in _WIDER:
            return (
                f"{at}: field {field.number} is {_type_name(written.type)} in the "
                f"registered file, {_type_name(field.type)} here"
            )
        if (written.label == _T.LABEL_REPEATED) != field.is_repeated:
            return f"{at}: field {field.number} is repeated on one side only"
        if field.type == _T.TYPE_MESSAGE:
            inner = declared.get(written.type_name)
            if inner is None:
                if written.type_name.lstrip(".") != field.message_type.full_name:
                    return f"{at}: a {written.type_name.lstrip('.')} in the registered file"
                continue
            why = _compare(inner, field.message_type, declared, seen, at)
            if why is not None:
                return why
    return None
