"""The shared `[registry]` section: where the schema registry is, and how to reach it.

Every tool that writes or reads framed values (`--framing confluent`) takes it, as
it takes `[kafka]`: `[registry]` in the TOML file, `REGISTRY_<FIELD>` in the
environment (`REGISTRY_URL`, `REGISTRY_USERNAME`, `REGISTRY_PASSWORD`,
`REGISTRY_CA_FILE`), `--registry-url` on the command line. With no URL given, the
local registry `codec-kafka registry start` recorded (`.local-kafka/registry.json`).
The password is a `SecretStr`: masked in `--print-config` and the start-up log, and
never a flag (it would show in `ps`). Credentials in the URL
(`https://KEY:SECRET@host/...`, as Confluent Cloud's are often written) are taken
out of it when the settings are read: they become `username` and `password`, and
the URL is kept without them, so nothing prints them; given both ways, the settings
are refused. The tools hand the section to the tools they start as `REGISTRY_*`
variables (`RegistryConnection.environment`), never in their arguments.

What is checked when: a URL that is not http(s), credentials given twice, a CA file
for an http URL are refused with the other settings (exit status 2, nothing
contacted); reaching the registry with the URL, credentials and CA file
(`codec.registry.access_check`) is every tool's first step after the settings, and a
failure there is one line naming the setting (exit status 1, nothing consumed).
"""

from __future__ import annotations

import urllib.parse
from pathlib import Path
from typing import Annotated, Any, Final, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)

from codec.registry import RegistryAccess
from service.kafka.broker_record import DEFAULT_DATA_DIR
from service.kafka.registry_record import read_registry_state

REGISTRY: Final = "registry"
"""The section's name in the TOML file and the environment's prefix."""

Framing = Literal["none", "confluent"]
SubjectStrategy = Literal["topic", "record", "topic_record"]


def recorded_local_registry(data_dir: Path = Path(DEFAULT_DATA_DIR)) -> str | None:
    """The URL `codec-kafka registry start` recorded, if that registry still runs."""
    state = read_registry_state(data_dir)
    return None if state is None else state["url"]


