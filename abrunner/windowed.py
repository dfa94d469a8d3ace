"""What a paired run measured window by window, and whether the machine could carry it.

report.json keeps every worker's windows as measured (`Window`: counters and the
latency histogram's counts over a few seconds), so the window-by-window ratios
(`abrunner.report.paired`) are recomputed from the file, as the rest of the
report is; `Capacity` is the check that chose paired or sequential runs.
"""

from __future__ import annotations

import msgspec


class Window(msgspec.Struct, frozen=True, kw_only=True):
    """One codec's worker over one window of a paired repeat.

    Attributes:
        codec: the codec's registry key.
        profile: the payload profile's label.
        repeat: the repeat, from 0.
        index: the window's place in its repeat, from 0 (every codec's window i
            spans the same instants, sampled back to back).
        seconds: its length.
        messages: messages the worker handled in it, whatever the outcome.
        cpu_s: the worker process's CPU seconds in it (`/proc/<pid>/stat`).
        lag: the worker's consumer lag at its end.
        e2e: the e2e latency histogram's counts in it, bucket by bucket: one per
            bound of `Paired.bounds`, then the count above the top bound.
    """

    codec: str
    profile: str
    repeat: int
    index: int
    seconds: float
    messages: float
    cpu_s: float
    lag: float
    e2e: list[float]


class PrecisionStop(msgspec.Struct, frozen=True, kw_only=True):
    """Why a profile of a paired run stopped adding repeats (`--precision`).

    Attributes:
        profile: the payload profile's label.
        asked: the precision asked, a fraction (0.05 for ±5 %).
        reached: the widest CPU us/msg ratio's interval half-width, a fraction of
            the ratio (`abrunner.lab.precision.half_width`); None while a ratio
            has no interval.
        widest: the codec of that ratio (or of one without an interval).
        repeats: repeats run.
        windows: the baseline's usable windows over those repeats.
        seconds: the profile's wall time, repeats one after another.
        why: `reached`, `time cap` (another repeat would pass `cap_s`), `repeat
            limit` or `failed` (two repeats in a row failed).
        cap_s: the time cap.
    """

    profile: str
    asked: float
    reached: float | None
    widest: str | None
    repeats: int
    windows: int
    seconds: float
    why: str
    cap_s: float


class Paired(msgspec.Struct, kw_only=True):
    """A paired run's windows.

    Attributes:
        window_s: the window asked for (`--window-s`).
        bounds: the e2e histogram's finite upper bounds, seconds.
        windows: every codec's windows, in the order measured.
        stops: with `--precision`, why each profile stopped adding repeats.
    """

    window_s: float
    bounds: list[float]
    windows: list[Window] = msgspec.field(default_factory=list)
    stops: list[PrecisionStop] = msgspec.field(default_factory=list)


class Capacity(msgspec.Struct, frozen=True, kw_only=True):
    """Whether the machine can carry every codec's worker at the rate at once.

    Attributes:
        cores: the machine's cores (`os.cpu_count()`).
        needed: the cores a paired run needs: `workers` summed, plus `others`.
        workers: each codec's expected worker cores at the rate.
        others: the load generator's and the broker's expected cores.
        basis: where the per-message costs came from.
        fits: `needed` fits in `cores`: the run is paired.
        load: the 1-minute load average when checked (not a gate: on a shared
            machine it is the neighbours' work, which the figures should name).
    """

    cores: int
    needed: float
    workers: dict[str, float]
    others: float
    basis: str
    fits: bool
    load: float | None = None
