"""What a batch writes and how it is delivered, built once from the settings.

The worker's loop takes three things from here: where poison goes
(`PoisonHandler`: the dead-letter topic, or a stop), where results go (the output
topic, or none), and the delivery strategy per batch: at-least-once (offsets
stored after the writes are acknowledged) or exactly-once (one transaction per
batch, `service.delivery.transactions`). Chosen here, at construction: the loop's
per-message code is the same for both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from confluent_kafka import Consumer

from service.delivery.dead_letters import PoisonHandler
from service.delivery.gated_writes import ConfirmedProducer
from service.delivery.letter_ladder import Spool
from service.delivery.transactions import Transactions
from service.kafka.batch_probe import BatchProbe
from service.kafka.protocols import KafkaProducer, WorkerConsumer
from service.settings.worker import Settings
from service.telemetry.metrics import Metrics


class BatchWrites(NamedTuple):
    """The loop's writers: `poison`, `output` (producer and topic, or None) and
    `transactions` (None: at-least-once)."""

    poison: PoisonHandler
    output: tuple[ConfirmedProducer, str] | None
    transactions: Transactions | None


def batch_writes(
    settings: Settings,
    metrics: Metrics,
    consumer: WorkerConsumer,
    producer: KafkaProducer | None,
    stopping: Callable[[], bool],
    renew: Callable[[], KafkaProducer] | None = None,
    probes: Callable[[dict[str, Any]], Any] = Consumer,
) -> BatchWrites:
    """Build the writers; with exactly-once this calls `init_transactions` (the
    broker is contacted). `renew` builds another producer like `producer` (the
    same `transactional.id`), for when that one becomes unusable; `probes` the
    consumer that finds where an unreadable batch ends (made when one is met).

    Raises:
        FatalError: the producer could not be made transactional.
    """
    s, p = settings, settings.processing
    spool = Spool(settings.dead_letter_spool())
    confirmed = (
        None
        if producer is None
        else ConfirmedProducer(producer, p.delivery_timeout_s, stopping, spool)
    )
    dead_letters = None
    if p.on_decode_error == "dead_letter" and confirmed is not None:
        dead_letters = (confirmed, p.dlq_topic_for(s.consumer.topic))
    output = None
    if p.output_topic is not None and confirmed is not None:
        output = (confirmed, p.output_topic)
    probe = BatchProbe(settings.consumer_config(plaintext_secrets=True), probes)
    poison = PoisonHandler(
        metrics,
        codec=s.codec.name,
        group=s.consumer.group_id,
        dead_letters=dead_letters,
        probe=probe.last_offset,
        exactly_once=s.exactly_once,
    )
    transactions = None
    if s.exactly_once and producer is not None:
        transactions = Transactions(
            producer,
            consumer,
            p.delivery_timeout_s,
            renew=renew,
            replaced=None if confirmed is None else confirmed.use,
            skips=lambda: poison.skips,
        )
    return BatchWrites(poison, output, transactions)
