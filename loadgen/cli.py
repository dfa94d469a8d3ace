"""`codec-loadgen`: command-line entry point (also `python -m loadgen`).

    codec-loadgen [--rate R] [--duration S | --count N] [--codec C] [--profile P] ...
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

from loadgen.config import (
    ENV_PREFIX,
    LoadgenSettings,
    env_name,
    flag_name,
    load_settings,
)
from service import __version__
from service.errors import ConfigError

# (field, type, help); the flag is --field-with-dashes unless config.FLAGS says otherwise
_RUN: Final[list[tuple[str, Any, str]]] = [
    ("bootstrap_servers", str, "Kafka bootstrap servers"),
    ("topic", str, "topic to write (record: to read); it must exist"),
    ("codec", str, "codec writing the payloads: any registry key but auto"),
    ("profile", str, "payload profile / schema: small|medium|large"),
    ("large_bytes", int, "JSON size of a large payload"),
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
    ("key", str, "message key: entity (the payload's id)|seq|none"),
    ("run_id", str, "x-run-id header"),
    ("processes", int, "producer processes sharing the rate (x-seq strided)"),
    ("replay", Path, "replay a recording instead of synthetic payloads"),
    ("speed", float, "replay at the recorded pace times this (exclusive with --rate)"),
    ("transcode", str, "replay: re-encode every message with this codec"),
    ("progress", str, "live display on stderr: auto (terminals only)|always|never"),
    ("metrics_port", int, "serve Prometheus /metrics on this port (0: any free)"),
    ("metrics_host", str, "metrics bind address"),
    ("client_id", str, "Kafka client.id"),
    ("acks", str, "all|1|0 (idempotence needs all)"),
    ("linger_ms", float, "librdkafka linger.ms: batching delay"),
    ("compression", str, "none|gzip|snappy|lz4|zstd"),
    ("delivery_timeout_s", float, "message.timeout.ms, and the final flush's wait"),
    ("security_protocol", str, "PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL"),
    ("sasl_mechanism", str, "PLAIN|SCRAM-SHA-256|SCRAM-SHA-512|OAUTHBEARER"),
    ("sasl_username", str, "SASL user name"),
    ("sasl_password", str, "SASL password (prefer the environment variable)"),
    ("ssl_ca_location", str, "CA certificate file"),
]
_BOOLS: Final[list[tuple[str, str]]] = [
    ("encode_live", "encode each message when sent (measures encode cost)"),
    ("keep_partitions", "replay: send each message to its recorded partition"),
    ("idempotence", "idempotent producer"),
]
_RECORD: Final[list[tuple[str, str, Any, str]]] = [
    ("--out", "record_out", Path, "the recording file (.gz: gzip-compressed)"),
    ("--max", "record_max", int, "stop after this many messages"),
    (
        "--timeout",
        "record_timeout_s",
        float,
        "stop after this long with no message (s)",
    ),
    ("--start", "record_start", str, "earliest (the whole topic)|latest (from now)"),
]
_COMMON: Final = {"bootstrap_servers", "topic", "client_id", "security_protocol"} | {
    "sasl_mechanism", "sasl_username", "sasl_password", "ssl_ca_location"
}  # fmt: skip


_DEFAULTS: Final = {
    "duration": "60 s unless --count is given",
    "ramp_s": "--duration",
    "spike_rate": "2 x --rate",
    "run_id": "random hex",
    "keep_partitions": "yes if the topic has the recorded partitions",
    "speed": "1, the recorded pace, unless --rate is given",
}
"""Defaults that depend on other settings, described for --help."""


def _default(field: str) -> str:
    if field in _DEFAULTS:
        return _DEFAULTS[field]
    value = LoadgenSettings.model_fields[field].default
    return "unset" if value is None else str(value)


def _help(field: str, text: str) -> str:
    return f"{text} (default: {_default(field)}; env {env_name(field)})".replace(
        "%", "%%"
    )


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", type=Path, help="TOML file of settings (field = value)"
    )
    parser.add_argument(
        "-X",
        dest="extra",
        action="append",
        metavar="KEY=VALUE",
        default=[],
        help="librdkafka setting, repeatable; may override the batching defaults, not "
        f"a typed flag (env {ENV_PREFIX}EXTRA as a JSON object)",
    )
    parser.add_argument(
        "--print-config", action="store_true", help="print the effective settings, exit"
    )


def build_parser() -> argparse.ArgumentParser:
    """The produce/replay parser; help texts state defaults and variables."""
    parser = argparse.ArgumentParser(
        prog="codec-loadgen",
        description="Produce paced, header-stamped traffic to Kafka with any codec, "
        "or replay a recording (see 'codec-loadgen record --help'). Precedence: "
        f"defaults < --config TOML < {ENV_PREFIX}* environment < flags.",
    )
    for field, kind, text in _RUN:
        parser.add_argument(
            flag_name(field), dest=field, type=kind, default=None,
            metavar=field.upper(), help=_help(field, text),
        )  # fmt: skip
    for field, text in _BOOLS:
        parser.add_argument(
            flag_name(field), dest=field, default=None,
            action=argparse.BooleanOptionalAction, help=_help(field, text),
        )  # fmt: skip
    parser.add_argument(
        "--output", dest="output", choices=["table", "json"], default=None,
        help=_help("output", "summary format on stdout"),
    )  # fmt: skip
    parser.add_argument(
        "--json", dest="output", action="store_const", const="json",
        help="print the summary as one JSON object on stdout (= --output json)",
    )  # fmt: skip
    _add_common(parser)
    parser.add_argument("--version", action="version", version=__version__)
    return parser


def build_record_parser() -> argparse.ArgumentParser:
    """The `record` subcommand's parser."""
    parser = argparse.ArgumentParser(
        prog="codec-loadgen record",
        description="Capture a topic's messages (keys, values, headers, timestamps, "
        "partitions) into a recording file for --replay.",
    )
    for field, kind, text in _RUN:
        if field in _COMMON:
            parser.add_argument(
                flag_name(field), dest=field, type=kind, default=None,
                metavar=field.upper(), help=_help(field, text),
            )  # fmt: skip
    for flag, field, kind, text in _RECORD:
        parser.add_argument(
            flag, dest=field, type=kind, default=None, metavar=field.upper(),
            help=_help(field, text),
        )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    _add_common(parser)
    return parser


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    fields = LoadgenSettings.model_fields
    tree = {k: v for k, v in vars(args).items() if k in fields and v is not None}
    tree.pop("extra", None)
    extra: dict[str, str] = {}
    for item in args.extra:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"config error: -X {item!r}: expected KEY=VALUE")
        extra[key] = value
    if extra:
        tree["extra"] = extra
    return tree


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


