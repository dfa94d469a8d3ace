"""The report as a table: rich on a terminal, Markdown anywhere else.

One row per codec and profile. Times are CPU microseconds per message, the median
with the min-max of the kept samples; `speedup` is the baseline's decode+read
median over the row's (json-stdlib+pydantic when measured, else the first codec,
as in `codec-ab`); bytes come from the allocation passes; GC is collections per
1,000 messages in generations 0/1/2 during the timed samples.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, TextIO

from codecbench.results import BenchReport, CaseResult, GcRate, OpResult, Spread

_BASELINE: Final = "json-stdlib+pydantic"

HEADERS: Final = (
    "codec",
    "profile",
    "wire B",
    "decode us",
    "decode+read us",
    "+all us",
    "+k us",
    "encode us",
    "speedup",
    "decode peak B",
    "decode+read peak B",
    "held B",
    "held malloc B",
    "GC/1k decode",
    "GC/1k decode+read",
)
"""The Markdown columns; the terminal drops `profile` (a table per profile)."""

_NOTES: Final = (
    "decode us alone compares nothing across codecs: protobuf (upb) and flatbuffers "
    "return lazy objects that convert a field when it is read, the others build "
    "every value in decode. +all us (decode, then every field read into Python "
    "values) is the column that compares like with like; +k us (decode, then only "
    "the --read-fields fields) is the narrow consumer's figure, where a lazy format "
    "can save; decode+read us runs the profile's stub logic. "
    "Times: median (min-max). speedup: the baseline's decode+read median over the "
    "row's. peak B: traced (tracemalloc) high-water of one call above its start. "
    "held B: traced bytes kept while the decoded object is alive. held malloc B: "
    "glibc malloc in use per held decoded object, where upb's arenas show (not in "
    "traced bytes; overlaps held B for objects over 512 B). GC/1k: collections per "
    "1,000 messages, generations 0/1/2, during the timed samples."
)


def _t(us: float) -> str:
    """3-4 significant digits: 0.31, 21.5, 1725."""
    return f"{us:.0f}" if us >= 100 else f"{us:.1f}" if us >= 10 else f"{us:.2f}"


def _us(figure: Spread) -> str:
    return f"{_t(figure.median)} ({_t(figure.min)}-{_t(figure.max)})"


def _us_stacked(figure: Spread) -> str:
    """Median over the range, dimmed (rich markup): keeps the column narrow."""
    return f"{_t(figure.median)}\n[dim]{_t(figure.min)}-{_t(figure.max)}[/dim]"


def _bytes(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


def _bytes_short(value: float | None) -> str:
    if value is None or abs(value) < 100_000:
        return _bytes(value)
    return f"{value / 1e3:,.0f}k" if abs(value) < 1e7 else f"{value / 1e6:,.0f}M"


def _rate(value: float) -> str:
    return f"{value:.0f}" if value >= 1000 else f"{value:.3g}"


def _gc(rate: GcRate) -> str:
    return "/".join(_rate(v) for v in (rate.gen0, rate.gen1, rate.gen2))


def _baseline(report: BenchReport) -> str:
    codecs = [r.codec for r in report.results]
    return _BASELINE if _BASELINE in codecs else codecs[0]


def rows(report: BenchReport, *, stacked: bool = False) -> list[tuple[str, ...]]:
    """One row of formatted cells per result, in `HEADERS` order.

    Args:
        report: the report.
        stacked: for the terminal: times as rich markup, the range under the
            median; bytes from 100,000 up in k or M (1,000s, 1,000,000s).
    """
    base = _baseline(report) if report.results else ""
    return [
        _row(r, report.case(base, r.profile).decode_read.us.median, stacked)
        for r in report.results
    ]


def _row(r: CaseResult, base_us: float, stacked: bool) -> tuple[str, ...]:
    us, size = (_us_stacked, _bytes_short) if stacked else (_us, _bytes)
    return (
        r.codec,
        r.profile,
        _bytes(r.wire_bytes),
        us(r.decode.us),
        us(r.decode_read.us),
        _opt(us, r.read_all),
        _opt(us, r.read_fields),
        us(r.encode.us),
        f"{base_us / r.decode_read.us.median:.1f}x",
        size(r.decode.alloc.peak_bytes),
        size(r.decode_read.alloc.peak_bytes),
        size(r.decode.alloc.retained_bytes),
        size(r.malloc_held_bytes),
        _gc(r.decode.gc),
        _gc(r.decode_read.gc),
    )


def _opt(us: Callable[[Spread], str], op: OpResult | None) -> str:
    return "n/a" if op is None else us(op.us)


def _caption(report: BenchReport) -> str:
    m, env = report.method, report.environment
    return (
        f"codec-bench {env.version}: CPU us per message ({m.clock}), "
        f"{m.repeats} samples of {m.min_time_s * 1e3:g}-{m.min_time_s * 2e3:g} ms "
        f"after {m.warmups} warm-up(s); pool of {m.pool_size} (seed {m.seed}, "
        f"large {m.large_bytes:,} B); {env.python}, protobuf {env.protobuf_backend}; "
        f"loop overhead {env.loop_overhead_us.median * 1e3:.0f} ns/msg, included; "
        f"speedup baseline: {_baseline(report)}; +k reads {m.read_fields!r}."
    )


def to_markdown(report: BenchReport) -> str:
    """The table as GitHub-flavoured Markdown, with its caption and notes."""
    lines = [
        _caption(report),
        "",
        "| " + " | ".join(HEADERS) + " |",
        "|" + "|".join("---" if i < 2 else "--:" for i in range(len(HEADERS))) + "|",
    ]
    lines += ["| " + " | ".join(row) + " |" for row in rows(report)]
    return "\n".join([*lines, "", _NOTES, *_left_out(report)])


def _left_out(report: BenchReport) -> list[str]:
    """A line per case of a user's schema a codec cannot carry (not measured)."""
    if not report.left_out:
        return []
    lines = ["", "Left out (the codec cannot carry the schema):"]
    for entry in report.left_out:  # "codec on schema: schema error: head:\n  field"
        head, *fields = entry.replace(": schema error: ", ": ").splitlines()
        lines += [f"- {head}", *(f"  - {f.strip()}" for f in fields)]
    return lines


