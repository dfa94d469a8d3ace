"""The one configuration object, and the only module that reads the environment.

Precedence: defaults < TOML file (`--config`) < environment (`WORKER_` prefix, `__`
between levels, e.g. `WORKER_KAFKA__GROUP_ID`) < command-line flags. Unknown keys
are errors at every level, so a typo such as `grup_id` fails loudly.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Final, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from service.codecs import CodecName, JsonCodecName
from service.errors import ConfigError
from service.schemas import SchemaName

ENV_PREFIX: Final = "WORKER_"

LibrdkafkaValue = str | int | float | bool

UNSAFE_LIBRDKAFKA_KEYS: Final[dict[str, str]] = {
    "plugin.library.paths": "loads a shared library into the process",
    "sasl.kerberos.kinit.cmd": "runs a shell command",
    "ssl.engine.location": "loads an OpenSSL engine library",
}
"""librdkafka settings that load code or run commands: refused from every source."""

DENIED_LIBRDKAFKA_KEYS: Final[dict[str, str]] = {
    **UNSAFE_LIBRDKAFKA_KEYS,
    "enable.auto.offset.store": "the worker stores offsets itself (at-least-once)",
    "enable.auto.commit": "commit on revoke and on close rely on it",
    "group.id": "set kafka.group_id",
    "bootstrap.servers": "set kafka.bootstrap_servers",
}
"""librdkafka settings `kafka.extra` may not set, with the reason."""

_SECRET_KEY: Final = re.compile(r"password|secret|\.pem$|jaas|token|credentials")
"""librdkafka keys whose values are masked in logs and errors."""

MASK: Final = "**********"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class KafkaSettings(_Section):
    """Where to read and how to talk to Kafka."""

    bootstrap_servers: str = "127.0.0.1:9092"
    topic: str = "orders"
    group_id: str = "codec-worker"
    client_id: str = "codec-worker"
    auto_offset_reset: Literal["earliest", "latest", "error"] = "earliest"
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = (
        "PLAINTEXT"
    )
    sasl_mechanism: (
        Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI"]
        | None
    ) = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    ssl_ca_location: str | None = None
    session_timeout_ms: Annotated[int, Field(ge=1000)] = 45_000
    max_poll_interval_ms: Annotated[int, Field(ge=1000)] = 300_000
    fetch_max_bytes: Annotated[int, Field(ge=1024)] = 52_428_800
    queued_max_messages_kbytes: Annotated[int, Field(ge=1)] = 65_536
    extra: dict[str, LibrdkafkaValue] = Field(default_factory=dict)
    """Raw librdkafka settings passed through. Typed fields win on conflict."""

    @field_validator("extra")
    @classmethod
    def _refuse_denied_keys(
        cls, extra: dict[str, LibrdkafkaValue]
    ) -> dict[str, LibrdkafkaValue]:
        for key in extra:
            if key in DENIED_LIBRDKAFKA_KEYS:
                raise ValueError(
                    f"librdkafka setting {key!r} is refused: "
                    f"{DENIED_LIBRDKAFKA_KEYS[key]}"
                )
        return extra

    def masked_extra(self) -> dict[str, LibrdkafkaValue]:
        """`extra` with the values of secret-looking keys masked."""
        return {k: MASK if _SECRET_KEY.search(k) else v for k, v in self.extra.items()}

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        # str() and repr() of the settings must not show passthrough secrets.
        for name, value in super().__repr_args__():
            yield name, self.masked_extra() if name == "extra" else value

    def common_config(self, *, plaintext_secrets: bool = False) -> dict[str, Any]:
        """librdkafka settings shared by the consumer and producers.

        The only place that maps fields to dotted librdkafka keys; secrets are
        masked unless `plaintext_secrets` (only when handing them to librdkafka).
        """
        conf: dict[str, Any] = dict(
            self.extra if plaintext_secrets else self.masked_extra()
        )
        password = self.sasl_password
        typed: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "client.id": self.client_id,
            "security.protocol": self.security_protocol,
            "sasl.mechanism": self.sasl_mechanism,
            "sasl.username": self.sasl_username,
            "sasl.password": (
                None
                if password is None
                else password.get_secret_value()
                if plaintext_secrets
                else MASK
            ),
            "ssl.ca.location": self.ssl_ca_location,
        }
        conf.update({k: v for k, v in typed.items() if v is not None})
        return conf

    def consumer_config(self, *, plaintext_secrets: bool = False) -> dict[str, Any]:
        """The consumer's librdkafka settings (at-least-once, bounded memory)."""
        return {
            **self.common_config(plaintext_secrets=plaintext_secrets),
            "group.id": self.group_id,
            "auto.offset.reset": self.auto_offset_reset,
            "enable.auto.commit": True,
            "enable.auto.offset.store": False,
            "session.timeout.ms": self.session_timeout_ms,
            "max.poll.interval.ms": self.max_poll_interval_ms,
            "fetch.max.bytes": self.fetch_max_bytes,
            "queued.max.messages.kbytes": self.queued_max_messages_kbytes,
        }

    def producer_config(self, *, plaintext_secrets: bool = False) -> dict[str, Any]:
        """Dead-letter and output producers: idempotent, acks from all replicas."""
        common = self.common_config(plaintext_secrets=plaintext_secrets)
        return {
            **{k: v for k, v in common.items() if not k.startswith("fetch.")},
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 2,
        }


