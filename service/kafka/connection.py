"""The Kafka connection every tool shares: fields, secrets, the librdkafka mapping.

One `[kafka]` section (environment `KAFKA_<FIELD>`) configures the worker, the load
generator and the A/B runner alike. `KafkaConnection.librdkafka()` is the only place
that maps its fields to dotted librdkafka keys and unmasks secrets; everything else
sees `MASK` where a secret is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    field_validator,
    model_validator,
)

from service.kafka.broker_record import (
    DEFAULT_DATA_DIR,
    read_state,
    recorded_client_settings,
)

LibrdkafkaValue = str | int | float | bool
"""A librdkafka setting's value as the client takes it."""

MASK: Final = "**********"

DEFAULT_BOOTSTRAP: Final = "127.0.0.1:9092"

UNSAFE_LIBRDKAFKA_KEYS: Final[dict[str, str]] = {
    "plugin.library.paths": "loads a shared library into the process",
    "sasl.kerberos.kinit.cmd": "runs a shell command",
    "ssl.engine.location": "loads an OpenSSL engine library",
}
"""librdkafka settings that load code or run commands: refused from every source."""

_TYPED_KEYS: Final[dict[str, str]] = {
    "bootstrap.servers": "bootstrap_servers",
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_username",
    "sasl.password": "sasl_password",
    "ssl.ca.location": "ssl_ca_location",
}
"""librdkafka keys owned by a typed field: `extra` may not set them. (The client
certificate's fields came later: `extra` may still set those keys, and a typed
field, when set, wins.)"""

_FIELD_KEYS: Final[dict[str, str]] = {
    **_TYPED_KEYS,
    **{
        key: key.replace(".", "_")
        for key in (
            "ssl.certificate.location",
            "ssl.key.location",
            "ssl.key.password",
            "ssl.keystore.location",
            "ssl.keystore.password",
        )
    },
}
"""Every typed field's librdkafka key: a client's error naming one names the field."""

_FLAG_FIELDS: Final = (
    "security_protocol",
    "sasl_mechanism",
    "sasl_username",
    "ssl_ca_location",
)
"""The fields every tool also takes as flags (`--security-protocol`...), after
`--bootstrap-servers` (`service.settings.cli_flags.KAFKA_FLAGS`)."""

_PASSTHROUGH_FIELDS: Final = (
    "ssl_certificate_location",
    "ssl_key_location",
    "ssl_keystore_location",
)
"""Fields without a flag of their own that `-X` can give as their librdkafka key."""

_SECRET_KEY: Final = re.compile(r"password|secret|\.pem$|jaas|token|credentials")
"""librdkafka keys whose values are masked in logs, errors and `--print-config`."""


def is_secret_key(key: str) -> bool:
    """Whether a librdkafka key (or a settings path) holds a secret."""
    return bool(_SECRET_KEY.search(key.lower()))


def recorded_local_broker(data_dir: Path = Path(DEFAULT_DATA_DIR)) -> str | None:
    """The address `codec-kafka start` recorded, if that broker still runs."""
    state = read_state(data_dir)
    return None if state is None else state["bootstrap"]


def default_bootstrap() -> str:
    """The local broker `codec-kafka start` (`make kafka-start`) left running, else
    127.0.0.1:9092; `KAFKA_BOOTSTRAP_SERVERS`, `[kafka]` and flags come first."""
    return recorded_local_broker() or DEFAULT_BOOTSTRAP


def refuse_keys(extra: Mapping[str, Any], denied: Mapping[str, str]) -> None:
    """Raise ValueError naming the first key of `extra` in `denied`, with the reason."""
    for key in extra:
        if key in denied:
            raise ValueError(f"librdkafka setting {key!r} is refused: {denied[key]}")


def check_client_config(
    conf: Mapping[str, Any], kind: Literal["consumer", "producer"]
) -> None:
    """Let librdkafka validate `conf` without a broker; raise ValueError on a bad value.

    The client is built without `bootstrap.servers`, so nothing connects: a value
    librdkafka refuses (`-X session.timeout.ms=x`) is reported as a configuration
    error before Kafka is touched, not as a traceback from the first client.
    """
    import logging

    from confluent_kafka import Consumer, KafkaException, Producer

    quiet = logging.getLogger("service.kafka.connection.check")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    probe = {k: v for k, v in conf.items() if k not in _PROBE_SKIPS}
    probe["logger"] = quiet
    try:
        client: Any = Consumer(probe) if kind == "consumer" else Producer(probe)
    except KafkaException as exc:
        raise ValueError(client_error(exc, conf)) from None
    if kind == "consumer":
        client.close()


