"""The A/B report: one row per codec, ratios to a baseline, charts, the environment.

Input: the list of case results `codec-ab` measured (one dict per codec, profile and
repeat). Output in `--out`: `report.md`, `report.json` (everything) and PNG charts. The
same table goes to the terminal. With `--repeat N` every figure is the median, and the
Markdown shows the spread (min-max) so a reader sees the noise.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import statistics
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

# (key, header, format, lower is better)
RATE_COLUMNS: Final = [
    ("throughput", "msg/s", "{:,.0f}", False),
    ("cpu_pct", "CPU % core", "{:.0f}", True),
    ("cpu_us_per_msg", "CPU us/msg", "{:.1f}", True),
    ("decode_us", "decode us", "{:.1f}", True),
    ("e2e_p50_ms", "p50 ms", "{:.1f}", True),
    ("e2e_p99_ms", "p99 ms", "{:.1f}", True),
    ("e2e_p999_ms", "p99.9 ms", "{:.1f}", True),
    ("rss_peak_mb", "RSS peak MB", "{:.0f}", True),
    ("rss_steady_mb", "RSS MB", "{:.0f}", True),
    ("wire_bytes", "wire B/msg", "{:.0f}", True),
    ("lag_end", "lag end", "{:,.0f}", True),
]
MAX_COLUMNS: Final = [
    ("max_rate", "max msg/s/process", "{:,.0f}", False),
    ("cpu_us_per_msg", "CPU us/msg", "{:.1f}", True),
    ("decode_us", "decode us", "{:.1f}", True),
    ("rss_peak_mb", "RSS peak MB", "{:.0f}", True),
    ("wire_bytes", "wire B/msg", "{:.0f}", True),
]
RATIO_KEYS: Final = {
    "throughput",
    "max_rate",
    "cpu_us_per_msg",
    "e2e_p99_ms",
    "rss_steady_mb",
    "wire_bytes",
}
CHARTS: Final = [
    ("cpu_per_message.png", "cpu_us_per_msg", "CPU microseconds per message"),
    ("p99_latency.png", "e2e_p99_ms", "end-to-end p99 latency (ms)"),
    ("rss.png", "rss_steady_mb", "steady RSS (MB)"),
    ("wire_size.png", "wire_bytes", "wire bytes per message"),
]


def environment(kafka_version: str) -> dict[str, Any]:
    """Versions and machine facts that make the figures reproducible."""
    import confluent_kafka

    from service.codecs.protobuf_codec import protobuf_backend

    libs = ["msgspec", "pydantic", "pydantic-core", "orjson", "protobuf", "uvloop",
            "prometheus-client", "confluent-kafka"]  # fmt: skip
    cpu = "unknown"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu,
        "kafka": kafka_version,
        "librdkafka": confluent_kafka.libversion()[0],
        "protobuf_backend": protobuf_backend(),
        "libraries": {name: importlib.metadata.version(name) for name in libs},
    }


def aggregate(
    results: Sequence[dict[str, Any]],
) -> dict[str, dict[str, dict[str, Any]]]:
    """profile -> codec -> {metric: {median, min, max}, status fields}."""
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        grouped[r["profile"], r["codec"]].append(r)
    out: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for (profile, codec), runs in grouped.items():
        good = [r for r in runs if "error" not in r]
        row: dict[str, Any] = {
            "runs": len(runs),
            "errors": [r["error"] for r in runs if "error" in r],
            "kept_up": all(r.get("kept_up", False) for r in good) if good else False,
            "lost": sum(
                (r.get("lost") or 0) + (r.get("seq_missing") or 0) for r in good
            ),
            "not_drained": sum(r.get("not_drained") or 0 for r in good),
            "dead_lettered": sum(r.get("dead_lettered", 0) for r in good),
        }
        keys = {
            k
            for r in good
            for k, v in r.items()
            if isinstance(v, int | float) and not isinstance(v, bool)
        }
        for key in sorted(keys - row.keys()):
            values = [r[key] for r in good if isinstance(r.get(key), int | float)]
            if values:
                row[key] = {
                    "median": statistics.median(values),
                    "min": min(values),
                    "max": max(values),
                }
        out[profile][codec] = row
    return out


def _median(row: dict[str, Any], key: str) -> float | None:
    cell = row.get(key)
    return cell["median"] if isinstance(cell, dict) else None


def _ordered(rows: dict[str, dict[str, Any]]) -> list[str]:
    return sorted(
        rows, key=lambda c: _median(rows[c], "cpu_us_per_msg") or float("inf")
    )


def _status(row: dict[str, Any], max_mode: bool) -> str:
    if row["errors"]:
        return "FAILED: " + str(row["errors"][0])[:60]
    if row["lost"]:
        return f"LOST {row['lost']}"
    if row.get("not_drained"):
        return f"FELL BEHIND, not drained ({row['not_drained']:,} queued)"
    if max_mode or row["kept_up"]:
        return "ok"
    cpu = _median(row, "cpu_pct") or 0
    return f"FELL BEHIND (lag {(_median(row, 'lag_end') or 0):,.0f}, CPU {cpu:.0f}%)"


def table(rows: dict[str, dict[str, Any]], baseline: str, max_mode: bool,
          spread: bool) -> tuple[list[str], list[list[str]]]:  # fmt: skip
    """Headers and cells of one profile's table, best CPU per message first."""
    columns = MAX_COLUMNS if max_mode else RATE_COLUMNS
    base = rows.get(baseline, {})
    headers = ["codec", "status", *[c[1] for c in columns], "lost", "DLQ"]
    body = []
    for codec in _ordered(rows):
        row = rows[codec]
        cells = [
            codec + (" (baseline)" if codec == baseline else ""),
            _status(row, max_mode),
        ]
        for key, _header, fmt, _lower in columns:
            value = _median(row, key)
            if value is None:
                cells.append("-")
                continue
            text = fmt.format(value)
            ref = _median(base, key)
            if key in RATIO_KEYS and ref and codec != baseline:
                ratio = value / ref
                text += f" ({ratio:.2f}x)" if ratio >= 0.1 else f" ({ratio:.2g}x)"
            if spread and row[key]["min"] != row[key]["max"]:
                text += (
                    f" [{fmt.format(row[key]['min'])}-{fmt.format(row[key]['max'])}]"
                )
            cells.append(text)
        cells += [str(row["lost"]), str(row["dead_lettered"])]
        body.append(cells)
    return headers, body


