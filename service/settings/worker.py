"""The worker's settings: `[kafka]` (shared) plus its own `[worker.*]` sections.

Read by `service.settings.sources.load`: defaults < TOML (`--config`: `[kafka]`,
`[worker.consumer]`, `[worker.codec]`, ...) < environment (`KAFKA_*`,
`WORKER_<SECTION>__<FIELD>`, e.g. `WORKER_CONSUMER__GROUP_ID`) < flags. Unknown keys
are errors at every level, so a typo such as `grup_id` fails loudly.
"""

from __future__ import annotations

import contextlib
import re
import tempfile
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from codec import (
    AutoCodec,
    Codec,
    CodecName,
    JsonCodecName,
    check_form,
    get_codec,
)
from schemas.errors import ConfigError
from schemas.registry import Schema, SchemaSpec, resolve
from schemas.user.loader import UserSchema
from schemas.wire_shape import shape_of
from service.kafka.connection import KafkaConnection, check_client_config, refuse_keys
from service.logic.named_fields import field_paths
from service.settings.processing import (
    ProcessingSettings as ProcessingSettings,
    Section,
)
from service.settings.registry import (
    Framing,
    RegistryConnection,
    framing_problem,
)
from service.settings.sources import loader, printable

TOOL: Final = "worker"

METADATA_REFRESH_MS: Final = 10_000
"""The consumer's `topic.metadata.refresh.interval.ms`: partitions added to the
input topic are assigned within about this plus a rebalance (librdkafka's default,
300 s, left them unread for five minutes). One metadata request per broker every
10 s costs nothing measurable."""

WORKER_OWNED_KEYS: Final[dict[str, str]] = {
    "enable.auto.offset.store": "the worker stores offsets itself (at-least-once)",
    "enable.auto.commit": "commit on revoke and on close rely on it",
    "group.id": "set worker.consumer.group_id",
}
"""librdkafka settings `kafka.extra` may not set for the worker, with the reason."""


class ConsumerSettings(Section):
    """What the worker reads and how its consumer group behaves.

    Every number is bounded by the range librdkafka accepts for the setting it
    becomes, so a value out of range is a configuration error naming the field,
    not a librdkafka error once a client is built (`delivery_timeout_s` becomes
    `message.timeout.ms`, at most 2^31-1 ms)."""

    topic: str = "orders"
    group_id: str = "codec-worker"
    client_id: str = "codec-worker"
    """librdkafka's `client.id`: how the broker's logs and quotas name this client."""
    auto_offset_reset: Literal["earliest", "latest", "error"] = "earliest"
    session_timeout_ms: Annotated[int, Field(ge=1000, le=3_600_000)] = 45_000
    """How long the group waits for a silent member (a kill -9) before its
    partitions move to the others; lower means faster recovery, more false alarms."""
    group_instance_id: str | None = None
    """Static membership (KIP-345): a restarted worker with the same id gets its
    partitions back without a rebalance, within the session timeout. Each of
    `processes` children appends `-<index>`."""
    max_poll_interval_ms: Annotated[int, Field(ge=1000, le=86_400_000)] = 300_000
    """How long the worker may go between two consumes before the group drops it
    (librdkafka's `max.poll.interval.ms`)."""
    fetch_max_bytes: Annotated[int, Field(ge=1024, le=2_147_483_135)] = 52_428_800
    """The most data one fetch asks the broker for (`fetch.max.bytes`)."""
    queued_max_messages_kbytes: Annotated[int, Field(ge=1, le=2_097_151)] = 65_536
    """The prefetch queue's bound in KiB: librdkafka's default, 64 MiB. A full queue
    postpones the partition's next fetch by `fetch.queue.backoff.ms` (1 s), so a lower
    bound pauses a backlog's drain more often: at 32 MiB the worker drained 200k
    medium events in about twice the wall time of a bare loop at 64 MiB, and kept
    0.70-0.89 of its messages per CPU-second against 0.85-0.96 at 64 MiB (`make
    bench`, two runs each, msgspec-msgpack and protobuf)."""


