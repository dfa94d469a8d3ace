"""One codec under atheris: the child process that `python -m tests.fuzz` starts.

Run: `python -m tests.fuzz.harness CODEC [libFuzzer flags] CORPUS_DIR`, from the
repository root. `atheris.Setup` and `atheris.Fuzz` take the process over (libFuzzer
owns the loop, the signals and the exit), hence one process per codec.

Each input goes through `tests.fuzz.contract.check` once per target of
`tests.fuzz.inputs.targets`: the codec bound to every profile (`auto`: in both
set-ups, under each `content-type` header). A contract
violation or any stray exception leaves `test_one_input`; atheris prints it and
libFuzzer writes the input under the artifact prefix as `crash-*`. An input still
running after `-timeout` seconds is written as `timeout-*`: libFuzzer's alarm fires
in C, so it catches a decoder that loops in C holding the GIL too. Past
`-rss_limit_mb`, `oom-*`. A segfault in an extension is a `crash-*` as well.

What guides it: atheris instruments Python bytecode only, here `service` (the codec
glue, `as_decode_error`) and the Python half of `json`. The decoders themselves are
C (msgspec, orjson, upb, json's scanner) and Rust (pydantic-core): their branches
are invisible to libFuzzer. So each input's outcome per target, the decoder's error
class and message as a template (digits and input-chosen names erased; msgspec and
pydantic name the failing field: `$.items[#].quantity`) or "ok", is hashed onto a
pool of extra coverage counters:
an input that makes a decoder fail in a new way, or further into a message, counts
as new coverage and joins the corpus. Mutating the seeds (valid payloads) with the
wire's dictionary (`-dict`) does the rest.
"""

from __future__ import annotations

import importlib
import re
import sys
import zlib
from typing import Any, Final, get_args

INSTRUMENTED: Final = ("service", "json")
"""Packages instrumented on import: the project's Python, and json's Python half.
pydantic and protobuf are left out: their decode work is in Rust and C."""

OUTCOME_COUNTERS: Final = 8192
"""Extra coverage counters the outcomes are hashed onto (collisions only merge)."""

_DIGITS: Final = re.compile(r"\d+")
_SPAN: Final = re.compile(r"`([^`]*)`")
_WORD: Final = re.compile(r"\w+")
_PATH: Final = re.compile(r"\$(?:\.\w+|\[#\]|\[\.\.\.\])*")
"""A msgspec path once digits are erased: `$.items[#].sku`, `$.labels[...]`."""
_UNKNOWN_FIELD: Final = "Object contains unknown field"
_TYPES: Final = "key object array int str float bool null bytes ext datetime date time"
_TYPE_WORDS: Final = frozenset(["$", "#", *_TYPES.split()])
"""Words kept in an error text besides field names: msgspec's types, pydantic's root."""


class Outcomes:
    """Reports an outcome to libFuzzer as coverage: one counter per distinct kind."""

    def __init__(self, atheris: Any) -> None:
        self._atheris = atheris
        self._counters = [atheris._reserve_counter() for _ in range(OUTCOME_COUNTERS)]

    def hit(self, kind: str) -> None:
        index = self._counters[zlib.crc32(kind.encode()) % OUTCOME_COUNTERS]
        # Looked up per call: atheris rebinds `_trace_branch` when fuzzing starts.
        self._atheris._trace_branch(index)


def _template(text: str, words: frozenset[str]) -> str:
    """An error text with what the input chose erased: digits (offsets, indexes),
    and any name that is not a type or a schema's field (an unknown field's, a map
    key: input, which may hold backticks), so a random key is not a new kind."""
    text = _DIGITS.sub("#", text)
    if "validation error(s): " in text:
        # pydantic (codec.base): "N validation error(s): loc: type; ...".
        # The first error only: three of twenty fields would be a kind per triple.
        first = text.partition(": ")[2].split("; ")[0]
        loc, _, kind = first.rpartition(": ")
        known = all(part in words for part in loc.split("."))
        return f"pydantic {loc if known else '?'}: {kind if kind in words else '?'}"
    if text.startswith(_UNKNOWN_FIELD):
        return _UNKNOWN_FIELD  # what follows is the input's key, backticks and all
    # msgspec: "Expected `str`, got `int` - at `$.items[#].sku`": known names only.
    out, rest = "", text
    while "`" in rest:
        before, _, after = rest.partition("`")
        inner, closed, rest = after.partition("`")
        if not (closed and (inner in words or _known_path(inner, words))):
            return f"{out}{before}`?`"
        out += f"{before}`{inner}`"
    return out + rest


def _known_path(span: str, words: frozenset[str]) -> bool:
    return bool(_PATH.fullmatch(span)) and all(w in words for w in _WORD.findall(span))


def outcome(
    label: str, header: bytes | None, result: Any, words: frozenset[str]
) -> str:
    """A label for what one decode did: the error's class and text template."""
    from schemas.errors import DecodeError

    if isinstance(result, DecodeError):
        text = _template(str(result), words)
        return f"{label}|{header!r}|{result.cause_type}|{text}"
    return f"{label}|{header!r}|ok"


def main(argv: list[str]) -> None:
    """Fuzz the codec `argv[1]`; pass the rest of `argv` to libFuzzer."""
    if len(argv) < 2 or argv[1].startswith("-"):
        sys.exit("usage: python -m tests.fuzz.harness CODEC [libFuzzer flags] [CORPUS]")
    key = argv[1]
    atheris: Any = importlib.import_module("atheris")  # no stubs: typed Any
    with atheris.instrument_imports(include=list(INSTRUMENTED)):
        for module in ("json", "codec"):
            importlib.import_module(module)
    # Imported after instrumenting: they import `service`, which must load inside it.
    from pydantic_core.core_schema import ErrorType

    from codec import CODEC_NAMES
    from tests.fuzz.contract import check
    from tests.fuzz.inputs import field_names, targets

    if key not in CODEC_NAMES:
        sys.exit(f"unknown codec {key!r}: one of {', '.join(CODEC_NAMES)}")
    decoders = targets(key)  # narrowed to a CodecName by the test above
    # Kept in error texts: types, pydantic's error kinds (`int_type`), field names.
    words = _TYPE_WORDS | frozenset(get_args(ErrorType)) | field_names()
    outcomes = Outcomes(atheris)

    def test_one_input(data: bytes) -> None:
        for label, codec, header in decoders:
            result = check(codec, data, header)
            outcomes.hit(outcome(label, header, result, words))

    atheris.Setup([argv[0], *argv[2:]], test_one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main(sys.argv)
