"""`codec-bench`: command-line entry point (also `python -m codecbench`).

    codec-bench [--codecs a,b] [--profiles small,medium] [--schemas M:N,...]
                [--repeats N] [--json]

Prints a table (rich on a terminal, Markdown otherwise) or, with `--json`, the
`BenchReport` as one JSON object; `--out FILE` also writes that JSON to FILE.
Exit status: 0 on success, 2 for a bad flag (one line on stderr, nothing run).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

import msgspec

from codec import REAL_CODECS
from codecbench.bench import (
    DEFAULT_ALLOC_CALLS,
    DEFAULT_MIN_TIME_S,
    DEFAULT_POOL_SIZE,
    DEFAULT_REPEATS,
    DEFAULT_WARMUPS,
    run,
)
from codecbench.render import print_table
from loadgen.payloads import DEFAULT_LARGE_BYTES
from schemas.errors import ConfigError
from schemas.registry import SCHEMA_NAMES
from service import __version__


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


_FLAGS: Final[list[tuple[str, Callable[[str], Any], Any, str, str]]] = [
    ("--codecs", _names, REAL_CODECS, "A,B", "wire codecs, comma-separated"),
    (
        "--profiles",
        _names,
        SCHEMA_NAMES,
        "P,Q",
        "payload profiles, comma-separated (none: an empty value, with --schemas)",
    ),
    (
        "--schemas",
        _names,
        (),
        "M:N,...",
        "your own models or Structs (MODULE:NAME), each measured beside the "
        "profiles with synthetic payloads and the logic that reads every field; a "
        "codec that cannot carry one is left out of it, with why",
    ),
    (
        "--large-bytes",
        int,
        DEFAULT_LARGE_BYTES,
        "BYTES",
        "JSON size of a large payload",
    ),
    ("--pool-size", int, DEFAULT_POOL_SIZE, "N", "distinct seeded payloads, cycled"),
    ("--repeats", int, DEFAULT_REPEATS, "N", "kept samples per figure"),
    ("--warmups", int, DEFAULT_WARMUPS, "N", "discarded samples after calibration"),
    (
        "--min-time",
        float,
        DEFAULT_MIN_TIME_S,
        "SECONDS",
        "shortest sample: the loop count doubles until a sample lasts this long, "
        "so samples last 1-2x it",
    ),
    (
        "--alloc-calls",
        int,
        DEFAULT_ALLOC_CALLS,
        "N",
        "messages per allocation pass (the pool's first N)",
    ),
    ("--seed", int, 0, "N", "payload generator seed"),
    (
        "--read-fields",
        str,
        "3",
        "A,B.C|K",
        "what the +k column reads after decode: dotted field paths (through a "
        "list: every item), or a count K (the first K top-level fields)",
    ),
]
"""(flag, parser, default, metavar, help) of every valued flag."""


def _shown(default: Any) -> str:
    return ",".join(default) if isinstance(default, tuple) else str(default)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser; every help text states its default."""
    parser = argparse.ArgumentParser(
        prog="codec-bench",
        description="In-process micro-benchmark of every codec on every payload "
        "profile: CPU us per message for decode, decode+read (the schema's logic), "
        "+all (every field read into Python values: like with like), +k (only "
        "--read-fields read) and encode, bytes allocated per message, and garbage "
        "collections per 1,000 messages.",
    )
    for flag, kind, default, metavar, text in _FLAGS:
        parser.add_argument(
            flag,
            type=kind,
            default=default,
            metavar=metavar,
            help=f"{text} (default: {_shown(default)})",
        )
    parser.add_argument(
        "--read",
        type=int,
        metavar="K",
        help="the same as --read-fields K (default: --read-fields)",
    )
    parser.add_argument(
        "--run-validators",
        action="store_true",
        help="--schemas: the derived Structs run your model's after validators, as "
        "codec-worker --run-validators (default: off)",
    )
    parser.add_argument(
        "--framing",
        choices=("none", "confluent"),
        default="none",
        help="confluent: also measure each codec with a registry type behind the "
        "schema registry's frame, the row <codec>+confluent after its twin "
        "(default: none)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the report as one JSON object instead of the table",
    )
    parser.add_argument(
        "--out", type=Path, metavar="FILE", help="also write the report's JSON to FILE"
    )
    parser.add_argument("--version", action="version", version=__version__)
    return parser


def _progress(text: str) -> None:
    print(f"measuring {text}", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark; return the exit status (2 for a bad flag)."""
    args = build_parser().parse_args(argv)
    try:
        if args.out is not None and not args.out.parent.is_dir():
            raise ConfigError(f"--out: {str(args.out.parent)!r} is not a directory")
        report = run(
            args.codecs,
            args.profiles,
            pool_size=args.pool_size,
            repeats=args.repeats,
            warmups=args.warmups,
            min_time_s=args.min_time,
            seed=args.seed,
            large_bytes=args.large_bytes,
            alloc_calls=args.alloc_calls,
            read_fields=str(args.read) if args.read is not None else args.read_fields,
            progress=_progress if sys.stderr.isatty() else None,
            schemas=args.schemas,
            framing=args.framing,
            run_validators=args.run_validators,
        )
    except ConfigError as exc:
        print(f"codec-bench: error: {exc}", file=sys.stderr)
        return 2
    data = msgspec.json.encode(report)
    if args.out is not None:
        args.out.write_bytes(data + b"\n")
    if args.json:
        print(data.decode())
    else:
        print_table(report, sys.stdout)
    return 0
