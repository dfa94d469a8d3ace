"""The shadow decode with fakes: outcomes, sampling, samples, and a live path it never touches."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import msgspec
import pytest
from confluent_kafka import KafkaError, TopicPartition
from prometheus_client import CollectorRegistry

from codec import Codec, CodecName, get_codec
from codec.base import JSON
from loadgen.payloads import make_payloads
from schemas.registry import SCHEMAS, SchemaForms
from schemas.user.loader import UserSchema, load_schema
from service.delivery.dead_letters import PoisonHandler
from service.delivery.gated_writes import ConfirmedProducer
from service.logic.builtin import Handler
from service.loop.batch_loop import BatchLoop
from service.shadow.sampler import SampleWriter, Shadow, build_shadow
from service.shadow.verdict import (
    Comparer,
    Verdict,
    field_path,
    located,
    schema_paths,
    shape_of,
)
from service.telemetry.metrics import (
    SHADOW_OUTCOMES,
    SHADOW_SAMPLE_RESULTS,
    Metrics,
    ShadowMetrics,
)
from tests.fakes import FakeConsumer, FakeMessage, FakeProducer

LAX = "tests.fixtures.usermodels.lax:Model"
MEDIUM = SCHEMAS["medium"]
ORDERS = make_payloads("medium", 8, seed=5)
LAX_OK = b'{"id": 1, "name": "a", "amount": 2.5, "tags": ["x"]}'
LAX_ONLY = b'{"id": "42", "name": "b", "amount": 3}'
LIMIT = 1 << 20
MEDIUM_SHAPE = shape_of(MEDIUM)


@pytest.fixture(scope="module")
def lax() -> UserSchema:
    return load_schema(LAX)


class Rig:
    """A batch loop wired to fakes, with a shadow (or none) after each batch.

    `burst` > 0 allows that many samples and no more (no refill over time).
    """

    def __init__(
        self,
        primary: CodecName,
        shadow: CodecName | Codec[Any] | None,
        schema: SchemaForms,
        *,
        every: int = 1,
        step: Any = None,
        samples: FakeProducer | None = None,
        burst: int = 0,
    ) -> None:
        self.registry = CollectorRegistry()
        self.metrics = Metrics(self.registry, codec=primary, schema=schema.name)
        self.codec = get_codec(primary, schema)
        self.consumer = FakeConsumer(events=[])
        self.dlq = FakeProducer()
        self.samples = samples or FakeProducer()
        self.shadow: Shadow | None = None
        name = str(getattr(shadow, "name", shadow))
        self.labels: dict[str, str] = {"codec": primary, "shadow": name}
        if isinstance(shadow, str):  # as the worker builds it
            self.shadow = build_shadow(
                self.codec,
                shadow,
                schema,
                registry=self.registry,
                sample_every=every,
                max_payload_bytes=LIMIT,
                topic="in.shadow",
                producer_factory=self.samples,
                producer_config={"bootstrap.servers": "127.0.0.1:9092"},
                samples_per_s=0.0 if burst else 1.0,
                sample_burst=burst or 10,
            )
        elif shadow is not None:  # a fake codec
            metrics = ShadowMetrics(self.registry, codec=primary, shadow=shadow.name)
            self.shadow = Shadow(
                Comparer(self.codec, shadow, shape_of(schema)),
                metrics,
                sample_every=every,
                max_payload_bytes=LIMIT,
                samples=None,
                primary=primary,
                shadow=shadow.name,
            )
        poison = PoisonHandler(
            self.metrics,
            codec=primary,
            group="g",
            dead_letters=(ConfirmedProducer(self.dlq, 1.0), "in.dlq"),
        )
        self.loop = BatchLoop(
            self.consumer,
            codec=self.codec,
            step=step,
            metrics=self.metrics,
            poison=poison,
            output=None,
            max_payload_bytes=LIMIT,
            batch_size=100,
            batch_timeout_s=0.01,
            shadow=None if self.shadow is None else self._hook,
        )
        self.loop.assign([TopicPartition("in", 0)])  # as the rebalance callback would

    def _hook(self, msgs: Any) -> None:
        assert self.consumer.events is not None and self.shadow is not None
        self.consumer.events.append("shadow")
        self.shadow(msgs)

    def process(self, values: Sequence[bytes | None], start: int = 0) -> None:
        """Hand `values` to the loop as one batch, at offsets from `start`."""
        batch = [
            FakeMessage(v, _offset=start + i, _key=b"k%d" % (start + i))
            for i, v in enumerate(values)
        ]
        self.consumer.batches.append(batch)
        self.loop.process(self.consumer.consume(len(batch)))

    def count(self, name: str, **labels: str) -> float:
        """A shadow metric's value for this rig's codec pair (0 when absent)."""
        return self.registry.get_sample_value(name, {**self.labels, **labels}) or 0.0

    def live(self, outcome: str) -> float:
        labels = {"codec": self.labels["codec"], "outcome": outcome}
        return self.registry.get_sample_value("worker_messages_total", labels) or 0.0

    def outcomes(self) -> dict[str, float]:
        return {
            o: self.count("worker_shadow_total", outcome=o) for o in SHADOW_OUTCOMES
        }

    def samples_of(self, result: str) -> float:
        return self.count("worker_shadow_samples_total", result=result)


def verdicts(**counts: int) -> dict[str, float]:
    """Every outcome's expected count (0 unless given)."""
    return {o: counts.get(o, 0) for o in SHADOW_OUTCOMES}