def _masked(settings: LoadgenSettings) -> dict[str, Any]:
    data = settings.model_dump(mode="json")
    data["extra"] = {k: "**********" if "pass" in k or "secret" in k else v for k, v in settings.extra.items()}  # fmt: skip
    return data


def main(argv: Sequence[str] | None = None) -> int:
    """Run `codec-loadgen`; return the exit status (2 for a bad configuration)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    recording = bool(argv) and argv[0] == "record"
    parser = build_record_parser() if recording else build_parser()
    args = parser.parse_args(argv[1:] if recording else argv)
    try:
        settings = load_settings(_overrides(args), config_file=args.config)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.print_config:
        print(json.dumps(_masked(settings), indent=2))
        return 0
    try:
        if recording:
            return _record(settings, as_json=args.json)
        return _produce(settings)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2


def _produce(settings: LoadgenSettings) -> int:
    from loadgen.generator import run
    from loadgen.report import ProgressDisplay, render_table, to_json
    from service.errors import LoadgenError

    stop = _stop_on_signals()
    try:
        with ProgressDisplay(settings.progress) as display:
            summary = run(settings, on_progress=display.update, stop=stop.is_set)
    except LoadgenError as exc:
        print(f"codec-loadgen: error: {exc}", file=sys.stderr)
        return 1
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
