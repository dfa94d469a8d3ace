"""The worker's `[worker.processing]` section: the batch loop and what it does per
message (batches, the logic, retries, the budget, outputs, the guarantee)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from schemas.errors import ConfigError
from service.logic.user_handler import is_user_logic, load_handler


class Section(BaseModel):
    """A worker settings section: unknown keys refused, frozen, finite numbers."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class ProcessingSettings(Section):
    """The batch loop and what it does per message."""

    batch_size: Annotated[int, Field(ge=1, le=100_000)] = 500
    batch_timeout_ms: Annotated[float, Field(gt=0, le=60_000)] = 5.0
    offset_store_interval_ms: Annotated[float, Field(ge=0, le=60_000)] = 100.0
    """Processed positions are stored at most this often (0: after every batch),
    and always before a revoke, when idle and at shutdown; auto-commit sends the
    stored ones every `auto.commit.interval.ms` (5 s), so this adds at most this
    much to what a crash re-reads."""
    batch_max_bytes: Annotated[int, Field(ge=1024, le=1 << 31)] = 8 * 1024 * 1024
    """A batch asks for at most this many payload bytes: the next `consume()` takes
    `batch_size` messages or this over the last batch's mean size, if fewer, so
    1 MB messages come 8 at a time, not 500 (memory bounded by bytes)."""
    logic: str = "aggregate"
    """`aggregate|noop|flaky|fields` or a team's `MODULE:CALLABLE`
    (`service.logic.user_handler`: imported and its signature checked here, so a bad
    one is a config error before Kafka). `flaky` is `aggregate` whose every 20th
    message fails its first attempt (a transient error, for the fault suite's
    retry-budget scenario); `fields` reads only `read_fields`
    (`service.logic.named_fields`)."""
    read_fields: str = "3"
    """For `fields`: dotted paths `a,b.c` (through lists: every item), or a count k
    (the first k top-level fields)."""
    work_us: Annotated[float, Field(ge=0, le=1_000_000)] = 0.0
    output_topic: str | None = None
    dlq_topic: str | None = None
    processing_guarantee: Literal["at-least-once", "exactly-once"] = "at-least-once"
    """`exactly-once`: each batch's results, dead letters and consumed offsets in
    one Kafka transaction (`service.delivery.transactions`); auto-commit off, input
    read with `read_committed`. Readers of the outputs must use `read_committed`."""
    transactional_id: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    """Exactly-once: the producer's `transactional.id` (default
    `<group>-<host>-<worker index>`); stable across restarts, unique per worker."""
    on_decode_error: Literal["dead_letter", "fail"] = "dead_letter"
    delivery_timeout_s: Annotated[float, Field(ge=0.001, le=2_147_483)] = 30.0
    """How long a dead letter or output write may take to be acknowledged; past it
    the batch's partitions are rewound and paused, and retried with back-off."""
    max_in_flight: Annotated[int, Field(ge=1, le=100_000)] = 100
    """An async handler (`async def`, or a callable returning an awaitable): the
    most messages consumed and not yet finished (handled, their writes confirmed,
    their offsets stored) at once; at the bound the partitions are paused, and
    resumed once half of it is free (`service.loop.async_path.loop`). A sync handler
    handles one message at a time and ignores it."""
    ordering: Literal["partition", "key", "none"] = "partition"
    """An async handler: which messages are handled one after another. `partition`:
    those of one partition, in offset order (at most one message per partition in
    the handler); `key`: those of one key within a partition (different keys at
    once); `none`: any at once, up to `max_in_flight`. Offsets are stored for each
    partition's contiguous prefix of finished messages whatever the ordering."""
    max_attempts: Annotated[int, Field(ge=1, le=100)] = 3
    """Attempts of the logic per message before it is dead-lettered (1: no retry)."""
    retry_backoff_ms: Annotated[float, Field(ge=0, le=60_000)] = 50.0
    """Pause before a logic retry, doubled each attempt (in place: order is kept)."""
    message_budget_ms: Annotated[float, Field(ge=0, le=3_600_000)] = 5_000.0
    """Longest decode plus logic (retries and back-offs included) of one message;
    past it the message is dead-lettered with reason `budget` and the batch goes on
    (0: no budget). Enforced by a 0.1 s timer, not per message; a C call holding
    the GIL is not interrupted (`service.loop.message_budget`). Must stay under
    `max_poll_interval_ms`."""
    budget_state_dir: str | None = None
    """Where the budget's backstop keeps its record of the message in hand (None:
    the system's temp directory); it must survive a restart
    (`service.loop.backstop`)."""
    startup_timeout_s: Annotated[float, Field(ge=0, le=86_400)] = 60.0
    """Longest wait at start for a first answer from any broker (`bootstrap_servers`);
    past it the worker exits 1 with one line naming the address and the reason (0:
    wait for ever). A worker that has reached Kafka once retries for ever when its
    brokers go: a restart heals that, a wrong address never does."""
    shutdown_timeout_s: Annotated[float, Field(gt=0, le=600)] = 10.0
    """Longest wait for `close()` (commit, leave the group) at shutdown."""
    processes: Annotated[int, Field(ge=1, le=256)] = 1
    index: Annotated[int, Field(ge=0, le=65_535)] = 0
    """This worker's index among `processes` (the supervisor gives each child its
    own; logged as `worker` on every line)."""

    @field_validator("logic")
    @classmethod
    def _logic_loads(cls, logic: str) -> str:
        if is_user_logic(logic):
            try:
                load_handler(logic)
            except ConfigError as exc:
                raise ValueError(str(exc)) from None
        return logic

    def dlq_topic_for(self, topic: str) -> str:
        """The dead-letter topic: configured, else `<topic>.dlq`."""
        return self.dlq_topic or f"{topic}.dlq"