def orders(codec_name: CodecName, n: int = 4) -> list[bytes]:
    codec = get_codec(codec_name, MEDIUM)
    return [codec.encode(codec.from_builtins(p)) for p in ORDERS[:n]]


class AlteredQuantities:
    """msgspec-json whose decode changes every line item's quantity (a shadow that differs)."""

    name = "altered"
    content_type = JSON

    def __init__(self) -> None:
        self._inner = get_codec("msgspec-json", MEDIUM)
        self.native_type = self._inner.native_type

    def decode_unchecked(self, data: bytes) -> Any:
        obj = self._inner.decode(data)
        items = [msgspec.structs.replace(i, quantity=i.quantity + 1) for i in obj.items]
        return msgspec.structs.replace(obj, items=items)


class Exploding:
    """A shadow codec that fails in ways no codec should: never the live path's problem."""

    name = "exploding"
    content_type = JSON
    native_type = object

    def decode_unchecked(self, data: bytes) -> Any:
        return object()  # reading its fields raises AttributeError


class TestOutcomes:
    """Each pair of verdicts is counted under its outcome; all four series start at 0."""

    def test_series_exist_at_zero(self, lax: UserSchema) -> None:
        rig = Rig("json+pydantic", "msgspec-json", lax)
        name = "worker_shadow_total"
        for o in SHADOW_OUTCOMES:
            assert (
                rig.registry.get_sample_value(name, {**rig.labels, "outcome": o}) == 0
            )
        name = "worker_shadow_samples_total"
        for r in SHADOW_SAMPLE_RESULTS:
            assert rig.registry.get_sample_value(name, {**rig.labels, "result": r}) == 0

    def test_lax_only_messages_are_shadow_rejected(self, lax: UserSchema) -> None:
        rig = Rig("json+pydantic", "msgspec-json", lax)
        rig.process([LAX_OK, LAX_ONLY, LAX_OK, LAX_ONLY, LAX_ONLY])
        assert rig.outcomes() == verdicts(agree=2, shadow_rejected=3)

    def test_primary_rejected_and_both_rejected(self, lax: UserSchema) -> None:
        rig = Rig("msgspec-json", "json+pydantic", lax)
        rig.process([LAX_ONLY, b"not json", LAX_OK])
        # Both reject the garbage: switching changes nothing for it.
        assert rig.outcomes() == verdicts(agree=2, primary_rejected=1)

    def test_differ_counts_each_path_once_per_message(self) -> None:
        rig = Rig("msgspec-json", AlteredQuantities(), MEDIUM)  # type: ignore[arg-type]
        rig.process(list(orders("msgspec-json", 3)))
        assert rig.outcomes()["differ"] == 3
        name = "worker_shadow_differences_total"
        assert rig.count(name, path="items.quantity") == 3

    def test_round_trip_keeps_the_built_in_schema(self) -> None:
        rig = Rig("json+pydantic", "protobuf", MEDIUM)
        rig.process(orders("json+pydantic"))
        assert rig.outcomes()["agree"] == 4

    def test_round_trip_refuses_what_the_other_format_cannot_carry(self) -> None:
        reading = load_schema("tests.fixtures.usermodels.lax:Reading")
        rig = Rig("json+pydantic", "protobuf", reading)
        naive = b'{"sensor": "s", "taken_at": "2024-05-01T12:00:00"}'
        aware = b'{"sensor": "s", "taken_at": "2024-05-01T12:00:00Z"}'
        rig.process([naive, aware])
        counts = rig.outcomes()
        assert counts["shadow_rejected"] == counts["agree"] == 1
        [sample] = rig.samples.acked
        headers = dict(sample["headers"])
        assert headers["x-shadow-mode"] == b"round-trip"
        assert headers["x-shadow-error-type"].endswith(b"ParseError")

    @pytest.mark.parametrize("shadow", ["msgspec-json", "msgspec-msgpack", "protobuf"])
    def test_aliases_uuids_and_decimals_agree(self, shadow: CodecName) -> None:
        payments = load_schema("tests.fixtures.usermodels.payments:PaymentEvent")
        rig = Rig("json+pydantic", shadow, payments)
        event = (
            b'{"eventId": "0b8a6f43-2d4c-4c8e-9a57-3f0f7f8b9c10", '
            b'"paymentId": "6f1c2b9e-8a51-4a7e-9a0e-6a5f7c2d1e3b", "userId": 7, '
            b'"merchantId": "m", "status": "captured", "method": "card", '
            b'"amount": {"amount": "12.50", "currency": "EUR"}, '
            b'"items": [{"sku": "a", "quantity": 1, '
            b'"unitPrice": {"amount": "1.00", "currency": "USD"}}], '
            b'"createdAt": "2026-01-01T00:00:00Z"}'
        )
        rig.process([event])
        assert rig.outcomes()["agree"] == 1

    def test_round_trip_int_wider_than_the_wire(self, lax: UserSchema) -> None:
        rig = Rig("json+pydantic", "protobuf", lax)
        rig.process([b'{"id": 100000000000000000000000, "name": "a", "amount": 1}'])
        assert rig.outcomes()["shadow_rejected"] == 1