_TERMINAL_HEADERS: Final = (
    "codec",
    "wire\nB",
    "decode\nus",
    "+read\nus",
    "+all\nus",
    "+k\nus",
    "encode\nus",
    "speed\nup",
    "decode\npeak B",
    "+read\npeak B",
    "held\nB",
    "held\nmalloc B",
    "GC/1k\ndecode",
    "GC/1k\n+read",
)
"""`HEADERS` without `profile`, folded to fit 14 columns in ~130 characters."""


def print_table(report: BenchReport, stream: TextIO) -> None:
    """Print the report: rich tables (one per profile) on a terminal, else Markdown."""
    if not stream.isatty():
        print(to_markdown(report), file=stream)
        return
    from rich import box
    from rich.console import Console
    from rich.table import Table

    console = Console(file=stream, highlight=False)
    console.print(_caption(report), style="italic")
    by_profile: dict[str, list[tuple[str, ...]]] = {}
    for row in rows(report, stacked=True):
        by_profile.setdefault(row[1], []).append(row)
    for profile, group in by_profile.items():
        table = Table(
            title=f"{profile} (decode+read = decode, then the {profile} logic)",
            box=box.SIMPLE_HEAD,
            title_justify="left",
            collapse_padding=True,
            pad_edge=False,
        )
        for header in _TERMINAL_HEADERS:
            is_codec = header == "codec"
            table.add_column(
                header,
                justify="left" if is_codec else "right",
                no_wrap=is_codec,
                overflow="fold",
            )
        for row in group:
            table.add_row(row[0], *row[2:])
        console.print(table)
    console.print(_NOTES, style="dim")
    for line in _left_out(report):
        console.print(line, markup=False)
