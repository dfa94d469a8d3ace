"""The fan-out writer: one `ProducerLoop`, a sender that writes each seq to every topic."""

from __future__ import annotations

import itertools
import json
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import Producer

from codec import REAL_CODECS
from loadgen.cli import RUN_FLAGS, build_parser
from loadgen.config import TOOL, LoadgenSettings
from loadgen.generator import START_DELAY_S, topic_partitions
from loadgen.producer import ProducerLoop
from loadgen.report import Aggregator, Summary, to_json
from loadgen.schedule import build_schedule, plan
from loadgen.sender import Sender, SenderFactory, Stamps
from loadgen.source import Source, synthetic_source, value_bytes_sent
from schemas.errors import ConfigError, LoadgenError
from service.kafka.headers import CONTENT_TYPE, RUN_ID, SENT_NS, SEQ
from service.settings.cli_flags import settings_or_status

Targets = Sequence[tuple[str, Source]]
"""Each topic with the pool it gets (encoded with its codec)."""


def fanout_sender(targets: Targets, poll: Callable[[float], Any]) -> SenderFactory:
    """A sender factory writing every seq to each of `targets`, in order.

    A full queue on the first topic ends the slice there (the loop serves
    delivery reports and retries the seq); on a later topic it is served at once
    (`poll`) and that topic retried, so no topic is left without a seq another got.

    Performance note: 4 header tuples and one `produce()` per topic per message,
    as the single-topic sender; the payload index is computed once per seq.
    """

    def factory(
        produce: Callable[..., None], s: LoadgenSettings, _source: Source, stride: int
    ) -> Sender:
        run_h = (RUN_ID, s.run_id.encode())
        prepared = [
            (topic, src.values, src.keys, (CONTENT_TYPE, src.content_type))
            for topic, src in targets
        ]
        count = len(prepared[0][1])
        head, rest = prepared[0], prepared[1:]

        def send(first: int, n: int, stamps: Stamps) -> int:
            times = itertools.repeat(stamps) if isinstance(stamps, int) else stamps
            done = 0
            for seq, ns in zip(
                range(first, first + n * stride, stride), times, strict=False
            ):
                i, ms = seq % count, ns // 1_000_000
                sent_h, seq_h = (SENT_NS, b"%d" % ns), (SEQ, b"%d" % seq)
                topic, values, keys, ct_h = head
                try:
                    h = [sent_h, ct_h, seq_h, run_h]
                    produce(topic, values[i], keys[i], -1, None, None, ms, h)
                except BufferError:
                    return done
                for topic, values, keys, ct_h in rest:
                    h = [sent_h, ct_h, seq_h, run_h]
                    while True:
                        try:
                            produce(topic, values[i], keys[i], -1, None, None, ms, h)
                            break
                        except BufferError:
                            poll(0.005)
                done += 1
            return done

        return send

    return factory


def targets_of(s: LoadgenSettings, also: Sequence[str]) -> list[LoadgenSettings]:
    """The settings of every topic: `s`'s, then one per `TOPIC=CODEC` of `also`.

    Raises:
        ConfigError: a malformed `--also`, an unknown codec, or an option the
            fan-out does not support.
    """
    if s.replay is not None or s.encode_live or s.processes != 1:
        raise ConfigError(
            "loadgen.fanout: synthetic payloads and one process only "
            "(no --replay, --encode-live or --processes)"
        )
    found = [s]
    for item in also:
        topic, sep, codec = item.partition("=")
        if not sep or not topic or codec not in REAL_CODECS:
            raise ConfigError(
                f"--also {item!r}: expected TOPIC=CODEC with CODEC one of "
                f"{', '.join(REAL_CODECS)}"
            )
        found.append(s.model_copy(update={"topic": topic, "codec": codec}))
    return found


def run(
    targets: Sequence[LoadgenSettings], stop: Callable[[], bool]
) -> tuple[Summary, dict[str, float]]:
    """Write the run to every target's topic; its summary and each topic's bytes
    per message.

    Raises:
        ConfigError: a topic is missing (and not created).
        LoadgenError: Kafka cannot be reached, or the producer failed.
    """
    s = targets[0]
    for t in targets:
        topic_partitions(t)
    sources = [synthetic_source(t) for t in targets]
    schedule = build_schedule(s, sources[0])
    total, window = plan(s, schedule, sources[0])
    agg = Aggregator(1, window, total if schedule is not None else None)
    producers: list[Any] = []

    def producer(conf: dict[str, Any]) -> Any:
        producers.append(Producer(conf))
        return producers[-1]

    pairs = [(t.topic, src) for t, src in zip(targets, sources, strict=True)]
    loop = ProducerLoop(
        s,
        sources[0],
        0,
        agg.merge,
        producer_factory=producer,
        sender_factory=fanout_sender(pairs, lambda t: producers[0].poll(t)),
    )
    try:
        loop.warm_up()
        for t in targets[1:]:
            loop.producer.list_topics(t.topic, timeout=10)
        interrupted = loop.run(time.time_ns() + int(START_DELAY_S * 1e9), stop)
    finally:
        loop.close()
    if agg.fatal:
        raise LoadgenError("; ".join(agg.fatal))
    meta = {
        "run_id": s.run_id,
        "topic": ",".join(t.topic for t in targets),
        "codec": ",".join(t.codec_label for t in targets),
        "profile": s.schema_spec,
        "pattern": s.pattern,
    }
    summary = agg.summary(meta, interrupted=interrupted)
    summary.acked //= len(targets)  # every topic acknowledged each message
    sent = max(summary.sent, 1)
    wire = {
        t.topic: value_bytes_sent(src, t, 0, summary.sent) / sent
        for t, src in zip(targets, sources, strict=True)
    }
    return summary, wire


def main(argv: Sequence[str] | None = None) -> int:
    """Run the fan-out; 0 when every message was acknowledged on every topic, 1
    otherwise, 2 for a bad configuration."""
    rest = list(sys.argv[1:] if argv is None else argv)
    also: list[str] = []
    while "--also" in rest:
        at = rest.index("--also")
        also.append(rest[at + 1] if at + 1 < len(rest) else "")
        del rest[at : at + 2]
    settings = settings_or_status(
        LoadgenSettings, TOOL, build_parser().parse_args(rest), RUN_FLAGS
    )
    if isinstance(settings, int):
        return settings
    from service.telemetry.log_setup import configure_logging

    configure_logging(settings.log_level, "console", stream=sys.stderr)
    stop = threading.Event()
    try:
        summary, wire = run(targets_of(settings, also), stop.is_set)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    except LoadgenError as exc:
        print(f"loadgen.fanout: error: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({"wire_bytes": wire}))
    print(to_json(summary))
    return summary.exit_code
