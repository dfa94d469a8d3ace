"""The typed A/B plan: which codecs and payload profiles, at what load, for how long.

`Plan` is built once at the edge (`abrunner.cli.plan_from_settings`), validated on
construction, passed down to the runner and written into report.json beside the
results, so a report says what produced it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Final, Literal, NamedTuple

import msgspec

from codec import CODEC_NAMES, REAL_CODECS
from codec.registry import REGISTRY_TYPES
from loadgen.config import LoadgenSettings
from schemas.errors import ConfigError
from schemas.registry import SCHEMA_NAMES

WARMUP_SEED: Final = 1
MEASURED_SEED: Final = 2
"""The load generator's payload seeds: the warm-up's, and the measured load's (or
the max-mode backlog's), which the in-process figures use too: same payloads."""
POOL_SIZE: Final[int] = LoadgenSettings.model_fields["pool_size"].default
"""The load generator's pool (its `--pool-size` default, which the runner keeps and
the in-process figures decode)."""
INPROCESS_REPEATS: Final = 5
"""In-process samples of 50-100 ms per figure: ~2 s per codec and profile, so the
six codecs add ~15 s before a run of several minutes."""

FRAMED: Final = "+confluent"
"""The suffix of a framed case's codec (`avro+confluent`): the codec's values in the
Confluent frame, through the run's registry (`Plan.registry_url`), as codec-bench
names its framed rows."""

_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]+")
"""What a Kafka topic name may not hold (a spec's `:` and `/`, say)."""
_MAX_LABEL: Final = 80
"""A topic name has at most 249 characters: a long spec keeps its end (the type)."""


class Profile(msgspec.Struct, frozen=True, omit_defaults=True):
    """A payload profile: a built-in schema and, for `large`, its size in bytes; or
    a user's schema (`MODULE:NAME`, `FILE.proto:Message`), whose spec it keeps.

    A user's spec is only checked for its form here: `codec-ab` loaded it while
    its settings were validated, and a report.json is read back without it.

    Raises:
        ConfigError: the schema is unknown, or a size is given for another schema.
    """

    schema: str
    large_bytes: int | None = None

    def __post_init__(self) -> None:
        sized = self.large_bytes is not None
        known = self.schema in SCHEMA_NAMES or (self.user and not sized)
        if not known or (sized and self.schema != "large"):
            raise ConfigError(
                f"profile {self.label!r}: expected small, medium, large or large:BYTES"
            )
        if sized and (self.large_bytes or 0) < 1:
            raise ConfigError(f"profile {self.label!r}: BYTES must be at least 1")

    @property
    def user(self) -> bool:
        """True for a user's schema (a spec, `MODULE:NAME` or `FILE.proto:Message`)."""
        return ":" in self.schema

    @property
    def label(self) -> str:
        """The profile as the command line writes it: `medium`, `large:100000`,
        `shop:Order`."""
        return f"{self.schema}:{self.large_bytes}" if self.large_bytes else self.schema

    @classmethod
    def parse(cls, text: str) -> Profile:
        """`small`, `medium`, `large` or `large:BYTES` as a Profile.

        Raises:
            ConfigError: `text` is none of those.
        """
        schema, _, size = text.partition(":")
        if size and (schema != "large" or not size.isdigit()):
            raise ConfigError(
                f"profile {text!r}: expected small, medium, large or large:BYTES"
            )
        return cls(schema, int(size) if size else None)


