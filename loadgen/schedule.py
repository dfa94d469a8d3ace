"""Rate schedules and run plans: when each message of a run is due, and how many.

Message k of a run is due at t_k = N^-1(k), where N(t) counts the messages the rate
pattern asks for by time t (message 0 at t = 0; a run of T seconds sends the
messages with t_k < T, so each second [s, s+1) holds its rate). Rates are piecewise
linear (constant, ramp, step, spike), so N is piecewise quadratic and inverts in
closed form; a paced replay uses its recorded timestamps instead (`TableSchedule`).
The sent-time header (`service.kafka.headers.SENT_NS`) and the Kafka timestamp are t_k on
the wall clock, whenever the message actually leaves (no coordinated omission).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from typing import Protocol

from loadgen.config import LoadgenSettings
from loadgen.source import Source


class Schedule(Protocol):
    """Intended send times of a run's messages (seconds from the start)."""

    def due(self, t: float) -> int:
        """How many messages are due by `t` (intended time <= t)."""
        ...

    def time_of(self, k: int) -> float:
        """The intended send time of message `k`."""
        ...

    def count_before(self, t: float) -> int:
        """How many messages are due strictly before `t`."""
        ...

    def rate_at(self, t: float) -> float:
        """The scheduled rate at `t`, msg/s."""
        ...


class RateSchedule:
    """A piecewise-linear rate: `pieces` are (seconds, rate from, rate to).

    The last piece is open-ended at its final rate; zero-length pieces are skipped.
    """

    def __init__(self, pieces: Iterable[tuple[float, float, float]]) -> None:
        self._segs: list[tuple[float, float, float, float]] = []  # t0, r0, slope, n0
        t = n = 0.0
        for length, r0, r1 in pieces:
            if length > 0:
                slope = 0.0 if math.isinf(length) else (r1 - r0) / length
                self._segs.append((t, r0, slope, n))
                t, n = t + length, n + length * (r0 + r1) / 2
        self._t0 = [s[0] for s in self._segs]
        self._n0 = [s[3] for s in self._segs]

    def _seg(self, t: float) -> tuple[float, float, float, float]:
        return self._segs[max(0, bisect_right(self._t0, t) - 1)]

    def cumulative(self, t: float) -> float:
        """N(t): messages scheduled by `t` (fractional)."""
        t0, r0, slope, n0 = self._seg(t)
        x = t - t0
        return n0 + r0 * x + slope * x * x / 2

    def due(self, t: float) -> int:
        return int(self.cumulative(t) + 1e-7) + 1 if t >= 0 else 0

    def count_before(self, t: float) -> int:
        return max(0, math.ceil(self.cumulative(t) - 1e-7)) if t > 0 else 0

    def time_of(self, k: int) -> float:
        t0, r0, slope, n0 = self._segs[max(0, bisect_left(self._n0, k) - 1)]
        d = k - n0
        if d <= 0:
            return t0
        # x solves slope/2 x^2 + r0 x = d; this form is stable when slope -> 0.
        return t0 + 2 * d / (r0 + math.sqrt(max(r0 * r0 + 2 * slope * d, 0.0)))

    def rate_at(self, t: float) -> float:
        t0, r0, slope, _ = self._seg(t)
        return r0 + slope * (t - t0)


class TableSchedule:
    """Recorded send times (seconds, non-decreasing), repeated every `period_s`."""

    def __init__(self, times_s: list[float], period_s: float) -> None:
        self._times, self._period = times_s, period_s

    def due(self, t: float) -> int:
        if t < 0:
            return 0
        laps, rest = divmod(t, self._period)
        return int(laps) * len(self._times) + bisect_right(self._times, rest)

    def count_before(self, t: float) -> int:
        if t <= 0:
            return 0
        laps, rest = divmod(t, self._period)
        return int(laps) * len(self._times) + bisect_left(self._times, rest)

    def time_of(self, k: int) -> float:
        laps, i = divmod(k, len(self._times))
        return laps * self._period + self._times[i]

    def rate_at(self, t: float) -> float:
        return len(self._times) / self._period


def rate_pieces(s: LoadgenSettings) -> list[tuple[float, float, float]]:
    """The (seconds, rate from, rate to) pieces of the settings' pattern."""
    inf, rate = math.inf, s.rate
    if s.pattern == "ramp":
        ramp = s.ramp_s or s.duration or 0.0
        return [(ramp, s.start_rate, rate), (inf, rate, rate)]
    if s.pattern == "step":
        rates = [
            s.start_rate + (rate - s.start_rate) * k / s.steps for k in range(s.steps)
        ]
        return [(s.step_s, r, r) for r in rates] + [(inf, rate, rate)]
    if s.pattern == "spike":
        peak = 2 * rate if s.spike_rate is None else s.spike_rate
        return [(s.spike_at_s, rate, rate), (s.spike_s, peak, peak), (inf, rate, rate)]
    return [(inf, rate, rate)]


def build_schedule(s: LoadgenSettings, source: Source) -> Schedule | None:
    """The run's schedule; None when unthrottled."""
    if s.paced_replay and source.times_s is not None:
        speed = s.speed or 1.0
        return TableSchedule(
            [t / speed for t in source.times_s], source.period_s / speed
        )
    return RateSchedule(rate_pieces(s)) if s.rate > 0 else None


def plan(
    s: LoadgenSettings, schedule: Schedule | None, source: Source
) -> tuple[int | None, float]:
    """(messages to send or None, planned window in seconds) for the run."""
    count, duration = s.count, s.duration
    if count is None and duration is None:
        count, duration = (len(source.values), None) if s.replay else (None, 60.0)
    if schedule is None:
        return count, duration or 0.0
    by_time = schedule.count_before(duration) if duration is not None else None
    if count is not None and (by_time is None or count < by_time):
        return count, schedule.time_of(count)
    assert by_time is not None and duration is not None  # noqa: S101  # one is set
    return by_time, duration


def shard_count(total: int, shard: int, shards: int) -> int:
    """How many of seqs 0..total-1 are congruent to `shard` modulo `shards`."""
    return max(0, (total - shard + shards - 1) // shards)