class TestLivePathUnaffected:
    """A shadow that fails leaves offsets, live metrics and dead letters as they were."""

    def live(self, rig: Rig) -> tuple[Any, ...]:
        counts = [rig.live(o) for o in ("ok", "decode_error", "logic_error")]
        dlq = [(r["key"], r["value"]) for r in rig.dlq.acked]
        return rig.consumer.stored, counts, dlq

    def test_exploding_shadow(self) -> None:
        batches = [[*orders("msgspec-json", 3), b"junk"], orders("msgspec-json", 2)]
        step = Handler("medium", "aggregate").step
        plain = Rig("msgspec-json", None, MEDIUM, step=step)
        broken = Rig("msgspec-json", Exploding(), MEDIUM, step=step)  # type: ignore[arg-type]
        for rig in (plain, broken):
            rig.process(batches[0])
            rig.process(batches[1], start=4)
        assert self.live(broken) == self.live(plain)
        # Every message the primary decoded: reading the shadow's object raised.
        assert broken.count("worker_shadow_errors_total") == 5
        assert broken.consumer.events == ["store", "shadow", "store", "shadow"]

    def test_failing_sample_producer(self, lax: UserSchema) -> None:
        class Refusing(FakeProducer):
            def produce(self, *args: Any, **kwargs: Any) -> None:
                raise RuntimeError("broker on fire")

        rig = Rig("json+pydantic", "msgspec-json", lax, samples=Refusing())
        rig.process([LAX_ONLY, LAX_OK])
        assert rig.samples_of("failed") == 1
        assert rig.live("ok") == 2
        assert rig.consumer.stored == [[("in", 0, 2)]]


