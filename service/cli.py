"""`codec-worker`: command-line entry point (also `python -m service`).

Every flag maps to one settings field, has an environment variable and a TOML key;
`--help` shows each default. A bad configuration prints the field, the value and
what is allowed, and exits with status 2 before any connection to Kafka.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from service import __version__
from service.children import die_with_parent
from service.codecs import CODEC_NAMES
from service.config import ENV_PREFIX, Settings, load_settings
from service.errors import ConfigError

# (flag, dotted settings path, type, help)
_FLAGS: Final[list[tuple[str, str, type, str]]] = [
    ("--bootstrap-servers", "kafka.bootstrap_servers", str, "Kafka bootstrap servers"),
    ("--topic", "kafka.topic", str, "input topic"),
    ("--group", "kafka.group_id", str, "consumer group id"),
    ("--auto-offset-reset", "kafka.auto_offset_reset", str, "earliest|latest|error"),
    ("--codec", "codec.name", str, "codec key (see --list-codecs)"),
    ("--schema", "codec.schema", str, "small|medium|large"),
    ("--auto-json", "codec.auto_json", str, "JSON codec of the auto codec"),
    ("--auto-output", "codec.auto_output", str, "output codec of the auto codec"),
    ("--max-payload-bytes", "codec.max_payload_bytes", int, "larger payloads are dead-lettered undecoded"),
    ("--batch-size", "processing.batch_size", int, "messages per consume() call at most"),
    ("--batch-timeout-ms", "processing.batch_timeout_ms", float, "longest wait for a batch: the latency/CPU knob"),
    ("--logic", "processing.logic", str, "business logic: aggregate|noop"),
    ("--work-us", "processing.work_us", float, "extra busy CPU per message, microseconds"),
    ("--output-topic", "processing.output_topic", str, "write each result, re-encoded with the codec, here"),
    ("--dlq-topic", "processing.dlq_topic", str, "dead-letter topic (default <topic>.dlq)"),
    ("--on-decode-error", "processing.on_decode_error", str, "dead_letter|fail"),
    ("--processes", "processing.processes", int, "worker processes in this group on this host"),
    ("--metrics-host", "metrics.host", str, "control-plane bind address"),
    ("--metrics-port", "metrics.port", int, "control-plane port (0: any free port)"),
    ("--summary-interval-s", "metrics.summary_interval_s", float, "seconds between summary log lines"),
    ("--latency-sample-every", "metrics.latency_sample_every", int, "time end-to-end latency of every k-th message"),
    ("--log-level", "logging.level", str, "debug|info|warning|error"),
    ("--log-format", "logging.format", str, "json|console"),
]  # fmt: skip


def _default(path: str) -> Any:
    node: Any = Settings()
    for part in path.split("."):
        node = getattr(node, "schema_" if part == "schema" else part)
    return node.value if hasattr(node, "value") else node


def _env_name(path: str) -> str:
    return ENV_PREFIX + path.upper().replace(".", "__")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser; help texts state defaults and environment variables."""
    parser = argparse.ArgumentParser(
        prog="codec-worker",
        description="Consume a Kafka topic, decode with the chosen codec, run the "
        "stub logic, export metrics. Precedence: defaults < --config TOML < "
        f"{ENV_PREFIX}* environment < flags.",
    )
    parser.add_argument("--config", type=Path, help="TOML file with the same sections")
    for flag, path, kind, text in _FLAGS:
        parser.add_argument(
            flag,
            dest=path,
            type=kind,
            default=None,
            metavar=path.rsplit(".", 1)[-1].upper(),
            help=f"{text} (default: {_default(path)}; env {_env_name(path)})",
        )
    parser.add_argument(
        "-X",
        dest="extra",
        action="append",
        metavar="KEY=VALUE",
        default=[],
        help="librdkafka setting passed through, repeatable (env "
        f"{ENV_PREFIX}KAFKA__EXTRA as a JSON object)",
    )
    parser.add_argument("--list-codecs", action="store_true", help="list codecs, exit")
    parser.add_argument(
        "--print-config", action="store_true", help="print the effective config, exit"
    )
    parser.add_argument("--version", action="version", version=__version__)
    return parser


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for _flag, path, _kind, _text in _FLAGS:
        value = getattr(args, path)
        if value is not None:
            section, key = path.split(".")
            tree.setdefault(section, {})[key] = value
    extra: dict[str, str] = {}
    for item in args.extra:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"config error: -X {item!r}: expected KEY=VALUE")
        extra[key] = value
    if extra:
        tree.setdefault("kafka", {})["extra"] = extra
    return tree


def _list_codecs() -> str:
    from service.codecs import get_codec

    rows = [f"{'codec':22} {'content-type':26} decoded type"]
    for name in CODEC_NAMES:
        codec = get_codec(name, "small")
        kind = "per content-type" if name == "auto" else codec.native_type.__module__
        rows.append(f"{name:22} {codec.content_type:26} {kind}")
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the worker; return the exit status (2 for a bad configuration)."""
    args = build_parser().parse_args(argv)
    if args.list_codecs:
        print(_list_codecs())
        return 0
    try:
        settings = load_settings(_overrides(args), config_file=args.config)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.print_config:
        print(json.dumps(settings.masked(), indent=2))
        return 0
    if settings.processing.processes > 1:
        return _supervise(settings, list(sys.argv[1:] if argv is None else argv))
    return _run(settings)


def _run(settings: Settings) -> int:
    from service.app import Worker
    from service.logging import configure_logging

    configure_logging(settings.logging.level, settings.logging.format)
    worker = Worker(settings)
    worker.install_signal_handlers()
    try:
        return worker.run()
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2


def _supervise(settings: Settings, argv: list[str]) -> int:
    """Run N worker processes in the same group; metrics ports P, P+1, ...

    Signals are forwarded to every child. If the supervisor dies, its children get
    SIGTERM from the kernel (Linux `PR_SET_PDEATHSIG`) and shut down cleanly. If one
    child fails, the others are stopped and its exit status is returned, so an
    orchestrator sees the failure and restarts the whole set.
    """
    base_port = settings.metrics.port
    children = []
    for i in range(settings.processing.processes):
        port = 0 if base_port == 0 else base_port + i
        cmd = [sys.executable, "-m", "service", *argv, "--processes", "1"]
        cmd += ["--metrics-port", str(port)]
        children.append(
            subprocess.Popen(cmd, env=os.environ.copy(), preexec_fn=die_with_parent())  # noqa: S603
        )

    def forward(signum: int, _frame: object) -> None:
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    while True:
        codes = [child.poll() for child in children]
        failed = [c for c in codes if c not in (None, 0)]
        if failed:
            forward(signal.SIGTERM, None)
            for child in children:
                child.wait()
            return failed[0]
        if all(c == 0 for c in codes):
            return 0
        time.sleep(0.2)
