"""The async path's messages in flight: their tracks, the lanes that order them, the
tasks that handle them, and what takes them out before they are released.

Each consumed message gets an `Entry` in its partition's `PartitionTrack` and goes
to its lane: `--ordering partition` handles a partition's messages one after
another, `key` those of one key of a partition (keyless ones share a lane), `none`
every message in a task of its own. Every task belongs to one partition, so a
revoke can wait for, or cancel, exactly that partition's handlers (`of`, `forget`).

A message leaves the count in flight once: when it is released (its prefix written
and stored), or when it is dropped unreleased (`drop`: its partition revoked, or
rewound), or, if its handler was running when it was dropped, when that handler
ends; the bound (`max_in_flight`) counts handlers still running on dropped
messages too. A message whose schema the registry could not give (`Entry.wait`)
is dropped with every later message of its partition at once, before the lane
goes on, so nothing after it is handled before it; the loop then pauses and
rewinds its partition (`waits`). Unreadable data (a consumer error on a
message) is not handled: its dead letter is set aside in its track, done, and
released in offset order with the rest (`PartitionTrack.set_aside`).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from service.delivery.dead_letters import Poison
from service.kafka.protocols import KafkaMessage
from service.loop.async_path.handling import Handling
from service.loop.async_path.inflight import Entry, PartitionTrack

Lane = deque[tuple[Entry, PartitionTrack]]


class InFlight:
    """The messages consumed and not yet released; see the module docstring.

    Args:
        handling: the per-message work (decode, handler, retries, budget).
        ordering: `partition`, `key` or `none`.
        max_in_flight: the bound (a quarter of it finished wakes the loop early
            while at the bound).
        consumer_error: what a message whose `error()` is set is handed to
            (`PoisonHandler.consumer_error`): the dead letter of unreadable data,
            set aside in its track in offset order; else None.
    """

    def __init__(
        self,
        handling: Handling,
        ordering: str,
        max_in_flight: int,
        consumer_error: Callable[[KafkaMessage], Poison | None],
    ) -> None:
        self._handling = handling
        self._ordering = ordering
        self._quarter = max(1, max_in_flight // 4)
        self._consumer_error = consumer_error
        self.tracks: dict[int, PartitionTrack] = {}
        self._lanes: dict[Any, Lane] = {}
        self.tasks: dict[asyncio.Task[None], int] = {}
        """Each running task and the partition its messages belong to."""
        self.count = 0
        """Messages in flight (see the module docstring)."""
        self.finished = 0
        """Messages finished since the loop last released."""
        self.waits: list[Entry] = []
        """Messages whose schema the registry could not give, not yet held."""
        self.failed: BaseException | None = None
        """What a task raised (a defect of the loop's own code: the worker stops)."""
        self.at_bound = False
        """Set by the loop: the bound was reached this round."""
        self.wake: Callable[[], None] = lambda: None
        """Ends the loop's current slice early (`Slices.wake`)."""
        self.topic = ""
        """The topic of the messages consumed (where their offsets go)."""

    def dispatch(
        self, loop: asyncio.AbstractEventLoop, msgs: Sequence[KafkaMessage]
    ) -> None:
        """Track each message and start (or queue) its handling on `loop`."""
        tracks, lanes, ordering = self.tracks, self._lanes, self._ordering
        create, watch = loop.create_task, self._watch
        for m in msgs:
            p = m.partition() or 0
            track = tracks.get(p)
            if track is None:
                track = tracks[p] = PartitionTrack()
                self.topic = m.topic() or self.topic
            if m.error() is not None:  # counted, logged (rate-limited); fatal: raised
                if (bad := self._consumer_error(m)) and track.set_aside(m, bad):
                    self.count += 1  # unreadable data: its letter, in order
                    self.finished += 1
                continue
            entry = track.add(m)
            self.count += 1
            if ordering == "none":
                watch(create(self._handle(entry, track)), p)
                continue
            key = p if ordering == "partition" else (p, m.key())
            lane = lanes.get(key)
            if lane is not None:
                lane.append((entry, track))
                continue
            lanes[key] = lane = deque(((entry, track),))
            watch(create(self._drain(key, lane)), p)

    def of(self, partitions: Iterable[int]) -> list[asyncio.Task[None]]:
        """The running tasks of `partitions`' messages."""
        wanted = set(partitions)
        return [task for task, p in self.tasks.items() if p in wanted]

    def drop(self, entries: Iterable[Entry]) -> None:
        """Take `entries` (out of their track) out of flight, unreleased."""
        for entry in entries:
            entry.dropped = True
            if not entry.running:
                self.count -= 1

    def forget(self, partitions: Sequence[int]) -> int:
        """Drop `partitions`' messages in flight and cancel their handlers (their
        next owner handles them); return how many messages were dropped."""
        dropped = 0
        for p in partitions:
            track = self.tracks.pop(p, None)
            if track is not None:
                cut = track.cut()
                dropped += len(cut)
                self.drop(cut)
        gone = set(partitions)
        for key in [
            k for k in self._lanes if (k[0] if type(k) is tuple else k) in gone
        ]:
            del self._lanes[key]  # new messages of the partition start a new lane
        for task in self.of(gone):
            task.cancel()
        return dropped

    def _watch(self, task: asyncio.Task[None], partition: int) -> None:
        self.tasks[task] = partition
        task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        self.tasks.pop(task, None)
        if not task.cancelled() and (exc := task.exception()) is not None:
            self.failed = self.failed or exc
            self.wake()

    async def _drain(self, key: Any, lane: Lane) -> None:
        """Handle a lane's messages one after another (dropped ones skipped)."""
        try:
            while lane:
                entry, track = lane[0]
                await self._handle(entry, track)
                lane.popleft()
        finally:
            if self._lanes.get(key) is lane:
                del self._lanes[key]

    async def _handle(self, entry: Entry, track: PartitionTrack) -> None:
        if entry.dropped:
            return
        entry.running = True
        try:
            await self._handling.handle(entry)
        finally:
            entry.running = False
            if entry.dropped:  # dropped while it ran: it leaves the count now
                self.count -= 1
        if entry.dropped:
            return
        if entry.wait is not None:  # it and what follows are read again
            self.drop(track.cut(entry))
            self.waits.append(entry)
            return
        entry.done = True
        self.finished += 1
        if self.at_bound and self.finished >= self._quarter:
            self.wake()
