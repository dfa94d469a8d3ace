"""`codec-loadgen`: command-line entry point (also `python -m loadgen`).

    codec-loadgen [--rate R] [--duration S | --count N] [--codec C] [--schema S] ...
    codec-loadgen --schema MODULE:NAME [--list-len 2,4] [--str-len 5,20] ...
    codec-loadgen --replay FILE [--speed X | --rate R] [--transcode C] ...
    codec-loadgen record --topic T --out FILE [--max N] [--timeout S]

Every flag maps to one `LoadgenSettings` field with a `LOADGEN_*` environment variable
and a TOML key; `--help` shows each default. Exit status: 0 when every message was
acknowledged, 1 if any delivery failed (or Kafka could not be reached), 2 for a bad
configuration (reported before Kafka is touched, when it can be known up front).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from loadgen.config import SYNTH_SIZES, TOOL, LoadgenSettings
from schemas.errors import ConfigError
from schemas.registry import SPEC_HELP
from schemas.user.synthetic import SynthOptions
from service.settings.cli_flags import (
    KAFKA_FLAGS,
    REGISTRY_FLAGS,
    Flag,
    add_flags,
    command_parser,
    settings_or_status,
)


def _flags(rows: list[tuple[str, Any, str]]) -> tuple[Flag, ...]:
    """`--field-name` flags for flat `(field, type, help)` rows."""
    return tuple(Flag("--" + f.replace("_", "-"), (f,), h, k) for f, k, h in rows)


_RUN: Final = _flags(
    [
        ("topic", str, "topic to write; it must exist unless --create-topics"),
        ("partitions", int, "partitions of the topic --create-topics creates"),
        ("codec", str, "codec writing the payloads: any registry key but auto"),
        ("framing", str, "none|confluent: register the schema, write framed values"),
        ("schema", str, f"what to send: {SPEC_HELP}"),
        ("profile", str, "the older name of --schema: small|medium|large"),
        ("large_bytes", int, "JSON size of a large payload"),
        ("list_len", str, "user schema: items per list, LO,HI"),
        ("map_len", str, "user schema: entries per map, LO,HI"),
        ("str_len", str, "user schema: characters per string, LO,HI"),
        ("bytes_len", str, "user schema: bytes per bytes value, LO,HI"),
        ("none_ratio", float, "user schema: share of optional fields left None"),
        ("rate", float, "target msg/s (0: unthrottled); the peak of ramp/step"),
        ("duration", float, "seconds to run"),
        ("count", int, "messages to send (with --duration: whichever ends first)"),
        ("pattern", str, "rate pattern: constant|ramp|step|spike"),
        ("start_rate", float, "ramp/step: the rate they start from"),
        ("ramp_s", float, "ramp: seconds from --start-rate to --rate"),
        ("steps", int, "step: equal steps from --start-rate up to --rate"),
        ("step_s", float, "step: seconds per step"),
        ("spike_rate", float, "spike: rate during the spike"),
        ("spike_at_s", float, "spike: seconds before it starts"),
        ("spike_s", float, "spike: how long it lasts"),
        ("seed", int, "payload generator seed"),
        ("pool_size", int, "distinct pre-encoded payloads, cycled by x-seq"),
        ("key", str, "message key: entity (the payload's id field)|seq|none"),
        ("run_id", str, "x-run-id header"),
        ("processes", int, "producer processes sharing the rate (x-seq strided)"),
        ("replay", Path, "replay a recording instead of synthetic payloads"),
        ("speed", float, "replay at the recorded pace times this (not with --rate)"),
        ("transcode", str, "replay: re-encode every message with this codec"),
        ("progress", str, "live display on stderr: auto (terminals)|always|never"),
        ("metrics_port", int, "serve Prometheus /metrics on this port (0: any free)"),
        ("metrics_host", str, "metrics bind address"),
        ("client_id", str, "Kafka client.id"),
        ("acks", str, "all|1|0 (idempotence needs all)"),
        ("linger_ms", float, "librdkafka linger.ms: batching delay"),
        ("compression", str, "none|gzip|snappy|lz4|zstd"),
        ("delivery_timeout_s", float, "message.timeout.ms, and the final flush's wait"),
        ("log_level", str, "debug|info|warning|error: Kafka client lines on stderr"),
    ]
)
_SWITCHES: Final = (
    Flag(
        "--encode-live", ("encode_live",), "encode each message when sent", boolean=True
    ),
    Flag(
        "--keep-partitions",
        ("keep_partitions",),
        "replay: send each message to its recorded partition",
        boolean=True,
        default="yes if the topic has the recorded partitions",
    ),
    Flag("--idempotence", ("idempotence",), "idempotent producer", boolean=True),
    Flag(
        "--create-topics",
        ("create_topics",),
        "create the topic if it is missing (else: exit 2)",
        boolean=True,
    ),
)
_RECORD: Final = (
    Flag("--topic", ("topic",), "topic to read"),
    Flag("--client-id", ("client_id",), "Kafka client.id"),
    Flag("--out", ("record_out",), "the recording file (.gz: gzip-compressed)", Path),
    Flag("--max", ("record_max",), "stop after this many messages", int),
    Flag("--timeout", ("record_timeout_s",), "stop after this long idle (s)", float),
    Flag("--start", ("record_start",), "earliest (the whole topic)|latest (from now)"),
    Flag("--log-level", ("log_level",), "debug|info|warning|error: Kafka client lines"),
)
_OUTPUT: Final = Flag("--output", ("output",), "summary format on stdout: table|json")


def _synth_default(name: str) -> str:
    value = getattr(SynthOptions(), name)
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


_DEFAULTS: Final = {
    "schema": "--profile",
    **{name: _synth_default(name) for name in SYNTH_SIZES},
    "duration": "60 s unless --count is given",
    "ramp_s": "--duration",
    "spike_rate": "2 x --rate",
    "run_id": "random hex",
    "speed": "1, the recorded pace, unless --rate is given",
}
"""Defaults that depend on other settings, described for --help."""


def _described(flags: tuple[Flag, ...]) -> tuple[Flag, ...]:
    return tuple(
        Flag(f.flag, f.path, f.help, f.type, f.boolean, _DEFAULTS.get(f.path[0]))
        if f.path[0] in _DEFAULTS
        else f
        for f in flags
    )


RUN_FLAGS: Final = (
    *KAFKA_FLAGS,
    *REGISTRY_FLAGS,
    *_described(_RUN),
    *_SWITCHES,
    _OUTPUT,
)
RECORD_FLAGS: Final = (*KAFKA_FLAGS, *_RECORD)


def build_parser() -> argparse.ArgumentParser:
    """The produce/replay parser; help texts state defaults and variables."""
    parser = command_parser(
        "codec-loadgen",
        "Produce paced, header-stamped traffic to Kafka with any codec, or replay a "
        "recording (see 'codec-loadgen record --help'). Precedence: defaults < "
        "--config TOML ([kafka], [loadgen]) < environment (KAFKA_*, LOADGEN_*) < flags.",
        TOOL,
    )
    add_flags(parser, RUN_FLAGS, LoadgenSettings, TOOL)
    parser.add_argument(
        "--json",
        dest="output",
        action="store_const",
        const="json",
        help="print the summary as one JSON object on stdout (= --output json)",
    )
    return parser


def build_record_parser() -> argparse.ArgumentParser:
    """The `record` subcommand's parser."""
    parser = command_parser(
        "codec-loadgen record",
        "Capture a topic's messages (keys, values, headers, timestamps, partitions) "
        "into a recording file for --replay.",
        TOOL,
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    add_flags(parser, RECORD_FLAGS, LoadgenSettings, TOOL)
    return parser


def _stop_on_signals() -> threading.Event:
    """SIGTERM and the first Ctrl+C stop the run gracefully; a second Ctrl+C aborts."""
    stop = threading.Event()

    def handler(signum: int, _frame: object) -> None:
        if stop.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        stop.set()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, handler)
        signal.signal(signal.SIGTERM, handler)
    return stop


