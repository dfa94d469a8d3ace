"""The load generator's settings: `[kafka]` (shared) plus its flat `[loadgen]` table.

Read by `service.settings.sources.load`: defaults < TOML (`--config`: `[kafka]`,
`[loadgen]`) < environment (`KAFKA_*`, `LOADGEN_<FIELD>`, e.g. `LOADGEN_RATE`) <
flags. Unknown keys are errors at every level (a TOML typo or a stray `LOADGEN_*`
variable fails loudly), and every error names the setting, the value, where it came
from and what is allowed.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)

from codec import REAL_CODECS, CodecName, JsonCodecName, check_form
from loadgen.payloads import DEFAULT_LARGE_BYTES, entity_field
from schemas.errors import ConfigError
from schemas.registry import Schema, SchemaName, SchemaSpec, resolve, user_schema
from schemas.user.loader import UserSchema
from schemas.user.synthetic import SynthOptions, make_payloads
from service.kafka.connection import KafkaConnection, refuse_keys
from service.settings.registry import Framing, RegistryConnection, framing_problem
from service.settings.sources import loader
from service.telemetry.log_setup import kafka_logger

TOOL: Final = "loadgen"

Pattern = Literal["constant", "ramp", "step", "spike"]

_OWNED_KEYS: Final[dict[str, str]] = {
    "client.id": "set loadgen.client_id",
    "acks": "set loadgen.acks",
    "enable.idempotence": "set loadgen.idempotence",
    "linger.ms": "set loadgen.linger_ms",
    "compression.type": "set loadgen.compression",
    "message.timeout.ms": "set loadgen.delivery_timeout_s",
    "on_delivery": "the load generator counts deliveries itself",
}
"""librdkafka keys owned by a typed setting: `kafka.extra` may not set them."""

_TUNING: Final[dict[str, Any]] = {
    # 10k messages or 1 MB per batch: a 40k msg/s run sends ~200 requests/s with
    # linger 5 ms, and an unthrottled run is not capped by per-request overhead.
    "batch.num.messages": 10_000,
    "batch.size": 1_000_000,
    # Room for ~2.5 s of a 200k msg/s burst before produce() raises BufferError.
    "queue.buffering.max.messages": 500_000,
}
"""Producer defaults that `kafka.extra` (-X) may override."""

SYNTH_SIZES: Final = ("list_len", "map_len", "str_len", "bytes_len", "none_ratio")
"""The settings that size a user's synthetic payloads (`SynthOptions` fields)."""

_OWN_JSON: Final[dict[str, JsonCodecName]] = {
    "pydantic": "json+pydantic",
    "msgspec": "msgspec-json",
    "proto": "msgspec-json",
}
"""The JSON codec of a user's own form: recorded JSON was written by that form, so
a transcoding replay reads it back with it (a lax model's JSON stays readable)."""


def own_json(spec: str) -> JsonCodecName:
    """The codec recorded JSON of schema `spec` is read with: a user's own form's
    (`_OWN_JSON`), msgspec-json for a built-in schema (the tool's own payloads)."""
    user = user_schema(spec)
    return "msgspec-json" if user is None else _OWN_JSON[user.source]


