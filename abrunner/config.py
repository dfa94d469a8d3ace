"""The A/B runner's settings: `[kafka]` (shared) plus its flat `[ab]` table.

Read by `service.settings.sources.load` like every tool's: defaults < TOML (`--config`:
`[kafka]`, `[ab]`) < environment (`KAFKA_*`, `AB_<FIELD>`, e.g. `AB_CODECS`) <
flags. Lists may be given as comma-separated text (`AB_CODECS=msgspec-json,protobuf`)
or as JSON/TOML arrays.
"""

from __future__ import annotations

import re
from datetime import datetime
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

from schemas.errors import ConfigError
from schemas.registry import SchemaSpec
from service.kafka.connection import KafkaConnection, recorded_local_broker
from service.logic.user_handler import is_user_logic, load_handler
from service.settings.registry import Framing, RegistryConnection

DEFAULT_CODECS: Final[tuple[str, ...]] = (
    "json+pydantic",
    "json-stdlib+pydantic",
    "orjson+pydantic",
    "msgspec-json",
    "msgspec-msgpack",
    "protobuf",
)
"""What `codec-ab` runs without `--codecs`: the JSON-to-msgspec/protobuf migration
the tool exists for (about 6 minutes at the defaults). flatbuffers, capnp and avro
run when named: `--codecs msgspec-msgpack,protobuf,flatbuffers,capnp,avro`."""

TOOL: Final = "ab"

PREFERRED_BASELINE: Final = "json-stdlib+pydantic"
"""The baseline when listed (the legacy path of the seed story), else the first codec."""


def _split(value: Any) -> Any:
    """`a,b,c` as a list; lists and None as they are."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


Listed = Annotated[list[str], BeforeValidator(_split)]
Sizes = Annotated[list[Annotated[int, Field(ge=256)]], BeforeValidator(_split)]
Gated = Annotated[
    tuple[Literal["cpu_us_per_msg", "e2e_p99_ms", "rss_steady_mb"], ...],
    BeforeValidator(_split),
]
"""The figures `codec-ab --compare` may gate on (`abrunner.report.decisions.DECIDED`)."""

_UNITS: Final = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def _seconds(value: Any) -> Any:
    """`90`, `90s`, `5m`, `2h`, `1h30m` (Prometheus durations) as seconds."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    parts = re.findall(r"(\d+)(ms|s|m|h|d|w)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError("expected a duration like 90s, 5m, 2h or 1h30m")
    return float(sum(int(n) * _UNITS[u] for n, u in parts))