class TestSampling:
    """Every k-th message of the stream is shadowed; the phase carries across batches."""

    def test_every_third(self) -> None:
        rig = Rig("msgspec-json", "json+pydantic", MEDIUM, every=3)
        values = orders("msgspec-json", 8) + orders("msgspec-json", 3)
        rig.process(values[:2])
        rig.process(values[2:7], start=2)
        rig.process(values[7:], start=7)
        # Stream positions 0, 3, 6 and 9.
        assert rig.outcomes()["agree"] == 4

    def test_oversize_and_empty_are_left_to_the_live_path(self) -> None:
        rig = Rig("msgspec-json", "json+pydantic", MEDIUM)
        rig.process([None, b"x" * ((1 << 20) + 1), *orders("msgspec-json", 1)])
        assert sum(rig.outcomes().values()) == 1


class TestSamples:
    """Disagreements are sampled to <topic>.shadow: rate limited, labelled, never blocking."""

    def test_headers_carry_both_verdicts_and_no_values(self, lax: UserSchema) -> None:
        rig = Rig("json+pydantic", "msgspec-json", lax)
        original: list[tuple[str, bytes | None]] = [("x-seq", b"7")]
        rig.consumer.batches.append(
            [FakeMessage(LAX_ONLY, _offset=3, _key=b"k", _headers=original)]
        )
        rig.loop.process(rig.consumer.consume(1))
        [sample] = rig.samples.acked
        assert sample["topic"] == "in.shadow"
        assert (sample["key"], sample["value"]) == (b"k", LAX_ONLY)
        headers = dict(sample["headers"])
        assert sample["headers"][0] == ("x-seq", b"7")
        assert headers["x-shadow-codec"] == b"msgspec-json"
        assert headers["x-shadow-primary"] == b"json+pydantic"
        assert headers["x-shadow-outcome"] == b"shadow_rejected"
        assert headers["x-shadow-error-type"] == b"msgspec.ValidationError"
        assert headers["x-shadow-offset"] == b"3"
        assert not any(b"42" in v for v in headers.values())  # no payload values

    @pytest.mark.parametrize(
        ("value", "path", "reason"),
        [
            (LAX_ONLY, b"id", b"Expected `int`, got `str`"),
            (
                b'{"id": 1, "name": "a", "amount": "2.5"}',
                b"amount",
                b"Expected `float`, got `str`",
            ),
        ],
    )
    def test_a_rejection_names_its_field(
        self, lax: UserSchema, value: bytes, path: bytes, reason: bytes
    ) -> None:
        rig = Rig("json+pydantic", "msgspec-json", lax)
        rig.process([value])
        [sample] = rig.samples.acked
        headers = dict(sample["headers"])
        assert headers["x-shadow-outcome"] == b"shadow_rejected"
        assert headers["x-shadow-error-path"] == path
        assert headers["x-shadow-error-reason"] == reason

    @pytest.mark.parametrize(
        ("text", "expected"),
        [
            ("Invalid enum value 'weird' - at `$.status`", ("status", "")),
            (
                "Expected `int`, got `str` - at `$.items[3].qty`",
                ("items.qty", "Expected `int`, got `str`"),
            ),
            (
                "Object missing required field `id` - at `$.payer`",
                ("payer.id", "a missing field"),
            ),
            (
                "Object contains unknown field `x` - at `$.payer`",
                ("payer.x", "an unknown field"),
            ),
            ("Expected `object`, got `array`", ("$", "Expected `object`, got `array`")),
            ("Expected `str` of length <= 3 - at `$.name`", ("name", "")),
        ],
    )
    def test_the_located_error_quotes_no_value(
        self, text: str, expected: tuple[str, str]
    ) -> None:
        # msgspec quotes a bad enum's value: only the path and a type-only reason
        # go into a sample's headers.
        assert located(msgspec.ValidationError(text)) == expected

    def test_written_is_counted_while_idle(self, lax: UserSchema) -> None:
        class RoundTrip(FakeProducer):
            """Acknowledges a record at the poll after the one that sent it."""

            sent: int = 0

            def poll(self, timeout: float = -1) -> int:
                queue, self._queue = self._queue[: self.sent], self._queue[self.sent :]
                self._queue, later = queue, self._queue
                self.flush(timeout)
                self._queue, self.sent = later, len(later)
                return 0

        rig = Rig("json+pydantic", "msgspec-json", lax, samples=RoundTrip())
        rig.process([LAX_ONLY])
        assert rig.samples_of("written") == 0  # its acknowledgement is on its way
        stops = iter([False, False, True])
        rig.loop.run(lambda: next(stops), lambda: None)  # two empty polls, no batch
        assert rig.samples_of("written") == 1

    def test_rate_limited(self, lax: UserSchema) -> None:
        rig = Rig("json+pydantic", "msgspec-json", lax, burst=2)
        rig.process([LAX_ONLY] * 5)
        assert rig.samples_of("written") == 2
        assert rig.samples_of("rate_limited") == 3
        assert len(rig.samples.produced) == 2

    def test_tokens_refill_with_time(self) -> None:
        now, producer = [0.0], FakeProducer()
        metrics = ShadowMetrics(CollectorRegistry(), codec="a", shadow="b")
        clock = lambda: now[0]  # noqa: E731  (a hand-wound monotonic clock)
        writer = SampleWriter(producer, "t", metrics, per_s=0.5, burst=1, clock=clock)
        for now[0] in (0.0, 1.0, 2.0, 2.5, 4.0):
            writer.offer(FakeMessage(b"v"), [])
        assert len(producer.produced) == 3  # at 0, 2 and 4 s

    def test_full_queue_drops_and_counts(self, lax: UserSchema) -> None:
        class Full(FakeProducer):
            def produce(self, *args: Any, **kwargs: Any) -> None:
                raise BufferError("queue full")

        rig = Rig("json+pydantic", "msgspec-json", lax, samples=Full())
        rig.process([LAX_ONLY, LAX_ONLY])
        assert rig.samples_of("queue_full") == 2
        assert rig.consumer.stored == [[("in", 0, 2)]]

    def test_failed_delivery_is_counted(self, lax: UserSchema) -> None:
        refused = FakeProducer(
            fail_with=lambda record: KafkaError(KafkaError._MSG_TIMED_OUT)
        )
        rig = Rig("json+pydantic", "msgspec-json", lax, samples=refused)
        rig.process([LAX_ONLY])
        rig.process([LAX_OK], start=1)  # the next batch serves the delivery report
        assert rig.samples_of("failed") == 1

    def test_differ_names_paths(self) -> None:
        comparer = Comparer(
            get_codec("msgspec-json", MEDIUM),
            AlteredQuantities(),  # type: ignore[arg-type]
            MEDIUM_SHAPE,
        )
        verdict = comparer.compare(orders("msgspec-json", 1)[0], None)
        assert verdict == Verdict("differ", "decode", ("items.quantity",))