def main(argv: Sequence[str] | None = None) -> int:
    """Run `codec-loadgen`; return the exit status (2 for a bad configuration)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    recording = bool(argv) and argv[0] == "record"
    parser = build_record_parser() if recording else build_parser()
    args = parser.parse_args(argv[1:] if recording else argv)
    flags = RECORD_FLAGS if recording else RUN_FLAGS
    settings = settings_or_status(LoadgenSettings, TOOL, args, flags)
    if isinstance(settings, int):
        return settings
    from schemas.errors import LoadgenError
    from service.telemetry.log_setup import configure_logging

    # stdout holds the summary (a table or one JSON object): log lines go to stderr.
    configure_logging(settings.log_level, "console", stream=sys.stderr)
    try:
        if recording:
            return _record(settings, as_json=args.json)
        return _produce(settings)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    except LoadgenError as exc:
        print(f"codec-loadgen: error: {exc}", file=sys.stderr)
        return 1


def _produce(settings: LoadgenSettings) -> int:
    from loadgen.generator import run
    from loadgen.report import ProgressDisplay, render_table, to_json

    stop = _stop_on_signals()
    with ProgressDisplay(settings.progress) as display:
        summary = run(settings, on_progress=display.update, stop=stop.is_set)
    print(to_json(summary) if settings.output == "json" else render_table(summary))
    return summary.exit_code


def _record(settings: LoadgenSettings, *, as_json: bool) -> int:
    from loadgen.recording import record

    stop = _stop_on_signals()
    count, info = record(settings, stop=stop.is_set)
    result = {
        "out": str(settings.record_out),
        "messages": count,
        "topic": info.topic,
        "partitions": info.partitions,
    }
    if as_json:
        print(json.dumps(result))
    else:
        print(
            f"recorded {count:,} messages from {info.topic} ({info.partitions} "
            f"partitions) to {settings.record_out}",
            file=sys.stderr,
        )
    return 0