class CodecSettings(Section):
    """Which codec decodes which schema."""

    name: CodecName = "json+pydantic"
    schema_: Annotated[SchemaSpec, Field(alias="schema")] = "medium"
    """A built-in key or a user's `MODULE:NAME` / `FILE.proto:Message`, loaded
    while the settings are validated (`schemas.registry.resolve`)."""
    run_validators: bool = False
    """A user's pydantic model: its after validators run in the derived Structs'
    `__post_init__` (`schemas.user.struct_validators`); off, they run in the
    pydantic codecs only, and the CPU figures say so."""
    auto_json: JsonCodecName = "msgspec-json"
    auto_output: CodecName | None = None
    framing: Framing = "none"
    """`confluent`: values carry the schema registry's frame (`[registry]`)."""
    max_payload_bytes: Annotated[int, Field(ge=1)] = 4 * 1024 * 1024
    shadow: CodecName | None = None
    """Also decode a sample of the messages with this codec, after each batch, and
    compare field by field (`service.shadow.sampler`); None for no shadow."""
    shadow_sample_every: Annotated[int, Field(ge=1, le=1_000_000)] = 1
    """Shadow every k-th message (1: all). Each costs a second decode with the
    codec, one with the shadow codec and a field-by-field comparison."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, allow_inf_nan=False
    )

    @field_validator("shadow")
    @classmethod
    def _one_wire_format(cls, value: CodecName | None) -> CodecName | None:
        if value == "auto":
            raise ValueError("a shadow decodes with one codec: any key but auto")
        return value

    @model_validator(mode="after")
    def _codecs_carry_the_schema(self) -> CodecSettings:
        # Only the codecs this worker builds: protobuf's limits never refuse
        # `--codec msgspec-json`. `auto` leaves out what the schema refuses.
        built = [self.name, self.shadow]
        if self.name == "auto":
            built += [self.auto_json, self.auto_output]
        for codec in built:
            if codec not in (None, "auto"):
                try:
                    check_form(codec, self.forms)
                except ConfigError as exc:
                    raise ValueError(f"{codec}: {exc}") from None
        return self

    @property
    def forms(self) -> Schema | UserSchema:
        """The schema's forms; a user's was loaded when these settings were."""
        return resolve(self.schema_, self.run_validators)

    def build(self) -> Codec[Any]:
        """The configured codec bound to the schema (built once, at start-up)."""
        return get_codec(
            self.name,
            self.forms,
            auto_json=self.auto_json,
            auto_output=self.auto_output,
        )


class TopicsSettings(Section):
    """What start-up does about a missing input, dead-letter or output topic."""

    create: bool = False
    """Create missing topics (else a missing one stops the worker, exit status 2)."""
    partitions: Annotated[int, Field(ge=1, le=100_000)] = 4
    """Partitions of a created topic (replication: the cluster's default)."""


class MetricsSettings(Section):
    """The control plane: `/metrics`, `/healthz`, `/readyz`."""

    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65_535)] = 9100
    summary_interval_s: Annotated[float, Field(gt=0, le=86_400)] = 10.0
    latency_sample_every: Annotated[int, Field(ge=1, le=1024)] = 64
    """Time the end-to-end latency of every k-th message (1: all of them).

    Reading `x-sent-ns` means converting a message's headers, which costs 1.8-4.5 us
    on a freshly consumed message here (the fast codecs' whole Kafka path is 3-5 us
    a message); a systematic 1-in-64 sample of 40k msg/s still gives 625 latencies
    a second, 37,500 in a minute: enough for a p99.9."""


class LoggingSettings(Section):
    """Structured logs on stdout."""

    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["json", "console"] = "json"