class TestInProcessSwitch:
    """json+pydantic live on a lax model, msgspec-json as shadow, built as the worker does."""

    def test_lax_only_messages(self, lax: UserSchema) -> None:
        rig = Rig("json+pydantic", "msgspec-json", lax)
        rig.process([LAX_ONLY if i % 4 == 1 else LAX_OK for i in range(20)])
        assert rig.shadow is not None
        rig.shadow.close()
        assert rig.live("ok") == 20
        assert rig.outcomes() == verdicts(agree=15, shadow_rejected=5)
        assert rig.samples_of("written") == 5
        keys = [r["key"] for r in rig.samples.acked]
        assert keys == [b"k1", b"k5", b"k9", b"k13", b"k17"]
        assert rig.samples.config is not None
        assert rig.samples.config["enable.idempotence"] is False
        assert rig.samples.config["bootstrap.servers"] == "127.0.0.1:9092"


class TestPaths:
    """Difference paths are the schema's, without indexes or map keys."""

    @pytest.mark.parametrize(
        ("path", "expected"),
        [
            (".items[2].unit_price", "items.unit_price"),
            (".attributes['a.b']", "attributes"),
            (".stock[12][0].x", "stock.x"),
            ("", "$"),
        ],
    )
    def test_field_path(self, path: str, expected: str) -> None:
        assert field_path(path) == expected

    def test_schema_paths(self) -> None:
        paths = schema_paths(MEDIUM_SHAPE)
        assert {"items", "items.quantity", "customer.address.city", "$"} <= paths
