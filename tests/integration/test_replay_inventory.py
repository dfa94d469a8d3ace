"""Issue 29's "Done when" on a model written as another team writes it: the inventory
envelope (`tests/fixtures/usermodels/inventory.py`: a discriminated union, validators,
every type of the catalogue), its recorded traffic replayed with lax values and naive
datetimes, and the shadow decode of the same messages.

2,000 messages, 300 with `recordedAt` written without an offset (a plain `datetime`)
and `scannerClock` set (a `NaiveDatetime`), 200 with `weightKg` written as a string
("12.5"), which only a lax model reads: json+pydantic dead-letters none, msgspec-json
exactly the lax ones, msgspec-msgpack (transcoded from the team's lax decode) none and
counts nothing as not carried (msgspec holds a naive datetime as it is); every format
that stores instants cannot carry the model at all today (its union is not mapped
yet), so naming one is exit 2 with the reasons; the shadow decode of msgspec-json and
msgspec-msgpack beside json+pydantic agrees with the replay record for record.

Opt-in (about a minute): `make acceptance` (CODEC_AB_ACCEPTANCE=1); `make test` skips it.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer

from abrunner.cli import main
from abrunner.lab import worker_probe
from abrunner.report.tables import read
from loadgen.recording import read_recording
from localkafka import delete_topic
from tests.support import WorkerProcess

pytestmark = pytest.mark.skipif(
    os.environ.get("CODEC_AB_ACCEPTANCE") != "1",
    reason="opt-in, about a minute: make acceptance (CODEC_AB_ACCEPTANCE=1)",
)

TopicFactory = Callable[..., str]
SCHEMA = "tests.fixtures.usermodels.inventory:InventoryEvent"
COUNT = 2000
NAIVE = {i for i in range(COUNT) if i % 20 in (0, 7, 13)}
LAX = {i for i in range(COUNT) if i % 10 == 5}
OUTCOMES = ("agree", "differ", "shadow_rejected", "primary_rejected")
INSTANTS = ("protobuf", "flatbuffers", "capnp", "avro")


def _payload(i: int) -> dict[str, object]:
    kind = ("received", "adjusted", "reserved", "count_taken")[i % 4]
    if kind == "received":
        return {
            "kind": kind,
            "sku": f"SKU-{i:05d}",
            "quantity": 1 + i % 40,
            "unitCost": f"{i % 97}.{i % 10000:04d}",
            "expiresOn": "2027-03-01",
        }
    if kind == "adjusted":
        return {
            "kind": kind,
            "sku": f"SKU-{i:05d}",
            "delta": (i % 11) - 5,
            "reason": ("damaged", "found", "theft")[i % 3],
            "note": f"bin {i % 9}",
        }
    if kind == "reserved":
        return {
            "kind": kind,
            "orderId": str(uuid.UUID(int=i)),
            "lines": {str(j + 1): 1 + j for j in range(i % 3 + 1)},
            "holdFor": f"PT{1 + i % 48}H",
        }
    return {
        "kind": kind,
        "binPosition": [i % 12, i % 5, i % 3],
        "counted": i % 300,
        "variancePct": round((i % 200) / 10 - 10, 1),
    }


def _event(i: int) -> bytes:
    at = f"2026-01-01T{i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}.{i % 1000:03d}"
    body: dict[str, object] = {
        "eventId": str(uuid.UUID(int=10**6 + i)),
        "schemaVersion": 1 + i % 2,
        "channel": ("web", "store", "edi")[i % 3],
        "priority": 1 + i % 3,
        "zone": ("ambient", "chilled")[i % 2],
        "occurredAt": at + "Z",
        "recordedAt": at if i in NAIVE else at + "+01:00",
        "businessDay": "2026-01-01",
        "shiftStart": "06:00:00",
        "stockValue": f"{i * 13 % 100000}.25",
        "weightKg": f"{i % 500}.5" if i in LAX else i % 500 + 0.5,
        "dimsCm": [10.5, 20.0, 30.25],
        "readings": [i % 7, i % 5],
        "tags": sorted({f"t{i % 4}", f"t{i % 6}"}),
        "zonesSeen": ["a", "b"][: i % 3],
        "scannerIp": f"10.0.{i % 256}.{i % 200 + 1}",
        "siteNetwork": "10.0.0.0/16",
        "callbackUrl": f"https://wms.example.com/cb/{i}",
        "signature": base64.b64encode(b"sig-%d" % i).decode(),
        "dailyCounts": {"2026-01-01": i % 50},
        "byPriority": {"1": i % 3},
        "payload": _payload(i),
    }
    if i in NAIVE:
        body["scannerClock"] = at
    if i % 5 == 0:
        body["supplier"] = {"code": f"S{i % 9}", "contact": {"name": "Ana"}}
    return json.dumps(body).encode()


def _publish(bootstrap: str, topic: str) -> list[bytes]:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    values = [_event(i) for i in range(COUNT)]
    for i, value in enumerate(values):
        producer.produce(
            topic,
            value,
            key=b"%d" % i,
            partition=0,
            headers=[("content-type", b"application/json")],
        )
        producer.poll(0)
    assert producer.flush(30) == 0
    return values


def _shadow(w: WorkerProcess, shadow: str) -> dict[str, float]:
    pair = {"codec": "json+pydantic", "shadow": shadow}
    deadline = time.monotonic() + 90
    found: dict[str, float] = {}
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):  # /metrics not answering yet
            scraped = worker_probe.scrape(w.port, timeout=2)
            found = {
                o: scraped.total("worker_shadow_total", **pair, outcome=o)
                for o in OUTCOMES
            }
            if sum(found.values()) >= COUNT:
                break
        time.sleep(0.3)
    return found


def test_inventory_replay_and_shadow_agree(
    kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
) -> None:
    source = topic_factory(partitions=1)
    published = _publish(kafka_bootstrap, source)
    recording = tmp_path / "inventory.rec"
    subprocess.run(
        [
            *(sys.executable, "-m", "loadgen", "record"),
            *("--bootstrap-servers", kafka_bootstrap, "--topic", source),
            *("--out", str(recording), "--timeout", "2"),
        ],
        check=True,
        timeout=120,
    )
    _, records = read_recording(recording)
    assert [r.value for r in records] == published

    base = [
        *("--bootstrap-servers", kafka_bootstrap, "--schema", SCHEMA),
        *("--replay", str(recording)),
    ]
    for fmt in INSTANTS:  # named, a format that cannot carry the model is exit 2
        assert main([*base, "--codecs", f"json+pydantic,{fmt}"]) == 2

    out = tmp_path / "ab"
    codecs = ("json+pydantic", "msgspec-json", "msgspec-msgpack")
    code = main(
        [
            *base,
            "--codecs",
            ",".join(codecs),
            "--baseline",
            "json+pydantic",
            *("--rate", "300", "--duration", "3", "--warmup", "1", "--partitions", "1"),
            *("--out", str(out), "--no-bench"),
        ]
    )
    report = read(out / "report.json")
    assert code == 0, report.results
    by_codec = {r.codec: r for r in report.results}
    assert set(by_codec) == set(codecs)
    for case in by_codec.values():
        assert case.error is None, case.error
        assert case.lost == 0 and case.seq_missing == 0, case
        assert case.recorded == COUNT
        assert case.not_carried == {}, case.codec
    pydantic = by_codec["json+pydantic"]
    assert pydantic.dead_lettered == 0 and pydantic.rejected_count == 0
    msgspec = by_codec["msgspec-json"]
    lax_sent = sum(1 for k in range(msgspec.acked or 0) if k % COUNT in LAX)
    assert lax_sent > 0
    assert msgspec.rejected == {"weightKg: Expected `float`, got `str`": lax_sent}
    assert msgspec.dead_lettered == lax_sent
    msgpack = by_codec["msgspec-msgpack"]
    assert msgpack.dead_lettered == 0 and msgpack.rejected_count == 0

    seen: dict[str, dict[str, float]] = {}
    try:
        for shadow in ("msgspec-json", "msgspec-msgpack"):
            args = (
                *("--codec", "json+pydantic", "--schema", SCHEMA, "--logic", "noop"),
                *("--shadow-codec", shadow, "--shadow-sample-every", "1"),
                "--create-topics",
            )
            log = tmp_path / f"worker-{shadow}.log"
            with WorkerProcess(kafka_bootstrap, source, *args, log=log) as w:
                assert w.wait_for(COUNT, timeout=120) == COUNT
                seen[shadow] = _shadow(w, shadow)
                assert w.stop() == 0
    finally:
        for extra in (f"{source}.dlq", f"{source}.shadow"):
            with contextlib.suppress(KafkaException, TimeoutError):
                delete_topic(kafka_bootstrap, extra, timeout=15)
    # The replay's verdicts, record for record: msgspec-json rejects the lax ones
    # (dead-lettered above), msgspec-msgpack carries every record.
    assert seen["msgspec-json"] == {
        "agree": COUNT - len(LAX),
        "differ": 0,
        "shadow_rejected": len(LAX),
        "primary_rejected": 0,
    }
    assert seen["msgspec-msgpack"] == {
        "agree": COUNT,
        "differ": 0,
        "shadow_rejected": 0,
        "primary_rejected": 0,
    }
