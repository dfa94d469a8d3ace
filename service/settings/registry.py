"""The shared `[registry]` section: where the schema registry is, and how to reach it.

Every tool that writes or reads framed values (`--framing confluent`) takes it, as
it takes `[kafka]`: `[registry]` in the TOML file, `REGISTRY_<FIELD>` in the
environment (`REGISTRY_URL`, `REGISTRY_USERNAME`, `REGISTRY_PASSWORD`,
`REGISTRY_CA_FILE`), `--registry-url` on the command line. With no URL given, the
local registry `codec-kafka registry start` recorded (`.local-kafka/registry.json`).
The password is a `SecretStr`: masked in `--print-config` and the start-up log, and
never a flag (it would show in `ps`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

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
    back-off (2 x 0.2 s), 6.6 s with the defaults, then it is dead-lettered
    (reason `registry_unavailable`); for `cooldown_s` after that, messages of other
    new ids fail at once, while ids already known keep decoding.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    url: str | None = Field(default_factory=recorded_local_registry)
    """Base URL of the Confluent-compatible API (Apicurio: `.../apis/ccompat/v7`)."""
    username: str | None = None
    """The user name of HTTP basic authentication, if the registry asks for it."""
    password: SecretStr | None = None
    """Its password: masked in `--print-config` and logs; give it in the environment
    (`REGISTRY_PASSWORD`) or the TOML file, never on the command line."""
    ca_file: Path | None = None
    """A CA bundle for an https URL (default: the system's)."""
    timeout_s: Annotated[float, Field(gt=0, le=60)] = 2.0
    """How long one request to the registry may take."""
    attempts: Annotated[int, Field(ge=1, le=10)] = 3
    """Requests for a new schema id before its message is dead-lettered."""
    cooldown_s: Annotated[float, Field(ge=0, le=3600)] = 5.0
    """After a registry failure, how long messages of other new ids fail at once."""
    cache_size: Annotated[int, Field(ge=1, le=1_000_000)] = 1000
    """Decoders kept, one per schema id; past it the oldest is dropped."""
    subject_strategy: SubjectStrategy = "topic"
    """How a writer names the subject it registers under: `topic` (TopicNameStrategy,
    `<topic>-value`), `record` (`<record name>`), `topic_record`
    (`<topic>-<record name>`)."""

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