_UNREADABLE: Final = {
    "ssl.key.location": (
        "ssl_key_location",
        "the private key cannot be read: a wrong or missing ssl_key_password "
        "(KAFKA_SSL_KEY_PASSWORD) if the key is encrypted, else not a PEM key",
    ),
    "ssl.keystore.location": (
        "ssl_keystore_location",
        "the keystore cannot be opened: a wrong or missing ssl_keystore_password "
        "(KAFKA_SSL_KEYSTORE_PASSWORD), else not a PKCS#12 file",
    ),
    "ssl.certificate.location": (
        "ssl_certificate_location",
        "the client certificate cannot be read (a PEM certificate?)",
    ),
    "ssl.ca.location": (
        "ssl_ca_location",
        "the CA certificates cannot be read (a PEM file or a directory?)",
    ),
}
"""librdkafka's "<key> failed: <OpenSSL's error>" (or "Failed to parse <key> ...") at
a client's creation, per key: the field to check and the likely cause (OpenSSL says
"PEM lib" for a wrong key passphrase, "mac verify failure" for a wrong PKCS#12
password)."""


def client_error(exc: Exception, conf: Mapping[str, Any]) -> str:
    """One line for a client librdkafka would not create from `conf`: the
    `[kafka]` field and value to check when it names one, never a secret.

    Args:
        exc: the KafkaException of the client's constructor.
        conf: the settings it was given.
    """
    error = exc.args[0] if exc.args else exc
    text = error.str() if hasattr(error, "str") else str(error)
    for key, (field, cause) in _UNREADABLE.items():
        if re.search(
            rf"{re.escape(key)} failed|Failed to parse {re.escape(key)}", text
        ):
            detail = text[text.find("error:") :] if "error:" in text else text
            return f"kafka: {field} = {conf.get(key)!r}: {cause} (OpenSSL: {detail})"
    fields = {
        k: _FIELD_KEYS[k] for k in re.findall(r"`([a-z.]+)`", text) if k in _FIELD_KEYS
    }
    if fields:  # a typed field's key ("`ssl.keystore.password` is mandatory ...")
        for key, field in fields.items():
            text = text.replace(f"`{key}`", f"{field} (KAFKA_{field.upper()})")
        return f"kafka: {text}"
    named = re.search(r'"([a-z0-9._]+)"', text)
    if named and named[1] in conf and not is_secret_key(named[1]):
        text += f": {conf[named[1]]!r}"
    return f"kafka: {text} (check -X and [kafka] extra)"


_PROBE_SKIPS: Final = frozenset(
    {"bootstrap.servers", "error_cb", "on_commit", "logger"}
)