def _size_range(value: Any) -> Any:
    """`LO,HI` or `N` (text or int) as a pair; lists and pairs as they are."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = (value, value)
    elif isinstance(value, str):
        lo, sep, hi = value.partition(",")
        try:
            value = (int(lo), int(hi if sep else lo))
        except ValueError:
            raise ValueError("expected LO,HI (e.g. 2,4) or N") from None
    if isinstance(value, list | tuple) and len(value) == 2 and value[0] > value[1]:
        raise ValueError("expected LO,HI with LO <= HI")
    return value


_Size = Annotated[int, Field(ge=0, le=1_000_000)]
SizeRange = Annotated[tuple[_Size, _Size], BeforeValidator(_size_range)]
"""An inclusive (lo, hi) range: `2,4` on the command line and in the environment,
`[2, 4]` or `"2,4"` in TOML, `3` for exactly 3."""


class LoadgenSettings(BaseModel):
    """Everything `codec-loadgen` needs, validated before Kafka is touched.

    `duration` and `count` both unset means a 60 s run; both set, the run stops at
    whichever comes first. With `replay` and neither, the recording is sent once.
    """

    model_config = ConfigDict(
        extra="forbid", frozen=True, validate_default=True, populate_by_name=True
    )

    kafka: KafkaConnection = Field(default_factory=KafkaConnection)
    registry: RegistryConnection = Field(default_factory=RegistryConnection)
    framing: Framing = "none"
    """`confluent`: register the model's schema and write framed values."""
    topic: str = "orders"
    create_topics: bool = False
    partitions: Annotated[int, Field(ge=1, le=100_000)] = 4
    codec: CodecName = "json+pydantic"
    schema_: Annotated[SchemaSpec | None, Field(alias="schema")] = None
    """A built-in key or a user's `MODULE:NAME` / `FILE.proto:Message` (loaded while
    validating); unset: `profile`."""
    profile: SchemaName = "medium"
    """The older name of `schema`, for the built-in schemas only."""
    large_bytes: Annotated[int, Field(ge=256, le=16 * 1024 * 1024)] = (
        DEFAULT_LARGE_BYTES
    )
    rate: Annotated[float, Field(ge=0, le=10_000_000)] = 1000.0
    duration: Annotated[float | None, Field(gt=0)] = None
    count: Annotated[int | None, Field(ge=1)] = None
    pattern: Pattern = "constant"
    start_rate: Annotated[float, Field(ge=0, le=10_000_000)] = 0.0
    ramp_s: Annotated[float | None, Field(gt=0)] = None
    steps: Annotated[int, Field(ge=1, le=1000)] = 5
    step_s: Annotated[float, Field(gt=0)] = 10.0
    spike_rate: Annotated[float | None, Field(ge=0, le=10_000_000)] = None
    spike_at_s: Annotated[float, Field(ge=0)] = 10.0
    spike_s: Annotated[float, Field(gt=0)] = 5.0
    seed: int = 0
    list_len: SizeRange | None = None
    map_len: SizeRange | None = None
    str_len: SizeRange | None = None
    bytes_len: SizeRange | None = None
    none_ratio: Annotated[float | None, Field(ge=0, le=1)] = None
    pool_size: Annotated[int, Field(ge=1, le=1_000_000)] = 1000
    encode_live: bool = False
    key: Literal["entity", "seq", "none"] = "entity"
    run_id: Annotated[str, Field(min_length=1, max_length=128)] = Field(
        default_factory=lambda: secrets.token_hex(8)
    )
    processes: Annotated[int, Field(ge=1, le=64)] = 1
    replay: Path | None = None
    speed: Annotated[float | None, Field(gt=0, le=1_000_000)] = None
    keep_partitions: bool | None = None
    transcode: CodecName | None = None
    output: Literal["table", "json"] = "table"
    progress: Literal["auto", "always", "never"] = "auto"
    log_level: Literal["debug", "info", "warning", "error"] = "warning"
    metrics_port: Annotated[int | None, Field(ge=0, le=65_535)] = None
    metrics_host: str = "127.0.0.1"
    client_id: str = "codec-loadgen"
    acks: Literal["all", "1", "0"] = "all"
    idempotence: bool = True
    linger_ms: Annotated[float, Field(ge=0, le=900_000)] = 5.0
    compression: Literal["none", "gzip", "snappy", "lz4", "zstd"] = "none"
    delivery_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 30.0
    record_out: Path | None = None
    record_max: Annotated[int | None, Field(ge=1)] = None
    record_timeout_s: Annotated[float, Field(gt=0)] = 5.0
    record_start: Literal["earliest", "latest"] = "earliest"

    @field_validator("codec", "transcode", mode="before")
    @classmethod
    def _wire_codec(cls, value: object) -> object:
        # Before the Literal's own check, whose message would list `auto` as allowed.
        if value is None or value in REAL_CODECS:
            return value
        why = (
            "'auto' is not a wire format (it only decodes mixed topics)"
            if value == "auto"
            else "not a wire codec"
        )
        raise ValueError(f"{why}; choose {', '.join(REAL_CODECS)}")

    @model_validator(mode="after")
    def _consistent(self) -> LoadgenSettings:
        refuse_keys(self.kafka.extra, _OWNED_KEYS)
        if self.idempotence and self.acks != "all":
            raise ValueError("idempotence = true needs acks = 'all'")
        if self.rate == 0 and self.pattern != "constant":
            raise ValueError(f"pattern {self.pattern!r} needs a rate > 0")
        if self.pattern == "ramp" and self.ramp_s is None and self.duration is None:
            raise ValueError("pattern 'ramp' needs ramp_s or duration")
        if self.replay is None and (self.speed is not None or self.transcode):
            raise ValueError("speed and transcode apply to a replay only")
        if self.speed is not None and "rate" in self.model_fields_set:
            raise ValueError("give a replay either speed (recorded pace) or rate")
        self._check_schema()
        if why := framing_problem(self.framing, self.codec, self.registry, None):
            raise ValueError(f"framing = {self.framing!r}: {why}")
        for name in (self.codec, self.transcode):
            if name not in (None, "auto"):  # a codec that cannot carry a field
                try:
                    check_form(name, self.forms)
                except ConfigError as exc:
                    raise ValueError(f"{name}: {exc}") from None
        return self

    def _check_schema(self) -> None:
        """Settings that only fit a built-in schema, or only a user's."""
        given = self.model_fields_set
        if self.schema_ not in (None, self.profile) and "profile" in given:
            raise ValueError(
                f"schema {self.schema_!r} and profile {self.profile!r} disagree: "
                "profile is the older name of schema (built-in schemas only); give one"
            )
        sized = [name for name in SYNTH_SIZES if getattr(self, name) is not None]
        user = self.user_schema
        if user is None:
            if sized:
                raise ValueError(
                    f"{', '.join(sized)}: only a user's schema's payloads are sized "
                    "(schema = MODULE:NAME or FILE.proto:Message)"
                )
            return
        if "large_bytes" in given:
            raise ValueError(
                "large_bytes sizes the built-in 'large' schema; a user's schema "
                f"takes {', '.join(SYNTH_SIZES)}"
            )
        if self.key == "entity" and "key" in given and entity_field(user.shape) is None:
            raise ValueError(
                f"key 'entity': {user.name} has no top-level id field (a str or int "
                "named id or *_id, never None): choose key seq or none"
            )
        if self.replay is None:  # synthesis fails now rather than after Kafka
            try:
                make_payloads(user.shape, 1, seed=self.seed, options=self.synth_options)
            except ConfigError as exc:
                raise ValueError(str(exc)) from None

    @property
    def schema_spec(self) -> str:
        """What is sent: `schema`, else `profile`."""
        return self.schema_ or self.profile

    @property
    def forms(self) -> Schema | UserSchema:
        """The schema's forms; a user's was loaded when these settings were."""
        return resolve(self.schema_spec)

    @property
    def user_schema(self) -> UserSchema | None:
        """The user's schema, or None for a built-in one."""
        return user_schema(self.schema_spec)

    @property
    def synth_options(self) -> SynthOptions:
        """The sizes of a user's synthetic payloads: the ones given, else defaults."""
        given = {
            n: getattr(self, n) for n in SYNTH_SIZES if getattr(self, n) is not None
        }
        return SynthOptions(**given)

    @property
    def key_kind(self) -> Literal["entity", "seq", "none"]:
        """The key: `entity` falls back to `seq` by default on a user's schema
        without an id field (asked for explicitly, that is an error)."""
        user = self.user_schema
        if self.key == "entity" and user and entity_field(user.shape) is None:
            return "seq"
        return self.key

    @property
    def transcode_json(self) -> JsonCodecName:
        """The codec a transcoding replay reads recorded JSON with."""
        return own_json(self.schema_spec)

    @property
    def paced_replay(self) -> bool:
        """True when a replay follows its recorded timestamps (no rate given)."""
        return self.replay is not None and "rate" not in self.model_fields_set

    @property
    def codec_label(self) -> str:
        """The `codec` metric label: the codec the messages are written with."""
        if self.replay is not None:
            return self.transcode or "recorded"
        return self.codec

    def producer_config(self, *, plaintext_secrets: bool = False) -> dict[str, Any]:
        """The producer's librdkafka settings: idempotent, acks=all by default.

        Every client also logs through structlog (`--log-level`), not to stderr.
        """
        return {
            **_TUNING,
            **self.kafka.librdkafka(plaintext_secrets=plaintext_secrets),
            "client.id": self.client_id,
            "enable.idempotence": self.idempotence,
            "acks": self.acks,
            "linger.ms": self.linger_ms,
            "compression.type": self.compression,
            "message.timeout.ms": int(self.delivery_timeout_s * 1000),
            "logger": kafka_logger(),
        }

    def consumer_config(self, *, plaintext_secrets: bool = False) -> dict[str, Any]:
        """The recorder's consumer: its own throwaway group, nothing committed."""
        return {
            **self.kafka.librdkafka(plaintext_secrets=plaintext_secrets),
            "client.id": self.client_id,
            "group.id": f"codec-loadgen-record-{secrets.token_hex(4)}",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            "logger": kafka_logger(),
        }


load_settings: Final = loader(LoadgenSettings, TOOL)
"""`load_settings(overrides=None, config_file=..., environ=...)`: the settings from
every source; raises `ConfigError` naming the setting, value, source and rule."""
