"""The load generator's one settings object, and the only loadgen module reading env.

Precedence: defaults < TOML file (`--config`) < environment (`LOADGEN_` prefix, flat:
`LOADGEN_RATE`, `LOADGEN_TOPIC`...) < command-line flags. Unknown keys are errors
at every level (a TOML typo or a stray `LOADGEN_*` variable fails loudly), and every
error names the field, the bad value and what is allowed.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import (
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    SettingsConfigDict,
)

from loadgen.payloads import DEFAULT_LARGE_BYTES
from service.codecs import CodecName
from service.config import (
    MASK,
    UNSAFE_LIBRDKAFKA_KEYS,
    LayeredSettings,
    build_settings,
)
from service.errors import ConfigError
from service.schemas import SchemaName

ENV_PREFIX: Final = "LOADGEN_"

Pattern = Literal["constant", "ramp", "step", "spike"]
LibrdkafkaValue = str | int | float | bool

_DENIED: Final = UNSAFE_LIBRDKAFKA_KEYS
"""librdkafka settings refused from any source, with the reason."""

FLAGS: Final[dict[str, str]] = {
    "extra": "-X",
    "output": "--output/--json",
    "record_out": "record --out",
    "record_max": "record --max",
    "record_timeout_s": "record --timeout",
    "record_start": "record --start",
}
"""Fields whose flag is not `--` plus the field name with dashes."""
_TYPED_KEYS: Final[dict[str, str]] = {
    "bootstrap.servers": "bootstrap_servers",
    "client.id": "client_id",
    "acks": "acks",
    "enable.idempotence": "idempotence",
    "linger.ms": "linger_ms",
    "compression.type": "compression",
    "message.timeout.ms": "delivery_timeout_s",
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.username": "sasl_username",
    "sasl.password": "sasl_password",
    "ssl.ca.location": "ssl_ca_location",
    "on_delivery": "(the load generator's own delivery callback)",
}
"""librdkafka keys owned by a typed setting: `extra` may not set them."""

_TUNING: Final[dict[str, Any]] = {
    # 10k messages or 1 MB per batch: a 40k msg/s run sends ~200 requests/s with
    # linger 5 ms, and an unthrottled run is not capped by per-request overhead.
    "batch.num.messages": 10_000,
    "batch.size": 1_000_000,
    # Room for ~2.5 s of a 200k msg/s burst before produce() raises BufferError.
    "queue.buffering.max.messages": 500_000,
}
"""Producer defaults that `extra` (-X) may override."""


class LoadgenSettings(LayeredSettings):
    """Everything `codec-loadgen` needs, validated before Kafka is touched.

    `duration` and `count` both unset means a 60 s run; both set, the run stops at
    whichever comes first. With `replay` and neither, the recording is sent once.
    """

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, extra="forbid", frozen=True, validate_default=True
    )

    bootstrap_servers: str = "127.0.0.1:9092"
    topic: str = "orders"
    codec: CodecName = "json+pydantic"
    profile: SchemaName = "medium"
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
    metrics_port: Annotated[int | None, Field(ge=0, le=65_535)] = None
    metrics_host: str = "127.0.0.1"
    client_id: str = "codec-loadgen"
    acks: Literal["all", "1", "0"] = "all"
    idempotence: bool = True
    linger_ms: Annotated[float, Field(ge=0, le=900_000)] = 5.0
    compression: Literal["none", "gzip", "snappy", "lz4", "zstd"] = "none"
    delivery_timeout_s: Annotated[float, Field(gt=0, le=3600)] = 30.0
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = (
        "PLAINTEXT"
    )
    sasl_mechanism: (
        Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"] | None
    ) = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_ca_location: str | None = None
    extra: dict[str, LibrdkafkaValue] = Field(default_factory=dict)
    """Raw librdkafka settings; may override tuning defaults, not typed settings."""
    record_out: Path | None = None
    record_max: Annotated[int | None, Field(ge=1)] = None
    record_timeout_s: Annotated[float, Field(gt=0)] = 5.0
    record_start: Literal["earliest", "latest"] = "earliest"

    @field_validator("codec", "transcode")
    @classmethod
    def _wire_codec(cls, value: CodecName | None) -> CodecName | None:
        if value == "auto":
            raise ValueError(
                "'auto' is not a wire format (it only decodes mixed topics); "
                "choose json+pydantic, json-stdlib+pydantic, orjson+pydantic, "
                "msgspec-json, msgspec-msgpack or protobuf"
            )
        return value

    @field_validator("extra")
    @classmethod
    def _refuse_keys(
        cls, extra: dict[str, LibrdkafkaValue]
    ) -> dict[str, LibrdkafkaValue]:
        for key in extra:
            if key in _DENIED:
                raise ValueError(
                    f"librdkafka setting {key!r} is refused: {_DENIED[key]}"
                )
            if key in _TYPED_KEYS:
                raise ValueError(f"set {key!r} through {_TYPED_KEYS[key]}, not extra")
        return extra

    @model_validator(mode="after")
    def _consistent(self) -> LoadgenSettings:
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
        return self

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

    def common_config(self, *, plaintext_secrets: bool = False) -> dict[str, Any]:
        """librdkafka settings shared by the producer and the recorder's consumer."""
        password = self.sasl_password
        typed: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "client.id": self.client_id,
            "security.protocol": self.security_protocol,
            "sasl.mechanism": self.sasl_mechanism,
            "sasl.username": self.sasl_username,
            "sasl.password": None
            if password is None
            else password.get_secret_value()
            if plaintext_secrets
            else MASK,
            "ssl.ca.location": self.ssl_ca_location,
        }
        return {k: v for k, v in typed.items() if v is not None}

    def producer_config(self, *, plaintext_secrets: bool = False) -> dict[str, Any]:
        """The producer's librdkafka settings: idempotent, acks=all by default."""
        return {
            **_TUNING,
            **self.extra,
            **self.common_config(plaintext_secrets=plaintext_secrets),
            "enable.idempotence": self.idempotence,
            "acks": self.acks,
            "linger.ms": self.linger_ms,
            "compression.type": self.compression,
            "message.timeout.ms": int(self.delivery_timeout_s * 1000),
        }

    def consumer_config(self, *, plaintext_secrets: bool = False) -> dict[str, Any]:
        """The recorder's consumer: its own throwaway group, nothing committed."""
        return {
            **self.extra,
            **self.common_config(plaintext_secrets=plaintext_secrets),
            "group.id": f"codec-loadgen-record-{secrets.token_hex(4)}",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
        }