class KafkaConnection(BaseModel):
    """How every tool reaches the cluster (TOML `[kafka]`, environment `KAFKA_*`).

    `extra` passes raw librdkafka settings through; settings that load code or run
    commands are refused, and so are the keys of the typed fields (set those by name).
    With no `bootstrap_servers` given, the broker `codec-kafka start` left running is
    used, and if it is secured, the settings of its `client.toml` fill in what is not
    given (security protocol, CA, SASL user and password, client keystore).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    bootstrap_servers: str = Field(default_factory=default_bootstrap, min_length=1)
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = (
        "PLAINTEXT"
    )
    sasl_mechanism: (
        Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI"]
        | None
    ) = None
    sasl_username: str | None = None
    sasl_password: SecretStr | None = None
    """The SASL password: masked in `--print-config` and logs; give it in the
    environment or the TOML file, never on the command line."""
    ssl_ca_location: str | None = None
    ssl_certificate_location: str | None = None
    """The client certificate, PEM (mutual TLS)."""
    ssl_key_location: str | None = None
    """The client certificate's private key, PEM (mutual TLS)."""
    ssl_key_password: SecretStr | None = None
    """The passphrase of `ssl_key_location`'s key, if it is encrypted."""
    ssl_keystore_location: str | None = None
    """The client key and certificate as a PKCS#12 file (mutual TLS)."""
    ssl_keystore_password: SecretStr | None = None
    """The password of `ssl_keystore_location`."""
    extra: dict[str, LibrdkafkaValue] = Field(default_factory=dict)
    """Raw librdkafka settings passed through (`-X KEY=VALUE`); settings that load
    code or run commands, and the typed fields' own keys, are refused."""

    _config_file: str | None = PrivateAttr(default=None)
    """The `--config FILE` whose `[kafka]` table gave settings (absolute)."""
    _flagged: frozenset[str] = PrivateAttr(default=frozenset())
    """The fields given by a flag (`--security-protocol`, `-X` for `extra`)."""

    @model_validator(mode="before")
    @classmethod
    def _recorded(cls, data: Any) -> Any:
        """With no address given, a secured local broker's client settings."""
        if not isinstance(data, dict) or "bootstrap_servers" in data:
            return data
        recorded = recorded_client_settings(Path(DEFAULT_DATA_DIR))
        recorded.pop("bootstrap_servers", None)  # the default factory reads it
        return {**recorded, **data}

    @field_validator("extra")
    @classmethod
    def _refuse(cls, extra: dict[str, LibrdkafkaValue]) -> dict[str, LibrdkafkaValue]:
        refuse_keys(extra, UNSAFE_LIBRDKAFKA_KEYS)
        for key in extra:
            if key in _TYPED_KEYS:
                raise ValueError(
                    f"librdkafka setting {key!r} is refused: set kafka."
                    f"{_TYPED_KEYS[key]} instead"
                )
        return extra

    def given(self, *, config_file: Path | None, flagged: Iterable[str]) -> None:
        """Record how the command line gave this connection, for `arguments`.

        Args:
            config_file: The `--config FILE` whose `[kafka]` table gave settings.
            flagged: The fields given by flags (`bootstrap_servers`, `extra`...).
        """
        self._config_file = None if config_file is None else str(config_file.absolute())
        self._flagged = frozenset(flagged)

    def arguments(self) -> list[str]:
        """The arguments that reach this cluster from another of the project's
        commands, as the printed hints carry them (`codec-kafka topics create ...`).

        `--config FILE` if one gave `[kafka]` settings, `--bootstrap-servers` if an
        address was given anywhere (none: both commands find the same broker, the one
        `codec-kafka start` recorded, else 127.0.0.1:9092), and the connection flags
        given on the command line, `-X` included. The environment is not repeated: the
        other command reads it too. Secrets never appear: a secret given with `-X`
        (against the advice) is shown masked.
        """
        args = [] if self._config_file is None else ["--config", self._config_file]
        if "bootstrap_servers" in self.model_fields_set:
            args += ["--bootstrap-servers", self.bootstrap_servers]
        for name in (*_FLAG_FIELDS, *_PASSTHROUGH_FIELDS):
            value = getattr(self, name)
            if name not in self._flagged or value is None:
                continue
            if name in _FLAG_FIELDS:
                args += ["--" + name.replace("_", "-"), str(value)]
            else:
                args += ["-X", f"{name.replace('_', '.')}={value}"]
        if "extra" in self._flagged:
            for key, item in self.masked_extra().items():
                text = str(item).lower() if isinstance(item, bool) else str(item)
                args += ["-X", f"{key}={text}"]
        return args

    def masked_extra(self) -> dict[str, LibrdkafkaValue]:
        """`extra` with the values of secret-looking keys masked."""
        return {k: MASK if is_secret_key(k) else v for k, v in self.extra.items()}

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        # str() and repr() must not show passthrough secrets.
        for name, value in super().__repr_args__():
            yield name, self.masked_extra() if name == "extra" else value

    def librdkafka(self, *, plaintext_secrets: bool = False) -> dict[str, Any]:
        """The connection as librdkafka settings, `extra` first (typed fields win).

        Args:
            plaintext_secrets: True only when handing the result to a client.
        """
        conf: dict[str, Any] = dict(
            self.extra if plaintext_secrets else self.masked_extra()
        )
        secrets = {
            "sasl.password": self.sasl_password,
            "ssl.key.password": self.ssl_key_password,
            "ssl.keystore.password": self.ssl_keystore_password,
        }
        for key, secret in secrets.items():
            if secret is not None:
                conf[key] = secret.get_secret_value() if plaintext_secrets else MASK
        typed = {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": self.security_protocol,
            "sasl.mechanism": self.sasl_mechanism,
            "sasl.username": self.sasl_username,
            "ssl.ca.location": self.ssl_ca_location,
            "ssl.certificate.location": self.ssl_certificate_location,
            "ssl.key.location": self.ssl_key_location,
            "ssl.keystore.location": self.ssl_keystore_location,
        }
        conf.update({k: v for k, v in typed.items() if v is not None})
        return conf

    def environment(self) -> dict[str, str]:
        """The connection as `KAFKA_*` variables, secrets in plain text: how a tool
        hands it to the tools it starts (an environment is private to the process
        and its user; an argument list is not)."""
        env: dict[str, str] = {}
        for name, value in self:
            if value is None or (name == "extra" and not value):
                continue
            key = "KAFKA_" + name.upper()
            if isinstance(value, SecretStr):
                env[key] = value.get_secret_value()
            elif isinstance(value, dict):
                env[key] = json.dumps(value)
            else:
                env[key] = str(value)
        return env

    def masked(self) -> dict[str, Any]:
        """The section as JSON-ready data, every secret masked."""
        data = self.model_dump(mode="json")
        data["extra"] = self.masked_extra()
        return data