class Plan(msgspec.Struct, frozen=True, kw_only=True):
    """What to run: every case is one codec on one profile, `repeat` times.

    Attributes:
        codecs: registry keys of the wire codecs to compare (never `auto`).
        profiles: the payload profiles to sweep.
        rate: messages per second the load generator sends (rate mode).
        duration: measured seconds per case (rate mode).
        warmup: seconds of load before the measured window.
        repeat: runs of each case; the report shows the median and the spread.
        max_mode: measure each codec's maximum rate per worker process instead.
        max_messages: the backlog one worker drains in max mode.
        partitions: partitions of each case's topic.
        baseline: the codec the report's ratios refer to.
        out: the report directory.
        worker_args: extra `codec-worker` arguments, passed to every worker.
        verify: read each topic back to check the run's `x-seq` coverage.
        bench: before the Kafka cases, measure each codec's decode in-process
            (`codecbench`) to set beside the Kafka path's.
        replay: a recording every case's load generator replays (transcoded into
            the case's codec) instead of synthetic payloads.
        loadgen_args: extra `codec-loadgen` arguments, passed to every run.
        left_out: codecs asked for that the schema refuses, with why
            (`UserSchema.refusal`): the others run.
        skipped: checks the user's own form makes that a measured codec skips,
            one "codecs: path: check" line each (`schemas.user.skipped_checks`).
        validators: the model's validators a measured codec runs in its derived
            Struct (`--run-validators`), one "... run by codecs" line each.
        not_run: the code of the user's model (validators, computed fields, a
            callable discriminator) a measured codec does not run, one "path:
            what not run by codecs: effect" line each (`schemas.user.validators`).
        mode: `paired` (every codec of a repeat at once, on the same traffic,
            compared window by window) or `sequential` (one codec after another,
            in a rotated order); paired falls back to sequential where the
            machine cannot carry every worker at the rate (`abrunner.lab.capacity`).
            Reports written before paired runs read as sequential.
        window_s: a paired run's window: seconds between two samples of every
            worker, the unit its ratios are taken over.
        rotated: sequential repeats run the codecs in `rotations` order (every
            plan `codec-ab` builds); False in reports written before, whose
            repeats all ran in the listed order.
        logic: the workers' `--logic` (a team's `MODULE:CALLABLE`, or a built-in
            one), None for the worker's default; it is also in `worker_args`.
        processing_guarantee: the workers' `--processing-guarantee`.
        logic_verdicts: (codec, verdict line) of a team's handler on a user's
            schema, judged before the run (`abrunner.report.logic_verdicts`).
        registry_url: the schema registry of the framed cases (`<codec>+confluent`
            in `codecs`, `abrunner.framing`); None when nothing is framed.
        precision: a paired run adds repeats past `repeat` until every CPU us/msg
            ratio's 95 % interval is within this fraction of it (0.05: ±5 %;
            `abrunner.lab.precision`), or `precision_cap_s` would be passed;
            None: `repeat` repeats. A report's `repeat` is the repeats run.
        precision_cap_s: the time cap of `precision`, per profile.

    Raises:
        ConfigError: a value is out of range; the message names the flag.
    """

    codecs: tuple[str, ...]
    profiles: tuple[Profile, ...]
    rate: float
    duration: float
    warmup: float
    repeat: int
    max_mode: bool
    max_messages: int
    partitions: int
    baseline: str
    out: str
    worker_args: tuple[str, ...] = ()
    verify: bool = True
    bench: bool = True
    replay: str | None = None
    loadgen_args: tuple[str, ...] = ()
    left_out: tuple[tuple[str, str], ...] = ()
    skipped: tuple[str, ...] = ()
    validators: tuple[str, ...] = ()
    not_run: tuple[str, ...] = ()
    mode: Literal["paired", "sequential"] = "sequential"
    window_s: float = 1.0
    rotated: bool = False
    logic: str | None = None
    processing_guarantee: str = "at-least-once"
    logic_verdicts: tuple[tuple[str, str], ...] = ()
    registry_url: str | None = None
    precision: float | None = None
    precision_cap_s: float = 900.0

    def __post_init__(self) -> None:
        self._check_precision()
        for codec in self.codecs:
            wire = codec.removesuffix(FRAMED)
            if wire == codec and (codec not in CODEC_NAMES or codec == "auto"):
                raise ConfigError(
                    f"--codecs: {codec!r} is not a wire codec; "
                    f"choose from {', '.join(REAL_CODECS)}"
                )
            if wire != codec and wire not in REGISTRY_TYPES:
                raise ConfigError(
                    f"--codecs: {codec!r}: {wire} has no schema registry type"
                )
        if self.baseline not in self.codecs:
            raise ConfigError(
                f"--baseline {self.baseline!r} is not among --codecs "
                f"({', '.join(self.codecs)})"
            )
        # --max drains a backlog as fast as it goes: rate and duration do not apply.
        paced = {"rate": self.rate, "duration": self.duration}
        checked = {**({} if self.max_mode else paced), "warmup": self.warmup}
        for name, value in checked.items():
            if value <= 0:
                raise ConfigError(f"--{name} must be positive, got {value}")
        if self.window_s <= 0:
            raise ConfigError(f"--window-s must be positive, got {self.window_s}")
        if min(self.repeat, self.partitions, self.max_messages) < 1:
            raise ConfigError(
                "--repeat, --partitions and --max-messages must be at least 1"
            )
        if self.replay is not None and len(self.profiles) != 1:
            raise ConfigError(
                "--replay: a recording holds one schema's traffic; give one "
                "--schema or --profile, not a sweep"
            )

    def _check_precision(self) -> None:
        if self.precision is None:
            return
        if not 0 < self.precision < 1:
            raise ConfigError(
                f"--precision must be between 0 % and 100 %, got {self.precision:.0%}"
            )
        if self.precision_cap_s <= 0:
            raise ConfigError("--precision-cap must be positive")
        if self.mode != "paired" or self.max_mode or len(self.codecs) < 2:
            raise ConfigError(
                "--precision: narrows a paired run's CPU ratios (--mode paired, two "
                "codecs or more, not --max)"
            )

    def framing_args(self, case: Case) -> tuple[str, ...]:
        """The `codec-worker` and `codec-loadgen` arguments of a framed case (none
        for an unframed one)."""
        if not case.framed:
            return ()
        if self.registry_url is None:
            raise ConfigError(f"{case.codec}: a framed case needs a registry URL")
        return ("--framing", "confluent", "--registry-url", self.registry_url)

    @property
    def out_dir(self) -> Path:
        """`out` as a path."""
        return Path(self.out)

    def heading(self, label: str) -> str:
        """A table's heading, e.g. "Schema `shop:Order`" or "Profile `medium`"."""
        user = any(p.user and p.label == label for p in self.profiles)
        return f"{'Schema' if user else 'Profile'} `{label}`"

    @property
    def payloads(self) -> str | None:
        """What the load generators sent, when not the built-in synthetic payloads."""
        users = [p.label for p in self.profiles if p.user]
        labels = users or [p.label for p in self.profiles]
        what = f"your schema `{users[0]}`" if users else f"`{', '.join(labels)}`"
        if self.replay is not None:
            return (
                f"Payloads: {what} messages replayed from `{self.replay}`: as "
                "recorded, byte for byte, in a case of the recording's wire format; "
                "transcoded into the case's codec in the others."
            )
        if users:
            return (
                f"Payloads: {what}, synthesized from its types (seed "
                f"{MEASURED_SEED}; the same values for every codec)."
            )
        return None

    def cases(self) -> list[Case]:
        """Every case in the order they run: per profile, per repeat, per codec.

        Repeat r runs the codecs in `rotations` row r (the listed order first), so
        whatever drifts over a run (the broker's log, the page cache, a
        neighbour's load) does not land on the same codec every repeat.
        """
        rows = self._rows()
        return [
            Case(self.codecs[i], profile, repeat)
            for profile in self.profiles
            for repeat in range(self.repeat)
            for i in rows[repeat % len(rows)]
        ]

    def position(self, case: Case) -> int:
        """Where `case` runs within its repeat: 0 first."""
        rows = self._rows()
        return rows[case.repeat % len(rows)].index(self.codecs.index(case.codec))

    def _rows(self) -> list[list[int]]:
        n = len(self.codecs)
        return rotations(n) if self.rotated else [list(range(n))]


