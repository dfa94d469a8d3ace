"""`codec-schema check SCHEMA --logic MODULE:CALLABLE`: what a codec switch breaks in
a team's handler.

The same messages (synthetic from the schema, or a recording's) are decoded by every
wire codec that carries the schema, and the handler runs on each codec's objects.
Its result on the pydantic model (`json+pydantic`: the team's own model for a
pydantic schema) is the reference; per codec the verdict is:

- `works`: on every message it returned what it returned on the pydantic model
  (compared after `schematool.logic_results.normalise`), or raised the same type;
- `differs`: it returned something else; the fields that differ are named, with the
  first message's two values (e.g. `result.total: Decimal('12.50') vs str '12.50'`);
- `fails`: it raised where the reference did not; the exception, the attribute or
  method it touched on what (`model_dump` on a msgspec Struct) and the handler's line.

Messages a codec cannot carry (its own encode or decode fails) are counted apart:
`codec-schema check` without `--logic` is where those are explained. The handler is
called exactly as the worker calls it (`handler(message)`, no bridge; an awaitable
it returns is awaited, on one event loop for the whole check), so the verdict is the
worker's.
"""

from __future__ import annotations

import asyncio
import inspect
import linecache
import re
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import msgspec
from google.protobuf.message import Message
from pydantic import BaseModel

from codec import Codec, codec_refusal, get_codec
from codec.views import LazyView
from schemas.carried import carried
from schemas.registry import SchemaName
from schemas.user.loader import UserSchema
from schematool.codecs import WIRE_CODECS, user_codec
from schematool.logic_results import differences, normalise
from service.logic.user_handler import as_coroutine
from service.loop.async_path.event_loop import new_event_loop

REFERENCE: Final = "json+pydantic"
Verdict = Literal["reference", "works", "differs", "fails", "refused"]
_MAX_PATHS: Final = 6
_MESSAGE_NOTE: Final = "codec-schema: the message was a "
"""A note added to what the handler raised: the decoded object's kind."""


@dataclass(slots=True)
class CodecVerdict:
    """One codec's verdict on the handler.

    Attributes:
        codec: the registry key.
        verdict: `reference`, `works`, `differs`, `fails` or `refused` (the codec
            cannot carry the schema).
        failure: the first failure, one line (exception, what it touched, where).
        difference: the first difference, one line (`path: value vs value`).
        paths: every field that differed (indices generalised: `items[]`).
        failed: messages on which it raised where the reference did not.
        differed: messages on which it returned something else.
        carried: messages the codec carried (the handler ran on these).
        refusal: why the codec cannot carry the schema (`refused`).
    """

    codec: str
    verdict: Verdict = "works"
    failure: str = ""
    difference: str = ""
    paths: list[str] = field(default_factory=list)
    failed: int = 0
    differed: int = 0
    carried: int = 0
    refusal: str = ""

    def line(self) -> str:
        """The verdict and its detail in one line (the report's cell)."""
        if self.verdict == "refused":
            return f"refused: {self.refusal}"
        parts = []
        if self.failed:
            parts.append(f"{self.failure} ({self.failed} of {self.carried} messages)")
        if self.differed:
            also = ", ".join(self.paths[1:])
            parts.append(
                f"{'also differs: ' if self.failed else ''}{self.difference} "
                f"({self.differed} of {self.carried} messages)"
                + (f"; also {also}" if also else "")
            )
        return (
            f"{self.verdict}: " + "; ".join(parts)
            if parts
            else (f"{self.verdict} ({self.carried} messages)")
        )


@dataclass(slots=True)
class LogicReport:
    """The handler's verdict per codec on `messages` messages."""

    logic: str
    schema: str
    messages: int
    source: str
    verdicts: dict[str, CodecVerdict]

    @property
    def ok(self) -> bool:
        """True when the handler works on every codec that carries the schema."""
        return all(
            v.verdict in ("reference", "works", "refused")
            for v in self.verdicts.values()
        )


