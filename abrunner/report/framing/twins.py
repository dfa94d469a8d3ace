"""Each framed case beside its unframed twin, and beside confluent-kafka's
deserializer: the report's "Framed beside unframed" section.

Two tables per profile. On Kafka: the twins' CPU per message, the worker's decode
(p50 of its sampled decodes), p99 latency and lost messages, unframed then framed,
and the framed case's CPU over its twin's. In process (`Report.peers`, taken after
the cases on a sample of the run's own framed messages): the unframed codec, the
framed codec and confluent-kafka's deserializer decoding the same messages, and
the deserializer's cost over the framed codec's.
"""

from __future__ import annotations

from abrunner.peer_figures import PeerDecode
from abrunner.plan import FRAMED
from abrunner.results import Report, Row

_KAFKA_HEADERS = [
    "codec",
    "CPU us/msg unframed",
    "CPU us/msg framed",
    "framed / unframed",
    "decode us unframed",
    "decode us framed",
    "p99 ms unframed",
    "p99 ms framed",
    "lost unframed",
    "lost framed",
]
_PEER_HEADERS = [
    "codec",
    "messages",
    "unframed decode us/msg",
    "framed decode us/msg",
    "confluent-kafka deserializer us/msg",
    "deserializer / framed",
]


def section(report: Report) -> str | None:
    """The section's Markdown, or None when no case was framed."""
    framed = [c for c in report.plan.codecs if c.endswith(FRAMED)]
    if not framed:
        return None
    lines = [
        "## Framed beside unframed (Schema Registry)",
        "",
        "Each codec ran twice in this run: unframed, and framed (`<codec>+confluent`: "
        "values in the Confluent frame, the schema in the registry at "
        f"`{report.plan.registry_url}`, the worker reading the frame and its "
        "cached decoder per schema id).",
        "",
    ]
    for profile, rows in report.summary.items():
        body = [_kafka_row(c, rows) for c in framed if c in rows or _twin(c) in rows]
        if body:
            lines += [f"### {report.plan.heading(profile)}: on Kafka", ""]
            lines += [*_table(_KAFKA_HEADERS, body), ""]
        peers = [p for p in report.peers if p.profile == profile]
        if peers:
            size = max(p.messages for p in peers)
            lines += [
                f"### {report.plan.heading(profile)}: in process, the same "
                f"{size} framed messages",
                "",
                "In-process decode, CPU us/msg (best of 5 passes, one process, "
                "after the Kafka cases), on the first messages of the load "
                "generator's pool framed as the cases framed them: the unframed "
                "codec on the same values unframed, the framed codec (the "
                "worker's call), and confluent-kafka's deserializer (the path "
                "Quix Streams and Bytewax take with a registry; its Avro and "
                "JSON deserializers return dicts, its JSON one validates each "
                "value against the JSON Schema).",
                "",
            ]
            lines += [*_table(_PEER_HEADERS, [_peer_row(p) for p in peers]), ""]
            lines += [f"- {p.codec}: not measured: {p.error}" for p in peers if p.error]
    return "\n".join(lines).rstrip() + "\n"


def _twin(codec: str) -> str:
    return codec.removesuffix(FRAMED)


def _kafka_row(codec: str, rows: dict[str, Row]) -> list[str]:
    plain, framed = rows.get(_twin(codec)), rows.get(codec)
    cpu = _median(plain, "cpu_us_per_msg"), _median(framed, "cpu_us_per_msg")
    return [
        _twin(codec),
        _num(cpu[0], ".2f"),
        _num(cpu[1], ".2f"),
        _ratio(cpu[1], cpu[0]),
        _num(_median(plain, "decode_p50_us"), ".2f"),
        _num(_median(framed, "decode_p50_us"), ".2f"),
        _num(_median(plain, "e2e_p99_ms"), ".1f"),
        _num(_median(framed, "e2e_p99_ms"), ".1f"),
        "-" if plain is None else f"{plain.lost:,}",
        "-" if framed is None else f"{framed.lost:,}",
    ]


def _peer_row(p: PeerDecode) -> list[str]:
    if p.error is not None:
        return [_twin(p.codec), "0", "-", "-", "-", "-"]
    return [
        _twin(p.codec),
        f"{p.messages:,}",
        f"{p.unframed_us:.2f}",
        f"{p.framed_us:.2f}",
        f"{p.peer_us:.2f} ({p.peer})",
        _ratio(p.peer_us, p.framed_us),
    ]


def _median(row: Row | None, key: str) -> float | None:
    return None if row is None else row.median(key)


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def _ratio(top: float | None, bottom: float | None) -> str:
    if top is None or not bottom:
        return "-"
    return f"{top / bottom:.2f}x"


def _table(headers: list[str], body: list[list[str]]) -> list[str]:
    rows = [headers, ["---"] * len(headers), *body]
    return ["| " + " | ".join(cells) + " |" for cells in rows]