class CodecSettings(_Section):
    """Which codec decodes which schema."""

    name: CodecName = "json+pydantic"
    schema_: Annotated[SchemaName, Field(alias="schema")] = "medium"
    auto_json: JsonCodecName = "msgspec-json"
    auto_output: CodecName | None = None
    max_payload_bytes: Annotated[int, Field(ge=1)] = 4 * 1024 * 1024

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class ProcessingSettings(_Section):
    """The batch loop and what it does per message."""

    batch_size: Annotated[int, Field(ge=1, le=100_000)] = 500
    batch_timeout_ms: Annotated[float, Field(gt=0, le=60_000)] = 5.0
    logic: Literal["noop", "aggregate"] = "aggregate"
    work_us: Annotated[float, Field(ge=0, le=1_000_000)] = 0.0
    output_topic: str | None = None
    dlq_topic: str | None = None
    on_decode_error: Literal["dead_letter", "fail"] = "dead_letter"
    delivery_timeout_s: Annotated[float, Field(gt=0)] = 30.0
    processes: Annotated[int, Field(ge=1, le=256)] = 1

    def dlq_topic_for(self, topic: str) -> str:
        """The dead-letter topic: configured, else `<topic>.dlq`."""
        return self.dlq_topic or f"{topic}.dlq"


class MetricsSettings(_Section):
    """The control plane: `/metrics`, `/healthz`, `/readyz`."""

    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=0, le=65_535)] = 9100
    summary_interval_s: Annotated[float, Field(gt=0)] = 10.0
    latency_sample_every: Annotated[int, Field(ge=1, le=1024)] = 8
    """Time the end-to-end latency of every k-th message (1: all of them).

    Reading `x-sent-ns` costs ~0.9 us a message, ~15 % of a msgspec worker's whole
    per-message cost; a systematic 1-in-8 sample of 40k msg/s still gives 5,000
    latencies a second, plenty for a p99.9 over a run."""


class LoggingSettings(_Section):
    """Structured logs on stdout."""

    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["json", "console"] = "json"


class LayeredSettings(BaseSettings):
    """Settings read from flags (init values) > environment > one TOML file > defaults.

    `build_settings` chooses the TOML file for one construction.
    """

    _toml_file: ClassVar[Path | None] = None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources = [init_settings, env_settings]
        if cls._toml_file is not None:
            sources.append(TomlConfigSettingsSource(settings_cls, cls._toml_file))
        return tuple(sources)


S = TypeVar("S", bound=LayeredSettings)


def build_settings(
    cls: type[S],
    overrides: Mapping[str, Any] | None,
    config_file: Path | None,
    format_error: Callable[[ValidationError], str],
) -> S:
    """Construct `cls` from every source; any problem becomes a `ConfigError`."""
    if config_file is not None and not config_file.is_file():
        raise ConfigError(f"config error: --config {str(config_file)!r}: no such file")
    cls._toml_file = config_file
    try:
        return cls(**(overrides or {}))
    except ValidationError as exc:
        raise ConfigError(format_error(exc)) from None
    except ValueError as exc:  # a TOML syntax error
        raise ConfigError(f"config error: {config_file}: {exc}") from None
    finally:
        cls._toml_file = None


class Settings(LayeredSettings):
    """Everything the worker needs, validated once at start-up."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
        populate_by_name=True,
    )

    kafka: KafkaSettings = KafkaSettings()
    codec: CodecSettings = CodecSettings()
    processing: ProcessingSettings = ProcessingSettings()
    metrics: MetricsSettings = MetricsSettings()
    logging: LoggingSettings = LoggingSettings()

    def masked(self) -> dict[str, Any]:
        """The effective configuration with every secret masked (for logs)."""
        data = self.model_dump(mode="json", by_alias=True)
        data["kafka"]["extra"] = self.kafka.masked_extra()
        return data


def _check_env_sections(environ: Mapping[str, str]) -> None:
    sections = set(Settings.model_fields)
    for name in environ:
        if name.startswith(ENV_PREFIX):
            section = name[len(ENV_PREFIX) :].split("__", 1)[0].lower()
            if section not in sections:
                raise ConfigError(
                    f"config error: environment variable {name} names no setting "
                    f"(sections: {', '.join(sorted(sections))})"
                )


def _shown(loc: tuple[str | int, ...], value: Any) -> str:
    path = ".".join(str(p) for p in loc)
    if path == "kafka.extra" and isinstance(value, dict):
        return "{keys: " + ", ".join(sorted(map(str, value))) + "}"
    if "password" in path or (
        path.startswith("kafka.extra") and _SECRET_KEY.search(path)
    ):
        return MASK
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def format_validation_error(exc: ValidationError) -> str:
    """One line per problem: the dotted field, the bad value and what is allowed."""
    lines = []
    for err in exc.errors(include_url=False):
        loc = tuple(p for p in err["loc"] if p != "schema_") or ("<root>",)
        path = ".".join(str(p) for p in loc)
        if err["type"] == "extra_forbidden":
            lines.append(f"config error: unknown setting {path}")
        else:
            shown = _shown(loc, err.get("input"))
            lines.append(f"config error: {path} = {shown}: {err['msg']}")
    return "\n".join(lines)


def load_settings(
    overrides: Mapping[str, Any] | None = None,
    *,
    config_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Build the settings from every source.

    Args:
        overrides: nested values from command-line flags (highest precedence).
        config_file: a TOML file with the same sections as `Settings`.
        environ: the environment to check for stray `WORKER_` variables.

    Raises:
        ConfigError: with a message naming the field, the value and the rule.
    """
    _check_env_sections(os.environ if environ is None else environ)
    return build_settings(Settings, overrides, config_file, format_validation_error)