def flag_name(field: str) -> str:
    """The command-line flag of a settings field, e.g. `--pool-size`."""
    return FLAGS.get(field, "--" + field.replace("_", "-"))


def env_name(field: str) -> str:
    """The environment variable of a settings field, e.g. `LOADGEN_RATE`."""
    return ENV_PREFIX + field.upper()


def _check_env(environ: Mapping[str, str]) -> None:
    fields = set(LoadgenSettings.model_fields)
    for name in environ:
        if (
            name.startswith(ENV_PREFIX)
            and name[len(ENV_PREFIX) :].lower() not in fields
        ):
            raise ConfigError(
                f"config error: environment variable {name} names no setting "
                f"(see codec-loadgen --help for the {ENV_PREFIX}* variables)"
            )


def _shown(field: str, value: Any) -> str:
    if field == "extra" and isinstance(value, dict):
        return "{keys: " + ", ".join(sorted(map(str, value))) + "}"
    if "password" in field:
        return MASK
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def format_validation_error(exc: ValidationError) -> str:
    """One line per problem: the field (flag, variable), the value, what is allowed."""
    lines = []
    for err in exc.errors(include_url=False):
        field = str(err["loc"][0]) if err["loc"] else ""
        msg = err["msg"].removeprefix("Value error, ")
        if not field:  # a rule across several fields
            lines.append(f"config error: {msg}")
        elif err["type"] == "extra_forbidden":
            lines.append(f"config error: unknown setting {field!r}")
        else:
            where = f"{field} ({flag_name(field)}, {env_name(field)})"
            lines.append(
                f"config error: {where} = {_shown(field, err['input'])}: {msg}"
            )
    return "\n".join(lines)


def load_settings(
    overrides: Mapping[str, Any] | None = None,
    *,
    config_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> LoadgenSettings:
    """Build the settings from every source.

    Args:
        overrides: values from command-line flags (highest precedence).
        config_file: a TOML file with the settings' field names as keys.
        environ: the environment to check for stray `LOADGEN_` variables
            (default: `os.environ`).

    Raises:
        ConfigError: naming the field, the value and the rule.
    """
    _check_env(os.environ if environ is None else environ)
    return build_settings(
        LoadgenSettings, overrides, config_file, format_validation_error
    )
