"""What bounds the decode work of one message, per codec: the one place it is written.

The docs' codecs page (docs/explanation/codecs.md) and the fault suite's report (docs/reliability.md)
both print `table()`; a unit test checks the page against it. Beyond these bounds, the
worker's per-message budget (`message_budget_ms`) bounds decode plus logic in time.
"""

from __future__ import annotations

from typing import Final

WORK_BOUNDS: Final[tuple[tuple[str, str], ...]] = (
    (
        "`flatbuffers`",
        (
            "Offsets can share: 500,000 offsets to one 2 MiB string fit in 4.0 MB. The "
            "verifier checks each distinct string once (by position) and charges every "
            "reference: at most one object per 4 bytes of buffer, and at most 16x the "
            "buffer's size plus 1 MiB of bytes a full read touches (tables, strings, "
            "vectors, each time referenced); past either, a `DecodeError` (that message: "
            "after one 2 MiB UTF-8 check). The view reads a `[string]` field decoding "
            "each distinct string once; any other read is within the byte budget."
        ),
    ),
    (
        "`capnp`",
        (
            "Pointers can share too; pycapnp's traversal limit is set to the message's "
            "own size in words (+8), charged on every pointer followed and every text "
            "read, and nesting to 64."
        ),
    ),
    (
        "`avro`",
        (
            "No references: one pass over the bytes. The exact walk bounds each block's "
            "items by the bytes left (items of zero bytes, empty records, by the buffer's "
            "length) before fastavro builds anything."
        ),
    ),
    (
        "`protobuf`",
        (
            "No references: upb parses in one pass, lengths checked against the buffer, "
            "nesting bounded by upb's depth limit (unknown fields stay bytes); a lazy "
            "field read converts that field's own bytes."
        ),
    ),
    (
        "`msgspec-msgpack`, `msgspec-json`",
        (
            "No references: one pass; a declared array or map length is checked against "
            "the bytes left before allocating; nesting bounded by the recursion limit."
        ),
    ),
    (
        "`json+pydantic`, `json-stdlib+pydantic`, `orjson+pydantic`",
        (
            "No references: the JSON is parsed once and each value validated once; "
            "nesting is bounded by the parser's depth limit (pydantic-core's and orjson's "
            "own, the recursion limit for the stdlib's), so 100,000-deep nesting is a "
            "dead letter (the fault suite's P2)."
        ),
    ),
)
"""(codecs, what bounds their decode work), in the codecs page's order."""


def table() -> str:
    """The markdown table of `WORK_BOUNDS`."""
    rows = ["| codec | what bounds decode work |", "| --- | --- |"]
    rows += [f"| {codecs} | {bound} |" for codecs, bound in WORK_BOUNDS]
    return "\n".join(rows)
