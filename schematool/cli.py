"""`codec-schema`: command-line entry point (also `python -m schematool`).

    codec-schema show   SCHEMA                 each field and how every form holds it
    codec-schema derive SCHEMA [--form F]      the derived forms as source text
    codec-schema check  SCHEMA [--count N]     every wire codec decodes the same values
    codec-schema check  SCHEMA --logic M:F     what a codec switch breaks in your handler
                       [--recording FILE]  ... on a recording's messages

SCHEMA is `MODULE:NAME` (a pydantic v2 model or a msgspec Struct, importable from
PYTHONPATH or the current directory) or `FILE.proto:MESSAGE`.
Exit status: 0 on success (check: every codec that ran agreed; those that cannot
carry the schema are left out with a line per field), 1 when check found a
disagreement (with --logic: the handler differs or fails on a codec), 2 for a bad flag, a schema that cannot be loaded, or a codec named
with `--codecs` that cannot carry the schema (a line per codec and field on stderr).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from codec import codec_refusal
from schemas.errors import ConfigError
from schemas.user.loader import UserSchema, load_schema
from schemas.user.synthetic import SynthOptions, make_payloads
from schematool.check import render, run_check
from schematool.codecs import WIRE_CODECS
from schematool.logic_check import check_logic, render_logic
from schematool.protosource import proto_source
from schematool.pysource import msgspec_source, pydantic_source
from schematool.recorded import recorded_payloads
from schematool.show import render_show
from schematool.wireforms import COMMENT, WIRE_FORMS, refusal_comment, wire_form
from service import __version__
from service.logic.user_handler import load_handler

FORMS: Final = ("msgspec", "pydantic", "proto", *WIRE_FORMS, "all")
_DEFAULTS: Final = SynthOptions()


def _pair(text: str) -> tuple[int, int]:
    lo, sep, hi = text.partition(",")
    try:
        low = int(lo)
        high = int(hi) if sep else low
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LO,HI, got {text!r}") from None
    if not 0 <= low <= high:
        raise argparse.ArgumentTypeError(f"expected 0 <= LO <= HI, got {text!r}")
    return low, high


def _ratio(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected 0 to 1, got {text!r}")
    return value


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _shown(pair: tuple[int, int]) -> str:
    return f"{pair[0]},{pair[1]}"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser; every help text states its default."""
    parser = argparse.ArgumentParser(
        prog="codec-schema",
        description="Your own message type in every codec's form: show how each "
        "field maps, print the derived forms, check that every codec agrees.",
    )
    parser.add_argument("--version", action="version", version=__version__)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    spec_help = "MODULE:NAME (pydantic model or msgspec Struct) or FILE.proto:MESSAGE"
    show = commands.add_parser("show", help="each field and how every form holds it")
    show.add_argument("schema", metavar="SCHEMA", help=spec_help)
    derive = commands.add_parser("derive", help="the derived forms as source text")
    derive.add_argument("schema", metavar="SCHEMA", help=spec_help)
    derive.add_argument(
        "--form",
        choices=FORMS,
        default="all",
        help="which form to print; one form prints a file to commit as is "
        "(default: all, each under a heading)",
    )
    check = commands.add_parser("check", help="every wire codec decodes equal values")
    check.add_argument("schema", metavar="SCHEMA", help=spec_help)
    _check_flags(check)
    return parser


