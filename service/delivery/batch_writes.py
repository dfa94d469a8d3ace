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
from typing import NamedTuple

from service.delivery.dead_letters import PoisonHandler
from service.delivery.gated_writes import ConfirmedProducer
from service.delivery.transactions import Transactions
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
) -> BatchWrites:
    """Build the writers; with exactly-once this calls `init_transactions` (the
    broker is contacted). `renew` builds another producer like `producer` (the
    same `transactional.id`), for when that one becomes unusable.

    Raises:
        FatalError: the producer could not be made transactional.
    """
    s, p = settings, settings.processing
    confirmed = (
        None
        if producer is None
        else ConfirmedProducer(producer, p.delivery_timeout_s, stopping)
    )
    dead_letters = None
    if p.on_decode_error == "dead_letter" and confirmed is not None:
        dead_letters = (confirmed, p.dlq_topic_for(s.consumer.topic))
    output = None
    if p.output_topic is not None and confirmed is not None:
        output = (confirmed, p.output_topic)
    poison = PoisonHandler(
        metrics,
        codec=s.codec.name,
        group=s.consumer.group_id,
        dead_letters=dead_letters,
    )
    transactions = None
    if s.exactly_once and producer is not None:
        transactions = Transactions(
            producer,
            consumer,
            p.delivery_timeout_s,
            renew=renew,
            replaced=None if confirmed is None else confirmed.use,
        )
    return BatchWrites(poison, output, transactions)
