"""The A/B report's PNG charts (matplotlib, the optional `report` extra).

One bar chart per headline figure, a bar group per profile with the repeats' spread
as error bars, and with several profiles the size sweep: messages per CPU-second
against wire bytes per message, one line per codec.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Final

from abrunner.results import Report, Row, Summary, by_cpu

CHARTS: Final = (
    ("cpu_per_message.png", "cpu_us_per_msg", "CPU microseconds per message"),
    ("p99_latency.png", "e2e_p99_ms", "end-to-end p99 latency (ms)"),
    ("rss.png", "rss_steady_mb", "steady RSS (MB)"),
    ("wire_size.png", "wire_bytes", "wire bytes per message"),
)
"""(file, figure, title) of each bar chart, in report.md's order."""
SPLIT_CHART: Final = "cpu_split.png"
"""Each codec's CPU per message split into its decode and the rest of the consumer."""
SWEEP_CHART: Final = "throughput_vs_size.png"
"""The size sweep's chart, drawn when the report holds several profiles."""
_LOG_SPAN: Final = 50
"""Bars spanning more than 50x get a log axis: a codec that fell behind (seconds of
latency against milliseconds) would flatten the rest to nothing."""


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise ImportError(
            "charts need matplotlib: pip install 'codec-ab[report]'"
        ) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def charts(report: Report, out: Path) -> list[Path]:
    """Draw the charts into `out`; return their paths.

    Raises:
        ImportError: matplotlib is not installed (the message names the extra).
    """
    summary = report.summary
    profiles = list(summary)
    codecs = by_cpu(summary[profiles[0]]) if profiles else []
    ticks = [tick_label(summary, c, report.plan.max_mode) for c in codecs]
    written = [
        _bar_chart(summary, codecs, ticks, key, title, out / name)
        for name, key, title in drawable(summary)
    ]
    if len(profiles) > 1 and written:
        written.append(_sweep_chart(summary, codecs, out / SWEEP_CHART))
    if splittable(summary):
        written.append(_split_chart(report, out / SPLIT_CHART))
    return written


def split(row: Row) -> tuple[float, float] | None:
    """A row's CPU us/msg as (decode, the rest): the decode's share (the mean decode
    over CPU per message) times the CPU per message; None unmeasured, or where a
    repeat's share came out above 1 (not a share: `decode_share.OVER`)."""
    cpu, share = row.median("cpu_us_per_msg"), row.figures.get("decode_share")
    if cpu is None or share is None or not (math.isfinite(cpu) and cpu > 0):
        return None
    if share.max > 1:
        return None
    decode = cpu * max(share.median, 0.0)
    return decode, cpu - decode


def splittable(summary: Summary) -> bool:
    """Whether any row of the first profile has a CPU split to draw."""
    first = next(iter(summary.values()), {})
    return any(split(row) is not None for row in first.values())


def _split_chart(report: Report, path: Path) -> Path:
    profile, rows = next(iter(report.summary.items()))
    codecs = [c for c in by_cpu(rows) if split(rows[c]) is not None]
    parts = [split(rows[c]) or (0.0, 0.0) for c in codecs]
    fig, ax = _pyplot().subplots(figsize=(9, 4.5))
    ticks = [tick_label(report.summary, c, report.plan.max_mode) for c in codecs]
    decode = [d for d, _ in parts]
    rest = [r for _, r in parts]
    ax.barh(ticks, decode, label="decode")
    bars = ax.barh(ticks, rest, left=decode, label="the rest of the consumer")
    ax.bar_label(bars, labels=[_label(d + r) for d, r in parts], fontsize=8, padding=2)
    ax.invert_yaxis()  # the cheapest codec on top, as the tables list them
    title = "CPU microseconds per message: decode and the rest"
    ax.set_title(title if len(report.summary) == 1 else f"{title} ({profile})")
    ax.set_xlabel("us per message (worker process CPU)")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="upper right")
    ax.margins(x=0.08)
    return _save(fig, path)


def drawable(summary: Summary) -> list[tuple[str, str, str]]:
    """The `CHARTS` with a figure to draw: none for a run where every case failed."""
    return [
        chart
        for chart in CHARTS
        if any(
            (spread := row.figures.get(chart[1])) is not None
            and math.isfinite(spread.median)
            and spread.median > 0
            for rows in summary.values()
            for row in rows.values()
        )
    ]


def tick_label(summary: Summary, codec: str, max_mode: bool = False) -> str:
    """The codec's name, marked when it failed or fell behind on any profile:
    its bar is missing, or was measured on a saturated worker."""
    rows = [rows[codec] for rows in summary.values() if codec in rows]
    if any(row.errors for row in rows):
        return f"{codec}\n(FAILED)"
    behind = any(row.not_drained or not row.kept_up for row in rows)
    if behind and not max_mode:
        return f"{codec}\n(FELL BEHIND)"
    return codec


def _bar_chart(
    summary: Summary,
    codecs: list[str],
    ticks: list[str],
    key: str,
    title: str,
    path: Path,
) -> Path:
    fig, ax = _pyplot().subplots(figsize=(9, 4.5))
    width = 0.8 / max(len(summary), 1)
    drawn: list[float] = []
    for i, (profile, rows) in enumerate(summary.items()):
        values, lows, highs = _bars([rows.get(c) for c in codecs], key)
        xs = [x + i * width for x in range(len(codecs))]
        bars = ax.bar(xs, values, width, label=profile, yerr=[lows, highs], capsize=3)
        ax.bar_label(bars, fmt=_label, fontsize=8, padding=2)
        drawn.extend(v for v in values if v > 0)
    middle = width * (len(summary) - 1) / 2
    ax.set_xticks(
        [x + middle for x in range(len(codecs))], ticks, rotation=20, ha="right"
    )
    if drawn and max(drawn) > _LOG_SPAN * min(drawn):
        ax.set_yscale("log")
        title += " (log scale)"
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    if len(summary) > 1:
        ax.legend(title="profile")
    return _save(fig, path)


def _bars(
    rows: list[Row | None], key: str
) -> tuple[list[float], list[float], list[float]]:
    """Per codec: the median bar (0 when unmeasured) and its error bar extents."""
    values, lows, highs = [], [], []
    for row in rows:
        spread = row.figures.get(key) if row else None
        if spread is None or not math.isfinite(spread.max):  # no number, no bar
            values.append(0.0)
            lows.append(0.0)
            highs.append(0.0)
        else:
            values.append(spread.median)
            lows.append(spread.median - spread.min)
            highs.append(spread.max - spread.median)
    return values, lows, highs


def _label(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _sweep_chart(summary: Summary, codecs: list[str], path: Path) -> Path:
    fig, ax = _pyplot().subplots(figsize=(9, 4.5))
    for codec in codecs:
        points = sorted(
            (rows[codec].median("wire_bytes") or 0, 1e6 / cpu)
            for rows in summary.values()
            if codec in rows and (cpu := rows[codec].median("cpu_us_per_msg"))
        )
        if points:
            ax.plot(
                [p[0] for p in points], [p[1] for p in points], marker="o", label=codec
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("wire bytes per message")
    ax.set_ylabel("messages per CPU-second (one core)")
    ax.set_title("throughput per core vs payload size")
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    return _save(fig, path)


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)
    return path
