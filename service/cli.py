"""`codec-worker`: command-line entry point (also `python -m service`).

Every flag maps to one settings field, has an environment variable and a TOML key;
`--help` shows each default. A bad configuration prints the field, the value and
what is allowed, and exits with status 2 before any connection to Kafka.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Final

from codec import CODEC_NAMES
from schemas.errors import ConfigError
from schemas.registry import SPEC_HELP
from service.lifecycle import signals
from service.lifecycle.child_processes import die_with_parent
from service.settings.cli_flags import (
    KAFKA_FLAGS,
    REGISTRY_FLAGS,
    Flag,
    add_flags,
    command_parser,
    settings_or_status,
)
from service.settings.worker import TOOL, Settings

_FLAGS: Final = (
    *KAFKA_FLAGS,
    *REGISTRY_FLAGS,
    Flag("--topic", ("consumer", "topic"), "input topic"),
    Flag("--group", ("consumer", "group_id"), "consumer group id"),
    Flag(
        "--auto-offset-reset",
        ("consumer", "auto_offset_reset"),
        "earliest|latest|error",
    ),
    Flag(
        "--session-timeout-ms",
        ("consumer", "session_timeout_ms"),
        "a silent member's partitions move after this long",
        int,
    ),
    Flag(
        "--group-instance-id",
        ("consumer", "group_instance_id"),
        "static membership: a restart keeps the partitions (no rebalance)",
    ),
    Flag("--codec", ("codec", "name"), "codec key (see --list-codecs)"),
    Flag("--schema", ("codec", "schema"), SPEC_HELP),
    Flag("--auto-json", ("codec", "auto_json"), "JSON codec of the auto codec"),
    Flag("--auto-output", ("codec", "auto_output"), "output codec of the auto codec"),
    Flag(
        "--framing",
        ("codec", "framing"),
        "none|confluent: values in the schema registry's frame ([registry])",
    ),
    Flag(
        "--max-payload-bytes",
        ("codec", "max_payload_bytes"),
        "larger payloads are dead-lettered undecoded",
        int,
    ),
    Flag(
        "--run-validators",
        ("codec", "run_validators"),
        "a user's pydantic model: the derived msgspec Structs run its after "
        "validators in __post_init__ (msgspec-json, msgspec-msgpack, avro, capnp)",
        boolean=True,
    ),
    Flag(
        "--shadow-codec",
        ("codec", "shadow"),
        "also decode a sample with this codec, compare field by field, count "
        "worker_shadow_total, sample disagreements to <topic>.shadow",
    ),
    Flag(
        "--shadow-sample-every",
        ("codec", "shadow_sample_every"),
        "shadow-decode every k-th message",
        int,
    ),
    Flag(
        "--batch-size",
        ("processing", "batch_size"),
        "messages per consume() at most",
        int,
    ),
    Flag(
        "--batch-max-bytes",
        ("processing", "batch_max_bytes"),
        "payload bytes per batch at most, from the last batch's mean message size",
        int,
    ),
    Flag(
        "--batch-timeout-ms",
        ("processing", "batch_timeout_ms"),
        "longest wait for a batch: the latency/CPU knob",
        float,
    ),
    Flag(
        "--offset-store-interval-ms",
        ("processing", "offset_store_interval_ms"),
        "store processed positions at most this often (0: every batch)",
        float,
    ),
    Flag(
        "--logic",
        ("processing", "logic"),
        "business logic: aggregate|noop|flaky|fields, or a team's MODULE:CALLABLE "
        "called with each decoded message (an async def, or a callable returning an "
        "awaitable, is awaited on an event loop; its return value, if not None, is "
        "the result written to --output-topic)",
    ),
    Flag(
        "--read-fields",
        ("processing", "read_fields"),
        "for --logic fields: dotted paths a,b.c, a count k (the first k fields) or all",
    ),
    Flag(
        "--max-in-flight",
        ("processing", "max_in_flight"),
        "an async handler: messages in flight at most; at the bound the partitions "
        "are paused",
        int,
    ),
    Flag(
        "--ordering",
        ("processing", "ordering"),
        "an async handler: partition|key|none, the messages handled one after "
        "another (those of a partition, of a key, or none)",
    ),
    Flag(
        "--max-attempts",
        ("processing", "max_attempts"),
        "attempts of the logic per message before the DLQ",
        int,
    ),
    Flag(
        "--retry-backoff-ms",
        ("processing", "retry_backoff_ms"),
        "pause before a logic retry, doubled each attempt",
        float,
    ),
    Flag(
        "--delivery-timeout-s",
        ("processing", "delivery_timeout_s"),
        "dead letter/output acknowledgement timeout; then pause and retry",
        float,
    ),
    Flag(
        "--startup-timeout-s",
        ("processing", "startup_timeout_s"),
        "give up (exit 1) when no broker answers at start within this; 0: wait",
        float,
    ),
    Flag(
        "--work-us", ("processing", "work_us"), "extra busy CPU per message, us", float
    ),
    Flag(
        "--message-budget-ms",
        ("processing", "message_budget_ms"),
        "longest decode plus logic of one message; past it the message is "
        "dead-lettered (reason budget), 0: none",
        float,
    ),
    Flag(
        "--output-topic",
        ("processing", "output_topic"),
        "write each result, re-encoded with the codec, here",
    ),
    Flag(
        "--dlq-topic",
        ("processing", "dlq_topic"),
        "dead-letter topic",
        default="<topic>.dlq",
    ),
    Flag("--on-decode-error", ("processing", "on_decode_error"), "dead_letter|fail"),
    Flag(
        "--processing-guarantee",
        ("processing", "processing_guarantee"),
        "at-least-once|exactly-once (each batch's results, dead letters and offsets "
        "in one transaction; read outputs with isolation.level=read_committed)",
    ),
    Flag(
        "--transactional-id",
        ("processing", "transactional_id"),
        "exactly-once: the producer's transactional.id, stable across restarts",
        default="<group>-<host>-<worker index>",
    ),
    Flag(
        "--processes", ("processing", "processes"), "worker processes on this host", int
    ),
    Flag(
        "--worker-index",
        ("processing", "index"),
        "this worker's index, logged as `worker` (--processes gives each its own)",
        int,
    ),
    Flag(
        "--create-topics",
        ("topics", "create"),
        "create missing input, dead-letter and output topics (else: exit 2)",
        boolean=True,
    ),
    Flag(
        "--partitions",
        ("topics", "partitions"),
        "partitions of a topic --create-topics creates",
        int,
    ),
    Flag("--metrics-host", ("metrics", "host"), "control-plane bind address"),
    Flag(
        "--metrics-port", ("metrics", "port"), "control-plane port (0: any free)", int
    ),
    Flag(
        "--summary-interval-s",
        ("metrics", "summary_interval_s"),
        "seconds between summary log lines",
        float,
    ),
    Flag(
        "--latency-sample-every",
        ("metrics", "latency_sample_every"),
        "time end-to-end latency of every k-th message",
        int,
    ),
    Flag("--log-level", ("logging", "level"), "debug|info|warning|error"),
    Flag("--log-format", ("logging", "format"), "json|console"),
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser; help texts state defaults and environment variables."""
    parser = command_parser(
        "codec-worker",
        "Consume a Kafka topic, decode with the chosen codec, run the stub logic, "
        "export metrics. Precedence: defaults < --config TOML ([kafka], [worker.*]) "
        "< environment (KAFKA_*, WORKER_*) < flags.",
        TOOL,
    )
    add_flags(parser, _FLAGS, Settings, TOOL)
    parser.add_argument("--list-codecs", action="store_true", help="list codecs, exit")
    return parser


def _list_codecs() -> str:
    from codec import get_codec

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
    settings = settings_or_status(Settings, TOOL, args, _FLAGS)
    if isinstance(settings, int):
        return settings
    if settings.processing.processes > 1:
        return _supervise(settings, list(sys.argv[1:] if argv is None else argv))
    return _run(settings)


def _run(settings: Settings) -> int:
    from service.app import Worker
    from service.telemetry.log_setup import configure_logging

    configure_logging(
        settings.logging.level,
        settings.logging.format,
        fields={"worker": settings.processing.index},
    )
    worker = Worker(settings)
    worker.install_signal_handlers()
    try:
        return worker.run()
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2


def _supervise(settings: Settings, argv: list[str]) -> int:
    """Run N worker processes in the same group; metrics ports P, P+1, ...

    Child i gets `--worker-index i`, logged as `worker` on each of its lines.
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
        cmd += ["--metrics-port", str(port), "--worker-index", str(i)]
        children.append(
            subprocess.Popen(cmd, env=os.environ.copy(), preexec_fn=die_with_parent())  # noqa: S603
        )

    def forward(signum: int, _frame: object) -> None:
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    if signals.received():  # during start-up: the children stop at once
        forward(signal.SIGTERM, None)
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