def _check_flags(check: argparse.ArgumentParser) -> None:
    check.add_argument(
        "--count", type=int, default=50, metavar="N", help="payloads (default: 50)"
    )
    check.add_argument(
        "--logic",
        metavar="MODULE:CALLABLE",
        default=None,
        help="run this handler on each codec's decoded messages and say, per codec, "
        "whether it works, differs (which field) or fails (why), against its result "
        "on the pydantic model",
    )
    check.add_argument(
        "--recording",
        type=Path,
        default=None,
        metavar="FILE",
        help="with --logic: the messages of this recording (codec-loadgen record; "
        "its first --count records) instead of synthetic ones",
    )
    check.add_argument(
        "--seed", type=int, default=0, metavar="N", help="payload seed (default: 0)"
    )
    check.add_argument(
        "--run-validators",
        action="store_true",
        help="the derived msgspec Structs run your model's after validators (field, "
        "model and AfterValidator ones that are plain functions of the value) in "
        "__post_init__: msgspec-json, msgspec-msgpack, avro and capnp run them "
        "(default: off; the report says which codecs ran them)",
    )
    check.add_argument(
        "--codecs",
        type=_names,
        default=None,
        metavar="A,B",
        help="wire codecs, comma-separated; each must carry the schema, or the "
        f"check exits 2 naming every field it cannot (default: {','.join(WIRE_CODECS)}, "
        "leaving out with a note those that cannot carry it)",
    )
    for flag, default, what in (
        ("--list-len", _DEFAULTS.list_len, "items per list"),
        ("--map-len", _DEFAULTS.map_len, "entries per map"),
        ("--str-len", _DEFAULTS.str_len, "characters per string"),
        ("--bytes-len", _DEFAULTS.bytes_len, "bytes per bytes value"),
    ):
        check.add_argument(
            flag,
            type=_pair,
            default=default,
            metavar="LO,HI",
            help=f"{what} (default: {_shown(default)})",
        )
    check.add_argument(
        "--none-ratio",
        type=_ratio,
        default=_DEFAULTS.none_ratio,
        metavar="R",
        help=f"share of nullable fields left None (default: {_DEFAULTS.none_ratio})",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; return the exit status (see the module docstring)."""
    args = build_parser().parse_args(argv)
    try:
        if args.command == "check" and args.count < 1:
            raise ConfigError(f"--count: expected at least 1, got {args.count}")
        schema = load_schema(args.schema)
        if getattr(args, "run_validators", False):
            schema = schema.with_validators()
        if args.command == "show":
            print(render_show(schema))
            return 0
        if args.command == "derive":
            print(derive_text(schema, args.form), end="")
            return 0
        options = SynthOptions(
            list_len=args.list_len,
            map_len=args.map_len,
            str_len=args.str_len,
            bytes_len=args.bytes_len,
            none_ratio=args.none_ratio,
        )
        if args.logic is not None:
            return _check_logic(schema, args.logic, args, options)
        if args.recording is not None:
            raise ConfigError("--recording: only with --logic")
        report = run_check(
            schema,
            count=args.count,
            seed=args.seed,
            options=options,
            codecs=args.codecs,
        )
    except ConfigError as exc:
        print(f"codec-schema: error: {exc}", file=sys.stderr)
        return 2
    print(render(report))
    return 0 if report.ok else 1


def derive_text(schema: UserSchema, form: str) -> str:
    """The forms `form` names as source text; the user's own form is not re-derived."""
    wanted = FORMS[:-1] if form == "all" else (form,)
    chunks = []
    for one in wanted:
        if one == schema.source:
            text = f"# {one}: your own form ({schema.name}); nothing to derive\n"
        elif one in WIRE_FORMS:
            text = wire_form(one, schema)
        elif one in ("msgspec", "pydantic"):
            text = _python_form(one, schema)
        elif (why := codec_refusal("protobuf", schema)) is not None:
            text = refusal_comment("//", "protobuf", schema.name, why)
        else:
            comment = (
                f"Derived by codec-schema from {schema.name}.\n"
                "Field numbers follow the declaration order: keep them when fields "
                "change."
            )
            text = proto_source(schema.proto_file, comment)
        if form == "all":
            rule = "//" if one == "proto" else COMMENT.get(one, "#")
            text = f"{rule} ===== {one} =====\n{text}"
        chunks.append(text)
    return "\n".join(chunks)


_PYTHON_CODECS: Final = {
    "msgspec": ("msgspec-json", "msgspec-msgpack"),
    "pydantic": ("json+pydantic", "json-stdlib+pydantic", "orjson+pydantic"),
}
"""The codecs each derived Python form is the form of."""


def _python_form(form: str, schema: UserSchema) -> str:
    """The derived Structs or models, when a codec of theirs carries the schema
    (with a comment naming any of them that does not); else that refusal."""
    why = {c: codec_refusal(c, schema) for c in _PYTHON_CODECS[form]}
    refused = {c: w for c, w in why.items() if w is not None}
    if len(refused) == len(why):
        return "".join(
            refusal_comment("#", codec, schema.name, w) for codec, w in refused.items()
        )
    text = msgspec_source(schema) if form == "msgspec" else pydantic_source(schema)
    notes = "".join(
        refusal_comment("#", codec, schema.name, w) for codec, w in refused.items()
    )
    return notes + text


def _check_logic(
    schema: UserSchema, logic: str, args: argparse.Namespace, options: SynthOptions
) -> int:
    """`check --logic`: the handler's verdict per codec (raises `ConfigError`)."""
    handler = load_handler(logic)
    source = "synthetic"
    if args.recording is not None:
        payloads, source = recorded_payloads(args.recording, args.schema, args.count)
    else:
        payloads = make_payloads(
            schema.shape, args.count, seed=args.seed, options=options
        )
    report = check_logic(
        schema, logic, handler, payloads, source=source, codecs=args.codecs
    )
    print(render_logic(report))
    return 0 if report.ok else 1