class RegistryConnection(BaseModel):
    """A Confluent-compatible schema registry and the client's bounds.

    The bounds keep a registry that is down from stalling a consumer: the first
    message of a new schema id waits at most `attempts` x `timeout_s` plus the
    back-off (2 x 0.2 s), 6.6 s with the defaults; then its partition is paused and
    retried (`/readyz` 503, no dead letter: `service.loop.registry_wait`); for
    `cooldown_s` after a failure, lookups of other new ids fail at once, while ids
    already known keep decoding.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    url: str | None = Field(default_factory=recorded_local_registry)
    """Base URL of the Confluent-compatible API (Apicurio: `.../apis/ccompat/v7`).
    Credentials in it (`https://KEY:SECRET@host`) become `username` and `password`
    and leave it. Reached once at start with the credentials and CA file: a failure
    is one line naming the setting, exit status 1."""
    username: str | None = None
    """The user name of HTTP basic authentication, if the registry asks for it."""
    password: SecretStr | None = None
    """Its password: masked in `--print-config` and logs; give it in the environment
    (`REGISTRY_PASSWORD`) or the TOML file, never on the command line."""
    ca_file: Path | None = None
    """A CA bundle (PEM) for an https URL (default: the system's); read at start:
    missing, unreadable or without a certificate, one line naming it, exit status 1."""
    timeout_s: Annotated[float, Field(gt=0, le=60)] = 2.0
    """How long one request to the registry may take."""
    attempts: Annotated[int, Field(ge=1, le=10)] = 3
    """Requests for a new schema id's schema; when they all fail (the registry down
    or refusing this client after start), the message's partition is paused and
    retried, `/readyz` 503, never a dead letter."""
    cooldown_s: Annotated[float, Field(ge=0, le=3600)] = 5.0
    """After a registry failure, how long lookups of other new ids fail at once."""
    cache_size: Annotated[int, Field(ge=1, le=1_000_000)] = 1000
    """Decoders kept, one per schema id; past it the oldest is dropped."""
    subject_strategy: SubjectStrategy = "topic"
    """How a writer names the subject it registers under: `topic` (TopicNameStrategy,
    `<topic>-value`), `record` (`<record name>`), `topic_record`
    (`<topic>-<record name>`)."""

    @model_validator(mode="before")
    @classmethod
    def _credentials_out_of_the_url(cls, data: Any) -> Any:
        """``https://KEY:SECRET@host`` -> the URL without them, `username` and
        `password` (refused if they are given beside it)."""
        if not isinstance(data, dict) or not isinstance(data.get("url"), str):
            return data
        url, user, secret = split_credentials(data["url"])
        if user is None:
            return data
        if data.get("username") is not None or data.get("password") is not None:
            raise ValueError(
                f"registry.url {url!r} holds credentials, and registry.username or "
                "registry.password is set too: give them one way "
                "(REGISTRY_USERNAME and REGISTRY_PASSWORD)"
            )
        return {**data, "url": url, "username": user, "password": secret}

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return value
        parts = urllib.parse.urlsplit(value)
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            raise ValueError("not an http:// or https:// URL with a host")
        try:
            parts.port  # noqa: B018 (raises for a port that is not a number)
        except ValueError as exc:
            raise ValueError(f"its port: {exc}") from None
        return value

    @model_validator(mode="after")
    def _ca_file_for_https(self) -> RegistryConnection:
        if self.ca_file is not None and (self.url or "").lower().startswith("http:"):
            raise ValueError(
                f"registry.ca_file is set but registry.url {self.url!r} is http: "
                "the CA file would check nothing (an https URL?)"
            )
        return self

    def environment(self) -> dict[str, str]:
        """The section as `REGISTRY_*` variables, the password in plain text: how a
        tool hands it to the tools it starts (an environment is private to the
        process and its user; an argument list is not)."""
        env: dict[str, str] = {}
        for name, value in self:
            if value is None:
                continue
            shown = value.get_secret_value() if isinstance(value, SecretStr) else value
            env[f"{REGISTRY.upper()}_{name.upper()}"] = str(shown)
        return env

    def access(self) -> RegistryAccess:
        """What the codec's client needs (the password unmasked, never logged)."""
        if self.url is None:
            raise ValueError("no registry URL")
        secret = self.password.get_secret_value() if self.password else None
        return RegistryAccess(
            url=self.url,
            username=self.username,
            password=secret,
            ca_file=None if self.ca_file is None else str(self.ca_file),
            timeout_s=self.timeout_s,
            attempts=self.attempts,
            cooldown_s=self.cooldown_s,
        )

    def subject(self, topic: str, record: str) -> str:
        """The subject a writer registers its value schema under."""
        if self.subject_strategy == "record":
            return record
        if self.subject_strategy == "topic_record":
            return f"{topic}-{record}"
        return f"{topic}-value"


def framing_problem(
    framing: Framing, codec: str, registry: RegistryConnection, budget_ms: int | None
) -> str | None:
    """Why these settings cannot frame `codec`'s values (one line), or None.

    Args:
        framing: the framing asked for.
        codec: the codec's key.
        registry: the registry settings.
        budget_ms: the consumer's `max.poll.interval.ms` (None for a writer): one
            lookup's worst case must stay well inside it.
    """
    from codec.registry import framing_refusal

    if framing == "none":
        return None
    if (why := framing_refusal(codec)) is not None:
        return why
    if registry.url is None:
        return (
            "--framing confluent needs a registry: --registry-url, REGISTRY_URL, "
            "[registry] url, or `codec-kafka registry start`"
        )
    worst_ms = registry.access().budget_s * 1000
    if budget_ms is not None and worst_ms * 2 > budget_ms:
        return (
            f"registry lookups may take {worst_ms:.0f} ms (attempts x timeout_s): "
            f"more than half of max_poll_interval_ms {budget_ms}"
        )
    return None


def split_credentials(url: str) -> tuple[str, str | None, SecretStr | None]:
    """``url`` without its user and password, and them (percent-decoded)."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url, None, None
    userinfo, _, host = parts.netloc.rpartition("@")
    user, _, secret = userinfo.partition(":")
    bare = urllib.parse.urlunsplit(parts._replace(netloc=host))
    return bare, urllib.parse.unquote(user), SecretStr(urllib.parse.unquote(secret))