def check_logic(
    schema: UserSchema | SchemaName,
    logic: str,
    handler: Callable[[Any], object],
    payloads: Sequence[dict[str, Any]],
    *,
    source: str = "synthetic",
    codecs: Sequence[str] | None = None,
) -> LogicReport:
    """Run `handler` on every codec's decode of each payload; see the module docstring.

    Args:
        schema: the message schema (a user's, or a built-in's key: its pydantic
            model is the reference, as a user's is).
        logic: the handler's spec, for the report.
        handler: the loaded handler (`service.logic.user_handler.load_handler`).
        payloads: the messages as builtins (`schemas.user.synthetic.make_payloads`,
            or a recording's, decoded).
        source: where the payloads came from, for the report.
        codecs: the wire codecs to judge (default: all).
    """
    names = [REFERENCE, *(c for c in (codecs or WIRE_CODECS) if c != REFERENCE)]
    verdicts: dict[str, CodecVerdict] = {}
    built: dict[str, Codec[Any]] = {}
    for name in names:
        why = None if isinstance(schema, str) else codec_refusal(name, schema)
        if why is not None:
            first = why.splitlines()[0].removeprefix("schema error: ")
            verdicts[name] = CodecVerdict(name, "refused", refusal=first)
        else:
            built[name] = (
                get_codec(name, schema)  # type: ignore[arg-type]
                if isinstance(schema, str)
                else user_codec(name, schema)
            )
            verdicts[name] = CodecVerdict(name)
    verdicts[REFERENCE].verdict = "reference"
    changed = {} if isinstance(schema, str) else carried(schema.shape, schema.source)
    loop = new_event_loop()
    try:
        call = _awaiting(handler, loop)
        for payload in payloads:
            _one_message(built, (handler, call), payload, verdicts, changed)
    finally:
        loop.close()
    for v in verdicts.values():
        if v.verdict == "works":
            v.verdict = "fails" if v.failed else "differs" if v.differed else "works"
    name = schema if isinstance(schema, str) else schema.name
    return LogicReport(logic, name, len(payloads), source, verdicts)


def _awaiting(
    handler: Callable[[Any], object], loop: asyncio.AbstractEventLoop
) -> Callable[[Any], object]:
    """`handler` as the worker calls it: an awaitable it returns is awaited (on
    one event loop for the whole check, as the worker's), its result returned."""

    def call(obj: Any) -> object:
        out = handler(obj)
        if inspect.isawaitable(out):
            return loop.run_until_complete(as_coroutine(out))
        return out

    return call


def _one_message(
    built: dict[str, Codec[Any]],
    handlers: tuple[Callable[[Any], object], Callable[[Any], object]],
    payload: dict[str, Any],
    verdicts: dict[str, CodecVerdict],
    changed: dict[str, list[str]],
) -> None:
    handler, call = handlers
    expected = _outcome(built[REFERENCE], call, payload)
    if expected is None:  # the model itself refuses it: not a handler question
        return
    verdicts[REFERENCE].carried += 1
    for name, codec in built.items():
        if name == REFERENCE:
            continue
        got = _outcome(codec, call, payload)
        if got is None:
            continue
        v = verdicts[name]
        v.carried += 1
        if isinstance(got, BaseException):
            if isinstance(expected, BaseException) and type(got) is type(expected):
                continue
            v.failed += 1
            v.failure = v.failure or _failure(got, handler, changed.get(name, []))
            continue
        if isinstance(expected, BaseException):
            raised = type(expected).__name__
            found = [("result", f"returned where the pydantic model raised {raised}")]
        else:
            found = list(
                differences(normalise(expected.value), normalise(got.value), "result")
            )
        if found:
            v.differed += 1
            v.difference = v.difference or f"{found[0][0]}: {found[0][1]}"
            for path, _what in found:
                general = _general(path)
                if general not in v.paths and len(v.paths) < _MAX_PATHS:
                    v.paths.append(general)


@dataclass(frozen=True, slots=True)
class _Returned:
    value: object


