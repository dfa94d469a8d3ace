"""A team's own traffic, end to end: a pydantic service's JSON (lax values included)
published, recorded with `codec-loadgen record`, replayed through `codec-ab --replay`.

The answer a team needs before a switch: nothing lost, its own model dead-letters
nothing, msgspec-json dead-letters exactly the messages only a lax model accepts (and
says which field), and the JSON cases read the recorded bytes, not a re-encoding.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
import uuid
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest
from confluent_kafka import Producer

from abrunner.cli import main
from abrunner.report.tables import read
from loadgen.recording import read_recording
from tests.fixtures.usermodels.payments import (
    CardDetails,
    LineItem,
    Money,
    PaymentEvent,
    PaymentMethod,
    PaymentStatus,
)
from tests.support import consume_all

TopicFactory = Callable[..., str]
SCHEMA = "tests.fixtures.usermodels.payments:PaymentEvent"
COUNT = 40
USER_ID_STR = {3, 11, 19, 27}
"""Messages whose `userId` a lax model reads from a string ("123")."""
RETRIES_FLOAT = {7, 23, 35}
"""Messages whose `retries` is written 2.0."""
UNKNOWN_FIELD = {5, 30}
"""Messages with a field the model does not declare (pydantic ignores it)."""
LAX = USER_ID_STR | RETRIES_FLOAT


def _event(i: int) -> bytes:
    """Message `i` as the service publishes it: model_dump(mode="json", by_alias=True)."""
    event = PaymentEvent(
        payment_id=uuid.UUID(int=i + 1),
        user_id=1000 + i,
        merchant_id=f"m-{i % 7}",
        status=list(PaymentStatus)[i % 4],
        method=list(PaymentMethod)[i % 3],
        amount=Money(amount=Decimal(f"{10 + i}.{i % 100:02d}"), currency="EUR"),
        fee=Money(amount=Decimal("0.25"), currency="EUR") if i % 2 else None,
        card=CardDetails(
            brand="visa", last4="4242", expiry_month=1 + i % 12, expiry_year=2030
        )
        if i % 3 == 0
        else None,
        items=[
            LineItem(
                sku=f"SKU-{i}-{j}",
                quantity=1 + j,
                unit_price=Money(amount=Decimal("4.99"), currency="EUR"),
            )
            for j in range(i % 3)
        ],
        metadata={"channel": "web", "n": str(i)},
        created_at=datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
        + datetime.timedelta(seconds=i),
        retries=i % 3,
        risk_score=(i % 10) / 10,
    )
    data = event.model_dump(mode="json", by_alias=True)
    if i in USER_ID_STR:
        data["userId"] = str(data["userId"])
    if i in RETRIES_FLOAT:
        data["retries"] = 2.0
    if i in UNKNOWN_FIELD:
        data["legacyRef"] = f"old-{i}"
    return json.dumps(data).encode()


def _publish(bootstrap: str, topic: str) -> list[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap})
    values = [_event(i) for i in range(COUNT)]
    for i, value in enumerate(values):
        headers: list[tuple[str, str | bytes | None]] = [
            ("content-type", b"application/json"),
            ("traceparent", b"00-%02d" % i),
        ]
        producer.produce(topic, value, key=b"%d" % i, partition=0, headers=headers)
    assert producer.flush(30) == 0
    return values


def test_a_teams_recorded_traffic_through_codec_ab(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    source = topic_factory(partitions=1)
    published = _publish(kafka_bootstrap, source)
    recording = tmp_path / "payments.rec"
    subprocess.run(
        [
            *(sys.executable, "-m", "loadgen", "record"),
            *("--bootstrap-servers", kafka_bootstrap, "--topic", source),
            *("--out", str(recording), "--timeout", "2"),
        ],
        check=True,
        timeout=60,
    )
    _, records = read_recording(recording)
    assert [r.value for r in records] == published

    # A JSON case replays the recorded bytes and headers, stamps aside.
    replayed = topic_factory(partitions=1)
    subprocess.run(
        [
            *(sys.executable, "-m", "loadgen", "--replay", str(recording)),
            *("--bootstrap-servers", kafka_bootstrap, "--topic", replayed),
            *("--schema", SCHEMA, "--transcode", "msgspec-json", "--rate", "500"),
            *("--count", str(COUNT), "--json"),
        ],
        check=True,
        timeout=60,
        stdout=subprocess.DEVNULL,
    )
    got = sorted(consume_all(kafka_bootstrap, replayed, COUNT), key=lambda m: m.key())
    want = sorted(records, key=lambda r: r.key or b"")
    assert [m.value() for m in got] == [r.value for r in want]
    for m, r in zip(got, want, strict=True):
        headers = dict(m.headers())
        assert headers["traceparent"] == dict(r.headers)["traceparent"]
        assert headers["content-type"] == b"application/json"

    out = tmp_path / "ab"
    code = main(
        [
            *("--bootstrap-servers", kafka_bootstrap, "--schema", SCHEMA),
            *(
                "--replay",
                str(recording),
                "--codecs",
                "json+pydantic,msgspec-json,protobuf",
            ),
            *("--baseline", "json+pydantic", "--rate", "200", "--duration", "3"),
            *("--warmup", "1", "--partitions", "1", "--out", str(out), "--no-bench"),
        ]
    )
    report = read(out / "report.json")
    assert code == 0, report.results
    by_codec = {r.codec: r for r in report.results}
    for case in by_codec.values():
        assert case.error is None, case.error
        assert case.lost == 0 and case.seq_missing == 0, case
        assert case.not_carried == {}
        assert case.recorded == COUNT
    assert by_codec["json+pydantic"].replayed_as_recorded == COUNT
    assert by_codec["msgspec-json"].replayed_as_recorded == COUNT
    assert by_codec["protobuf"].replayed_as_recorded == 0  # transcoded, all of them

    pydantic = by_codec["json+pydantic"]
    assert pydantic.dead_lettered == 0 and pydantic.rejected_count == 0
    msgspec = by_codec["msgspec-json"]
    acked = msgspec.acked or 0
    # Seq k of the measured run replays record k mod COUNT (the recording in order).
    lax_sent = sum(1 for k in range(acked) if k % COUNT in LAX)
    ids = sum(1 for k in range(acked) if k % COUNT in USER_ID_STR)
    assert msgspec.rejected_count == lax_sent > 0
    assert msgspec.rejected == {
        "userId: Expected `int`, got `str`": ids,
        "retries: Expected `int`, got `float`": lax_sent - ids,
    }
    # The DLQ figure counts the messages `processed` counts: the measured run, the
    # warm-up's dead letters apart (it replays the recording too, lax ones included).
    assert msgspec.processed == acked
    assert msgspec.dead_lettered == msgspec.rejected_count
    assert (msgspec.warmup_dead_lettered or 0) > 0
    assert pydantic.warmup_dead_lettered == 0
    summary = report.summary[SCHEMA]
    assert summary["msgspec-json"].dead_lettered == lax_sent
    # The wire size is the bytes replayed: the same for both JSON cases, which sent
    # the same recorded bytes, whatever msgspec-json dead-lettered.
    sent = msgspec.sent or 0
    bytes_sent = sum(len(published[k % COUNT]) for k in range(sent)) / sent
    assert msgspec.wire_bytes == pytest.approx(bytes_sent, abs=0.05)
    assert pydantic.wire_bytes == msgspec.wire_bytes
    md = (out / "report.md").read_text()
    answer, full = md.split("## Full figures", 1)
    row = next(line for line in full.splitlines() if line.startswith("| msgspec-json"))
    assert row.endswith(f"| 0 | {lax_sent} |")  # lost, DLQ
    short = next(x for x in answer.splitlines() if x.startswith("| msgspec-json"))
    assert short.endswith(f"| {lax_sent} | 0 |")  # rejected, lost
    assert f"it REJECTED {lax_sent:,} messages of this traffic" in answer
    share = round(100 * lax_sent / acked)
    assert f"- `msgspec-json` would reject {share} % of your traffic" in md
    assert f"userId: Expected `int`, got `str` in {ids:,} messages" in md
    assert f"- `json+pydantic` dead-lettered none of {pydantic.acked:,} messages." in md