def rotations(n: int) -> list[list[int]]:
    """A balanced order of `n` items per row: a Williams design.

    Every item takes every position equally often, and every item directly
    follows every other equally often (first-order carry-over balanced): n rows
    for an even n, 2n (the rows and their mirror images) for an odd one. Relabelled
    so that row 0 is the listed order: one repeat runs as the codecs were given.
    """
    if n < 2:
        return [list(range(n))]
    first = [0] + [(j + 1) // 2 if j % 2 else n - j // 2 for j in range(1, n)]
    rows = [[(a + r) % n for a in first] for r in range(n)]
    if n % 2:
        rows += [row[::-1] for row in rows]
    label = {item: i for i, item in enumerate(first)}
    return [[label[item] for item in row] for row in rows]


class Case(NamedTuple):
    """One measurement: a codec on a profile, the `repeat`th time."""

    codec: str
    profile: Profile
    repeat: int

    @property
    def wire_codec(self) -> str:
        """The codec's registry key: `avro` for `avro+confluent`."""
        return self.codec.removesuffix(FRAMED)

    @property
    def framed(self) -> bool:
        """Its values are in the Confluent frame (`Plan.framing_args`)."""
        return self.codec != self.wire_codec

    @property
    def name(self) -> str:
        """For people: `protobuf / medium / run 1`."""
        return f"{self.codec} / {self.profile.label} / run {self.repeat + 1}"

    @property
    def tag(self) -> str:
        """For topic and log file names: `json-pydantic-large-100000`,
        `msgspec-json-shop-Order` (only letters, digits, `.`, `_` and `-`)."""
        label = _UNSAFE.sub("-", self.profile.label).strip("-")[-_MAX_LABEL:]
        return f"{self.codec.replace('+', '-')}-{label}"