def _moment(value: Any) -> Any:
    """Unix seconds or an RFC 3339 time (`2026-11-25T18:00:00Z`) as unix seconds."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            "expected unix seconds or an RFC 3339 time like 2026-11-25T18:00:00Z"
        ) from None
    if moment.tzinfo is None:
        raise ValueError("give the time zone, e.g. 2026-11-25T18:00:00Z")
    return moment.timestamp()


def _percent(value: Any) -> Any:
    """`5%`, `5` or `2.5 %` as a percentage (5.0)."""
    if isinstance(value, str):
        text = value.strip().removesuffix("%").strip()
        try:
            return float(text)
        except ValueError:
            raise ValueError("expected a percentage like 5%") from None
    return value


Percent = Annotated[float, BeforeValidator(_percent), Field(gt=0, lt=100)]
Seconds = Annotated[float, BeforeValidator(_seconds), Field(gt=0)]
Moment = Annotated[float, BeforeValidator(_moment)]


class AbSettings(BaseModel):
    """Everything `codec-ab` needs, validated before any broker is started.

    `kafka.bootstrap_servers` counts only when given (flag, `KAFKA_BOOTSTRAP_SERVERS`
    or `[kafka]`); without it the broker `codec-kafka start` recorded is used, and
    without that the runner starts the local Kafka itself.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    kafka: KafkaConnection = Field(default_factory=KafkaConnection)
    registry: RegistryConnection = Field(default_factory=RegistryConnection)
    framing: Framing = "none"
    """`confluent`: each codec also runs framed, beside its twin (`abrunner.framing`)."""
    codecs: Listed = Field(default_factory=lambda: list(DEFAULT_CODECS), min_length=1)
    # Positive unless --max (a drain has no rate): checked by `Plan`.
    rate: Annotated[float, Field(ge=0)] = 40_000.0
    duration: Annotated[float, Field(ge=0)] = 30.0
    warmup: Annotated[float, Field(ge=0)] = 5.0
    schema_: Annotated[SchemaSpec | None, Field(alias="schema")] = None
    """A user's `MODULE:NAME` / `FILE.proto:Message` (or a built-in key), loaded
    while validating; it replaces `profile`, `profiles` and `large_bytes`."""
    profile: str = "medium"
    profiles: Listed | None = None
    large_bytes: Sizes | None = None
    replay: Path | None = None
    """A recording every load generator replays, transcoded into its case's codec."""
    repeat: Annotated[int, Field(ge=1, le=100)] = 1
    max_mode: bool = False
    # paired: every codec of a repeat at once (abrunner.lab.paired); else one by one.
    mode: Literal["paired", "sequential"] = "paired"
    window_s: Annotated[float, Field(gt=0)] = 1.0
    # Paired: more repeats until every CPU ratio is this precise (abrunner.lab.precision).
    precision: Percent | None = None
    precision_cap: Seconds = 900.0
    max_messages: Annotated[int, Field(ge=1)] = 200_000
    partitions: Annotated[int, Field(ge=1, le=1000)] = 4
    baseline: str | None = None
    out: Path = Path("ab-results")
    processing_guarantee: Literal["at-least-once", "exactly-once", "both"] = (
        "at-least-once"
    )
    """The workers' `--processing-guarantee`: exactly-once commits each batch's
    dead letters and offsets in one transaction (`service.delivery.transactions`);
    `both` (or `at-least-once,exactly-once`) runs the same load under each in turn
    and reports exactly-once's cost per codec (`abrunner.guarantees`)."""
    run_validators: bool = False
    """The workers' `--run-validators`: the derived Structs run a user's model's
    after validators (`schemas.user.struct_validators`)."""
    logic: str | None = None
    """The workers' `--logic`: a team's `MODULE:CALLABLE` (loaded and checked here,
    `service.logic.user_handler`) or a built-in one; None: the worker's default."""
    worker_args: list[str] = Field(default_factory=list)
    loadgen_args: list[str] = Field(default_factory=list)
    verify: bool = True
    bench: bool = True
    # The decision figures (abrunner.report.decisions, abrunner.report.compare); None: --rate.
    target_rate: Annotated[float, Field(gt=0)] | None = None
    max_regression: Annotated[float, Field(ge=0)] = 0.10
    gate_figures: Annotated[Gated, Field(min_length=1)] = ("cpu_us_per_msg",)
    # `codec-ab staging` (abrunner.staging.cli): two live sides from Prometheus.
    prometheus_url: Annotated[str, Field(pattern=r"^https?://\S+$")] | None = None
    side_a: Annotated[str, Field(min_length=1)] = 'side="A"'
    side_b: Annotated[str, Field(min_length=1)] = 'side="B"'
    window: Seconds = 3600.0
    start: Moment | None = None
    end: Moment | None = None
    slice: Seconds = 300.0
    max_difference: Annotated[float, Field(gt=0)] = 0.10

    @field_validator("processing_guarantee", mode="before")
    @classmethod
    def _both(cls, value: object) -> object:
        if isinstance(value, str) and "," in value:
            listed = {v.strip() for v in value.split(",")}
            if listed == {"at-least-once", "exactly-once"}:
                return "both"
        return value

    @field_validator("logic")
    @classmethod
    def _logic_loads(cls, logic: str | None) -> str | None:
        if logic is not None and is_user_logic(logic):
            try:
                load_handler(logic)
            except ConfigError as exc:
                raise ValueError(str(exc)) from None
        return logic

    @model_validator(mode="after")
    def _one_payload_source(self) -> AbSettings:
        built_in = {"profile", "profiles", "large_bytes"} & self.model_fields_set
        if self.schema_ is not None and built_in:
            flags = ", ".join(f"--{n.replace('_', '-')}" for n in sorted(built_in))
            raise ValueError(f"schema replaces {flags}: give one of them")
        if self.replay is not None and not self.replay.is_file():
            raise ValueError(f"replay: no such file: '{self.replay}'")
        if self.framing != "none":
            from codec.registry import framing_refusal

            for why in filter(None, map(framing_refusal, self.codecs)):
                raise ValueError(f"framing = {self.framing!r}: {why}")
            if self.replay is not None and self.registry.url is None:
                raise ValueError(
                    "framing: a replay needs the registry its recording's schema "
                    "ids are in: give --registry-url (a registry started for the "
                    "run knows none of them)"
                )
        return self

    def worker_argv(self) -> tuple[str, ...]:
        """Every worker's extra arguments: `--logic`, `--processing-guarantee` (when
        not the default) and `worker_args` (`--worker-arg=--batch-size=1000` is
        two arguments).

        With a team's handler, `--max-attempts 1` unless `worker_args` sets it: a
        handler that raises on a codec's objects (`model_dump` on a Struct) raises
        on every attempt, and the retries' back-off (50 + 100 ms a message) would
        hold that codec's worker to ~6 msg/s, measuring sleep, not CPU."""
        out: list[str] = []
        extra = [w for a in self.worker_args for w in a.split("=", 1)]
        if self.logic is not None:
            out += ["--logic", self.logic]
            if is_user_logic(self.logic) and "--max-attempts" not in extra:
                out += ["--max-attempts", "1"]
        if self.processing_guarantee != "at-least-once":
            out += ["--processing-guarantee", self.processing_guarantee]
        if self.run_validators:
            out += ["--run-validators"]
        return (*out, *extra)

    @property
    def bootstrap_given(self) -> bool:
        """Whether a broker address was given (flag, environment or TOML)."""
        return "bootstrap_servers" in self.kafka.model_fields_set

    @property
    def bootstrap(self) -> str | None:
        """The broker to use, or None to start the local Kafka.

        The address given, else the broker `codec-kafka start` (`make kafka-start`)
        recorded if it still runs, else None.
        """
        if self.bootstrap_given:
            return self.kafka.bootstrap_servers
        return recorded_local_broker()

    @property
    def chosen_baseline(self) -> str:
        """`baseline`, else json-stdlib+pydantic if listed, else the first codec."""
        if self.baseline is not None:
            return self.baseline
        return (
            PREFERRED_BASELINE if PREFERRED_BASELINE in self.codecs else self.codecs[0]
        )
