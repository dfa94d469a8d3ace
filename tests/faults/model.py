"""The fault suite's records: what a run observed, as plain data the checker judges."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

Header = tuple[str, bytes | None]

_SHOWN: Final = 5
"""Examples quoted per failed check: enough to start a diagnosis, short enough to read."""


@dataclass(frozen=True, slots=True)
class Sent:
    """One input message the broker acknowledged (from a delivery report)."""

    seq: int
    partition: int
    offset: int
    timestamp_ms: int = 0


@dataclass(frozen=True, slots=True)
class Written:
    """One record read back from the output or dead-letter topic."""

    seq: int | None
    partition: int
    offset: int
    timestamp_ms: int
    append_time: bool = False
    """The timestamp is the broker's (LogAppendTime): when the write landed."""
    key: bytes | None = None
    value: bytes | None = None
    headers: tuple[Header, ...] = ()

    def header(self, name: str) -> bytes | None:
        """The last value of header `name` (None if absent)."""
        found = None
        for key, value in self.headers:
            if key == name:
                found = value
        return found


@dataclass(frozen=True, slots=True)
class Expected:
    """What the DLQ must hold for one injected poison message."""

    value: bytes | None
    key: bytes | None = None
    headers: tuple[Header, ...] = ()
    """Original headers the dead letter must carry unchanged."""
    droppable: bool = False
    """Over the DLQ producer's limit: a record naming its size may stand in."""
    unreadable_ok: bool = False
    """The worker may not be able to read it (a compressed bomb): a letter of
    reason `unreadable` whose offset range holds it may stand in."""


@dataclass(frozen=True, slots=True)
class Event:
    """Something that may legitimately reorder a partition's output."""

    at_ms: int
    kind: str
    partitions: frozenset[int] | None = None
    """The partitions it touches; None for all (a process start, stop or kill)."""
    until_ms: int | None = None
    """The end of an event that lasts (a worker rewinding and retrying a batch
    whose writes failed); None for an instant."""


@dataclass(frozen=True, slots=True)
class CommitSample:
    """The group's committed offsets at one instant (negative: none yet)."""

    at_ms: int
    offsets: Mapping[int, int]


@dataclass
class RunData:
    """Everything one run observed; see the module docstring."""

    acked: Mapping[int, Sent]
    output: Sequence[Written]
    dlq: Sequence[Written] = ()
    not_acked: frozenset[int] = frozenset()
    poison: Mapping[int, Expected] = field(default_factory=dict)
    events: Sequence[Event] = ()
    commits: Sequence[CommitSample] = ()
    end_offsets: Mapping[int, int] | None = None
    """Input high watermarks after the drain: the last commit must reach them."""
    dup_bound: int = 0
    """X of RELIABILITY 6.1: rate x (commit interval + batch time) + in flight."""
    fault_ends_ms: Sequence[int] = ()
    order_slack_ms: int = 1000
    """How far from a record an event may be and still explain its reordering:
    log lines and record timestamps come from different clocks' reads."""
    value_digest: bool = False
    """A dead letter written without its value must carry `x-dlq-value-sha256`
    (the fault suite's runs; synthetic runs may leave it out)."""


@dataclass
class Verdict:
    """A run's figures and the failures of its checks (empty: it passed)."""

    figures: dict[str, float | int | str] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """Whether every check passed."""
        return not self.failures

    def fail(self, check: str, count: int, examples: Sequence[object]) -> None:
        """Record a failed check with its count and a few examples."""
        shown = ", ".join(str(e) for e in list(examples)[:_SHOWN])
        more = f" (+{count - _SHOWN} more)" if count > _SHOWN else ""
        self.failures.append(f"{check}: {count}: {shown}{more}")