def _outcome(
    codec: Codec[Any], handler: Callable[[Any], object], payload: dict[str, Any]
) -> _Returned | BaseException | None:
    """What the handler did with the codec's decode of `payload` (None: the codec
    could not carry it)."""
    try:
        obj = codec.decode(codec.encode(codec.from_builtins(payload)))
    except Exception:  # carriage is `codec-schema check`'s question, not this one
        return None
    try:
        return _Returned(handler(obj))
    except Exception as exc:  # whatever the team's code raises is the finding
        exc.add_note(_MESSAGE_NOTE + _kind_of(obj))
        return exc


def _failure(
    exc: BaseException, handler: Callable[[Any], object], changed: Sequence[str]
) -> str:
    """The exception, what it touched on what (or what the message was), the
    handler's line, and the fields that line reads which this codec carries as
    another type (`schemas.carried`: a `Decimal` read as a str from protobuf)."""
    text = f"{type(exc).__name__}: {str(exc)[:160]}"
    if isinstance(exc, AttributeError) and exc.name is not None:
        text += f" (touched `{exc.name}` on {_kind_of(exc.obj)})"
    else:
        notes = getattr(exc, "__notes__", ())
        kind = next((n for n in notes if n.startswith(_MESSAGE_NOTE)), "")
        if kind:
            text += f" (the message was a {kind.removeprefix(_MESSAGE_NOTE)})"
    line, where = _handler_line(exc, handler)
    reads = _changed_reads(line, changed)
    return f"{text}{where}{reads}"


def _changed_reads(line: str, changed: Sequence[str]) -> str:
    """`; that line reads PATH, carried as FORM here` for each changed field whose
    name the line reads as an attribute (`.amount`)."""
    found = []
    for entry in changed:
        path, _, form = entry.partition(": ")
        name = path.rsplit(".", 1)[-1].removesuffix("[]")
        if re.search(rf"\.{re.escape(name)}\b", line):
            found.append(f"`{path}`, {form.split(' (')[0]} on this codec")
    return "; that line reads " + ", ".join(found) if found else ""


def _kind_of(obj: object) -> str:
    name = type(obj).__name__
    if isinstance(obj, msgspec.Struct):
        return f"msgspec Struct {name}"
    if isinstance(obj, Message):
        return f"protobuf message {name}"
    if isinstance(obj, BaseModel):
        return f"pydantic model {name}"
    if isinstance(obj, LazyView):
        return f"lazy view {name}"
    return name


def _handler_line(
    exc: BaseException, handler: Callable[[Any], object]
) -> tuple[str, str]:
    """The source line of the deepest frame in the handler's own file, and
    `, at FILE:LINE `source`` for it (empty without one)."""
    code = getattr(handler, "__code__", None)
    own = code.co_filename if code is not None else None
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if f.filename == own] or frames[1:]
    if not mine:
        return "", ""
    frame = mine[-1]
    line = (frame.line or linecache.getline(frame.filename, frame.lineno or 0)).strip()
    short = frame.filename.rsplit("/", 1)[-1]
    return line, f", at {short}:{frame.lineno} `{line}`"


def _general(path: str) -> str:
    """`result.items[3].sku` -> `result.items[].sku`."""
    out, depth = [], 0
    for ch in path:
        if ch == "[":
            depth += 1
            if depth == 1:
                out.append("[]")
        elif ch == "]":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def render_logic(report: LogicReport) -> str:
    """The per-codec verdict table, as `codec-schema check --logic` prints it."""
    lines = [
        f"your logic {report.logic} on {report.schema}: {report.messages} "
        f"{report.source} messages; each codec's result compared with the pydantic "
        f"model's ({REFERENCE}) after the documented normalisation",
    ]
    width = max(len(c) for c in report.verdicts)
    lines.extend(f"  {v.codec:<{width}}  {v.line()}" for v in report.verdicts.values())
    lines.append(
        "PASS: works on every codec"
        if report.ok
        else "FAIL: the handler breaks on a codec switch (above)"
    )
    return "\n".join(lines)