def markdown(report: dict[str, Any]) -> str:
    """report.md: settings, one table per profile, charts, the environment."""
    plan, env = report["plan"], report["environment"]
    mode = (
        "maximum rate per worker process"
        if plan["max_mode"]
        else (
            f"{plan['rate']:,.0f} msg/s for {plan['duration']:.0f} s after {plan['warmup']:.0f} s warm-up"
        )
    )
    lines = [
        "# Codec A/B report", "",
        f"Mode: {mode}; {plan['partitions']} partitions; repeats: {plan['repeat']}; "
        f"baseline: `{plan['baseline']}` (ratios in parentheses are to it).", "",
        "Figures come from each worker's /metrics and /proc accounting; CPU is the worker "
        "process only. Broker, load generator and worker share this machine's "
        f"{env['cpu_count']} cores, so absolute numbers are not production numbers; the "
        "ratios between codecs are the result.", "",
    ]  # fmt: skip
    for profile, rows in report["summary"].items():
        headers, body = table(
            rows, plan["baseline"], plan["max_mode"], plan["repeat"] > 1
        )
        lines += [f"## Profile `{profile}`", "", "| " + " | ".join(headers) + " |",
                  "|" + " --- |" * len(headers)]  # fmt: skip
        lines += ["| " + " | ".join(cells) + " |" for cells in body]
        lines.append("")
    lines += ["## Charts", ""] + [f"![{title}]({name})" for name, _k, title in CHARTS]
    if len(report["summary"]) > 1:
        lines.append("![throughput vs payload size](throughput_vs_size.png)")
    libs = ", ".join(f"{k} {v}" for k, v in env["libraries"].items())
    lines += ["", "## Environment", "",
              f"- Python {env['python']} on {env['platform']}",
              f"- {env['cpu_count']} x {env['cpu_model']}",
              f"- Apache Kafka {env['kafka']}; librdkafka {env['librdkafka']}",
              f"- protobuf backend: {env['protobuf_backend']}",
              f"- {libs}", ""]  # fmt: skip
    return "\n".join(lines)


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


def charts(report: dict[str, Any], out: Path) -> list[Path]:
    """Bar charts per figure (one bar group per profile) and the size sweep."""
    plt = _pyplot()
    summary, written = report["summary"], []
    profiles = list(summary)
    codecs = _ordered(summary[profiles[0]]) if profiles else []
    for name, key, title in CHARTS:
        fig, ax = plt.subplots(figsize=(9, 4.5))
        width = 0.8 / max(len(profiles), 1)
        spread: list[float] = []
        for i, profile in enumerate(profiles):
            rows = summary[profile]
            values = [_median(rows.get(c, {}), key) or 0.0 for c in codecs]
            lows = [
                v - (rows.get(c, {}).get(key) or {"min": v})["min"]
                for c, v in zip(codecs, values, strict=True)
            ]
            highs = [
                (rows.get(c, {}).get(key) or {"max": v})["max"] - v
                for c, v in zip(codecs, values, strict=True)
            ]
            xs = [x + i * width for x in range(len(codecs))]
            bars = ax.bar(
                xs, values, width, label=profile, yerr=[lows, highs], capsize=3
            )
            ax.bar_label(bars, fmt=_label, fontsize=8, padding=2)
            spread.extend(v for v in values if v > 0)
        ax.set_xticks([x + width * (len(profiles) - 1) / 2 for x in range(len(codecs))], codecs,
                      rotation=20, ha="right")  # fmt: skip
        if spread and max(spread) > 50 * min(spread):
            ax.set_yscale("log")  # a codec that fell behind would flatten the rest
            title += " (log scale)"
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
        if len(profiles) > 1:
            ax.legend(title="profile")
        fig.tight_layout()
        written.append(_save(fig, out / name))
    if len(profiles) > 1:
        written.append(_sweep_chart(summary, codecs, out / "throughput_vs_size.png"))
    return written


def _label(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _sweep_chart(summary: dict[str, Any], codecs: list[str], path: Path) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 4.5))
    for codec in codecs:
        points = sorted(
            (_median(rows[codec], "wire_bytes") or 0, 1e6 / cpu)
            for rows in summary.values()
            if codec in rows and (cpu := _median(rows[codec], "cpu_us_per_msg"))
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
    fig.tight_layout()
    return _save(fig, path)


def _save(fig: Any, path: Path) -> Path:
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)
    return path


def write(report: dict[str, Any], out: Path) -> list[Path]:
    """Write report.json, report.md and the charts into `out`."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    try:
        paths = charts(report, out)
    except ImportError as exc:  # the tables still stand without pictures
        print(f"codec-ab: no charts: {exc}", file=sys.stderr)
        paths = []
    (out / "report.md").write_text(markdown(report))
    return [out / "report.md", out / "report.json", *paths]


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m abrunner.report DIR`: redraw report.md and charts from report.json."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m abrunner.report REPORT_DIR", file=sys.stderr)
        return 2
    out = Path(args[0])
    report = json.loads((out / "report.json").read_text())
    report["summary"] = aggregate(report["results"])
    for path in write(report, out):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