class Settings(BaseModel):
    """Everything the worker needs, validated once at start-up."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    kafka: KafkaConnection = Field(default_factory=KafkaConnection)
    registry: RegistryConnection = Field(default_factory=RegistryConnection)
    consumer: ConsumerSettings = ConsumerSettings()
    codec: CodecSettings = CodecSettings()
    processing: ProcessingSettings = ProcessingSettings()
    topics: TopicsSettings = TopicsSettings()
    metrics: MetricsSettings = MetricsSettings()
    logging: LoggingSettings = LoggingSettings()

    @model_validator(mode="after")
    def _refuse_owned_keys(self) -> Settings:
        refuse_keys(self.kafka.extra, WORKER_OWNED_KEYS)
        return self

    @model_validator(mode="after")
    def _budget_under_poll_interval(self) -> Settings:
        budget = self.processing.message_budget_ms
        if budget >= self.consumer.max_poll_interval_ms:
            raise ValueError(
                f"processing.message_budget_ms={budget:g} must be under "
                f"consumer.max_poll_interval_ms={self.consumer.max_poll_interval_ms}"
            )
        return self

    @model_validator(mode="after")
    def _framing_fits(self) -> Settings:
        c = self.codec
        budget = self.consumer.max_poll_interval_ms
        if (
            why := framing_problem(c.framing, c.name, self.registry, budget)
        ) is not None:
            raise ValueError(f"codec.framing = {c.framing!r}: {why}")
        if c.framing != "none" and c.shadow is not None:
            raise ValueError("codec.shadow: not with --framing confluent")
        if c.framing != "none" and c.name == "auto" and self.processing.output_topic:
            from codec.registry import framing_refusal

            output = c.auto_output or c.auto_json
            if (why := framing_refusal(output)) is not None:
                raise ValueError(
                    f"codec.auto_output: --framing confluent writes --output-topic "
                    f"framed, and {why}"
                )
        return self

    def build_codec(self) -> Codec[Any]:
        """The configured codec, behind the registry's frame if `codec.framing` says."""
        codec = self.codec.build()
        if self.codec.framing == "none":
            return codec
        from codec.registry import RegistryClient, frame_auto, frame_codec

        client = RegistryClient(self.registry.access())
        size = self.registry.cache_size
        if self.codec.name != "auto":
            return frame_codec(codec, client, cache_size=size)
        kinds = {"AVRO": "avro", "PROTOBUF": "protobuf", "JSON": self.codec.auto_json}
        by_type = {}
        for kind, name in kinds.items():
            with contextlib.suppress(ConfigError):  # a form the schema refuses
                by_type[kind] = get_codec(name, self.codec.forms)  # type: ignore[arg-type]
        assert isinstance(codec, AutoCodec)  # noqa: S101  # get_codec's contract
        return frame_auto(codec, by_type, client, cache_size=size)

    @model_validator(mode="after")
    def _read_fields_exist(self) -> Settings:
        if self.processing.logic == "fields":
            try:
                field_paths(shape_of(self.codec.forms), self.processing.read_fields)
            except ConfigError as exc:
                raise ValueError(f"processing.{exc}") from None
        return self

    def message_budget(self) -> tuple[float, Path | None]:
        """The per-message budget in seconds and its backstop's record file, one per
        group, topic and worker index."""
        p, c = self.processing, self.consumer
        folder = Path(p.budget_state_dir or tempfile.gettempdir()) / "codec-worker"
        name = re.sub(r"[^A-Za-z0-9._-]", "_", f"{c.group_id}.{c.topic}.{p.index}")
        return p.message_budget_ms / 1000.0, folder / f"{name}.inhand"

    def consumer_config(self, *, plaintext_secrets: bool = False) -> dict[str, Any]:
        """The consumer's librdkafka settings (at-least-once, bounded memory)."""
        c = self.consumer
        static = {}
        if c.group_instance_id:
            index = self.processing.index
            instance = (
                f"{c.group_instance_id}-{index}" if index else c.group_instance_id
            )
            static["group.instance.id"] = instance
        return {
            # New partitions are seen within 10 s, not librdkafka's 300 s (`-X`
            # or `kafka.extra` may set another interval).
            "topic.metadata.refresh.interval.ms": METADATA_REFRESH_MS,
            **static,
            **self.kafka.librdkafka(plaintext_secrets=plaintext_secrets),
            "client.id": c.client_id,
            "group.id": c.group_id,
            "auto.offset.reset": c.auto_offset_reset,
            # Exactly-once commits offsets in each batch's transaction instead.
            "enable.auto.commit": not self.exactly_once,
            **({"isolation.level": "read_committed"} if self.exactly_once else {}),
            "enable.auto.offset.store": False,
            "session.timeout.ms": c.session_timeout_ms,
            "max.poll.interval.ms": c.max_poll_interval_ms,
            "fetch.max.bytes": c.fetch_max_bytes,
            "queued.max.messages.kbytes": c.queued_max_messages_kbytes,
        }

    @property
    def exactly_once(self) -> bool:
        """Whether `processing.processing_guarantee` is `exactly-once`."""
        return self.processing.processing_guarantee == "exactly-once"

    def check_clients(self) -> None:
        """Let librdkafka validate the consumer's and the producer's settings.

        Raises:
            ConfigError: a value it refuses (exit status 2), found before the
                control plane or any client touches the network.
        """
        try:
            check_client_config(
                self.consumer_config(plaintext_secrets=True), "consumer"
            )
            producer = self.producer_config(plaintext_secrets=True)
            timeout_ms = int(self.processing.delivery_timeout_s * 1000)
            producer["message.timeout.ms"] = timeout_ms
            check_client_config(producer, "producer")
        except ValueError as exc:
            raise ConfigError(f"config error: {exc}") from None

    def producer_config(self, *, plaintext_secrets: bool = False) -> dict[str, Any]:
        """Dead-letter and output producers: idempotent, acks from all replicas."""
        return {
            **self.admin_config(plaintext_secrets=plaintext_secrets),
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 2,
        }

    def admin_config(self, *, plaintext_secrets: bool = False) -> dict[str, Any]:
        """The start-up topic check's AdminClient (a producer inside librdkafka)."""
        common = self.kafka.librdkafka(plaintext_secrets=plaintext_secrets)
        return {
            # Consumer-only passthrough keys would make librdkafka warn on producers.
            **{k: v for k, v in common.items() if not k.startswith("fetch.")},
            "client.id": self.consumer.client_id,
        }

    def topic_roles(self) -> dict[str, str]:
        """Each topic the worker uses, with what it is for (named in errors)."""
        p = self.processing
        roles = {self.consumer.topic: "input, --topic"}
        if p.on_decode_error == "dead_letter":
            dlq = p.dlq_topic_for(self.consumer.topic)
            roles.setdefault(dlq, "dead letters, --dlq-topic")
        if p.output_topic is not None:
            roles.setdefault(p.output_topic, "output, --output-topic")
        if self.codec.shadow is not None:
            shadow = f"{self.consumer.topic}.shadow"
            roles.setdefault(shadow, "shadow samples, --shadow-codec")
        return roles

    def masked(self) -> dict[str, Any]:
        """The effective configuration with every secret masked (for logs)."""
        return printable(self, TOOL)


load_settings: Final = loader(Settings, TOOL)
"""`load_settings(overrides=None, config_file=..., environ=...)`: the settings from
every source; raises `ConfigError` naming the setting, value, source and rule."""
