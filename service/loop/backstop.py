"""The message budget's hard backstop: a call stuck in C ends the process, and the
restarted worker dead-letters the message instead of meeting it again.

A call into C that holds the GIL and never checks for signals (`sum(range(10**12))`,
a big-int `pow`, a C extension's own loop; `re` does check, and is interrupted) cannot
be interrupted: no Python runs until it returns, not the budget's handler, not
another thread. `faulthandler`'s watchdog can act, being a C thread that needs no GIL: the
budget's ticks re-arm it (at most once a second), and when none has run for
`hard_s` it writes every thread's traceback to `<record>.backstop` and stderr's
place, and exits the process with status 1, for the supervisor to restart it.

So that the restart does not meet the message again and loop, the ticks keep a
record (`<record>`, one fixed-size line rewritten in place, only when the message
in hand changes: at most 10 writes a second) of the message in hand. The stuck
message is that one or one shortly after it in the same batch (a tick comes every
0.1 s while the batch runs in Python). A restarted worker that finds the
`.backstop` file of such an exit goes **careful**: from its start it records every
message before handling it (a `pwrite`, a few microseconds), until it has handled
`CAREFUL_AFTER` messages past the recorded one (or `CAREFUL_MAX_S` passed without
meeting it: its partition went to another worker). If it exits by the backstop
again, the record names the stuck message exactly, and the next incarnation
dead-letters that message on sight (reason `budget`) without decoding it. Two
restarts, then the worker goes on. The record lives on local disk
(`budget_state_dir`, default the system's temp directory): it must survive the
restart (a Kubernetes container restart keeps an `emptyDir` volume, not `/tmp`).
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, Final

import structlog

from service.delivery.dead_letters import Poison
from service.kafka.protocols import KafkaMessage

log = structlog.get_logger(__name__)

CAREFUL_AFTER: Final = 1000
"""Messages handled carefully past the recorded one: a batch (500 by default) and more."""
CAREFUL_MAX_S: Final = 120.0
_RECORD_BYTES: Final = 512
_REARM_S: Final = 1.0
"""The watchdog is re-armed at most this often (each arming starts a C thread)."""

Position = tuple[str, int, int]
"""topic, partition, offset."""


class Backstop:
    """The watchdog, its record, and careful mode after a backstop exit.

    Args:
        record: the record's path (None: the watchdog exits without a record).
        hard_s: seconds without a tick before the process exits.
        codec: the codec's name (a dead letter's header).
    """

    def __init__(self, record: Path | None, hard_s: float, codec: str) -> None:
        self._path = record
        self.hard_s = hard_s
        self._codec = codec
        self._fd = -1
        self._dump: IO[str] | None = None
        self._armed_at = 0.0
        self._noted: Any = None
        self.stuck: Position | None = None
        """Dead-lettered on sight: the previous incarnations exited twice on it."""
        self.suspect: Position | None = None
        """Careful from the start until `CAREFUL_AFTER` messages past this one."""
        self._past = -1
        """Messages handled since the suspect was met (-1: not met yet)."""
        self._careful_until = 0.0

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        """Read what a backstop exit left, open the record, arm the watchdog."""
        if self._path is not None:
            self._recover(self._path)
            self._path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
            self._dump = self._path.with_suffix(".backstop").open("w")
        self.rearm(time.monotonic())

    def stop(self) -> None:
        """Disarm the watchdog; remove the record (a stop is no evidence)."""
        faulthandler.cancel_dump_traceback_later()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._dump is not None:
            self._dump.close()
            self._dump = None
            assert self._path is not None  # noqa: S101 (set with _dump)
            for path in (self._path, self._path.with_suffix(".backstop")):
                with contextlib.suppress(OSError):
                    path.unlink()

    def rearm(self, now: float) -> None:
        """Push the exit `hard_s` away (from a tick; at most once a second)."""
        if now - self._armed_at >= _REARM_S:
            self._armed_at = now
            if self._dump is not None:
                faulthandler.dump_traceback_later(
                    self.hard_s, exit=True, file=self._dump
                )
            else:
                faulthandler.dump_traceback_later(self.hard_s, exit=True)

    @property
    def careful(self) -> bool:
        """Whether messages are handled one at a time, each recorded first."""
        return self.stuck is not None or self.suspect is not None

    # -- the record ------------------------------------------------------------------

    def note(self, m: KafkaMessage, exact: bool = False) -> None:
        """Record the message in hand (a tick's; `exact`: careful mode's)."""
        if self._fd < 0 or (m is self._noted and not exact):
            return
        self._noted = m
        line = f"{m.topic()}\t{m.partition()}\t{m.offset()}\t{'exact' if exact else 'tick'}"
        os.pwrite(self._fd, line.encode().ljust(_RECORD_BYTES), 0)

    def _recover(self, path: Path) -> None:
        dump = path.with_suffix(".backstop")
        try:
            exited = dump.stat().st_size > 0
            line = path.read_bytes().decode(errors="replace").strip()
        except OSError:
            return
        if not exited:
            return
        dump.replace(path.with_suffix(".backstop.prev"))  # kept for the operator
        topic, partition, offset, kind = [*line.split("\t"), "", "", ""][:4]
        if not partition.lstrip("-").isdigit() or not offset.isdigit():
            # No tick saw a message of that batch (the stuck one came first):
            # careful from the start.
            topic, partition, offset, kind = "", "-1", "-1", "tick"
            self._past = 0
        where = (topic, int(partition), int(offset))
        if kind == "exact":
            self.stuck = where
        else:
            self.suspect = where
        self._careful_until = time.monotonic() + CAREFUL_MAX_S
        log.error(
            "backstop_exit_found",
            stuck=f"{topic}[{partition}]@{offset}" if topic else "not recorded",
            exact=kind == "exact",
            traceback=str(path.with_suffix(".backstop.prev")),
        )

    # -- careful mode ----------------------------------------------------------------

    def careful_run(self, run: Any, over_budget: Any) -> Any:
        """`run` (`MessagePath.run`) one message at a time, each recorded first; the
        stuck message is dead-lettered (`over_budget(m)` builds its poison)."""

        def careful(msgs: Sequence[KafkaMessage], tally: Any) -> int:
            nbytes = 0
            for i, m in enumerate(msgs):
                if not self.careful:
                    rest: int = run(msgs[i:], tally)
                    return nbytes + rest
                nbytes += self._one(m, tally, run, over_budget)
            return nbytes

        return careful

    def careful_timed(self, run: Any, timed: Any, over_budget: Any) -> Any:
        """`MessagePath.timed`'s stand-in in careful mode (nothing is timed)."""

        def careful(m: KafkaMessage, tally: Any, *samples: list[int]) -> int:
            if not self.careful:
                rest: int = timed(m, tally, *samples)
                return rest
            return self._one(m, tally, run, over_budget)

        return careful

    def _one(self, m: KafkaMessage, tally: Any, run: Any, over_budget: Any) -> int:
        where = (m.topic(), m.partition(), m.offset())
        if where == self.stuck:
            tally.poison.append(over_budget(m))
            log.error(
                "backstop_dead_lettered", message=f"{where[0]}[{where[1]}]@{where[2]}"
            )
            self.stuck = self.suspect = None
            return 0
        self.note(m, exact=True)
        nbytes: int = run([m], tally)
        if where == self.suspect or self._past >= 0:
            self._past += 1
        if self._past >= CAREFUL_AFTER or time.monotonic() > self._careful_until:
            self.stuck = self.suspect = None
        return nbytes


def budget_poison(codec: str, hard_s: float, over: type[BaseException]) -> Any:
    """The poison for a message two incarnations exited on (`over`: the budget's
    `OverBudget`, passed in: this module is below `service.loop.message_budget`)."""
    text = (
        "the worker exited twice while this message was in hand (a call that held "
        f"the GIL past the backstop's {hard_s:g} s)"
    )

    def poison(m: KafkaMessage) -> Poison:
        exc = over.__new__(over)
        exc.args = (text,)
        return Poison.over_budget(m, codec, exc, "process")

    return poison
