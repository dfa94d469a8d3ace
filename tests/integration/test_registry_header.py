"""confluent-kafka 2.x's `__value_schema_id` header form and GUID frames through the
worker, against a real broker and the session's real registry (Apicurio 3.0.9).

Apicurio 3.0.9 hands out no schema GUIDs, so confluent-kafka's stock
`header_schema_id_serializer` (which writes magic 1 + the GUID) cannot write
against it; the header's id form (magic 0 + id, which its
`dual_schema_id_deserializer` reads too) can, and decodes in the worker to equal
values. A GUID (framed, or in the header) is dead-lettered `guid_unsupported`:
Apicurio does not serve `/schemas/guids/{guid}`.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import (
    SchemaRegistryClient,
    header_schema_id_serializer,
)
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import (
    MessageField,
    SerializationContext,
    SerializationError,
)

from codec import get_codec
from codec.registry.frame import SCHEMA_ID_HEADER
from loadgen.payloads import make_payloads
from tests.fixtures.handlers.registry_values import SENT
from tests.support import Record, WorkerProcess, consume_all, produce

HANDLER = "tests.fixtures.handlers.registry_values:equals_sent"


def _id_in_header(payload: bytes, ctx: Any, schema_id: Any) -> bytes:
    """The header form with the id (Apicurio has no GUID to put there)."""
    ctx.headers.append((SCHEMA_ID_HEADER, schema_id.id_to_bytes()))
    return payload


def test_header_form_and_guids_in_the_worker(
    kafka_bootstrap: str, registry_url: str, topic_factory: Any, tmp_path: Path
) -> None:
    topic, dlq = topic_factory(2), topic_factory(1, prefix="dlq")
    plain = get_codec("avro", "medium")
    schema = json.dumps(plain.schema)  # type: ignore[attr-defined]
    payloads = make_payloads("medium", 40, seed=32)
    assert [p["event_id"] for p in payloads] == list(SENT)
    with SchemaRegistryClient({"url": registry_url}) as sr:
        stock = AvroSerializer(
            sr, schema, conf={"schema.id.serializer": header_schema_id_serializer}
        )
        record = plain.to_builtins(plain.from_builtins(payloads[0]))
        ctx = SerializationContext(topic, MessageField.VALUE, [])
        with pytest.raises(SerializationError, match="GUID"):
            stock(record, ctx)  # Apicurio 3.0.9 returns no GUID to write
        ser = AvroSerializer(sr, schema, conf={"schema.id.serializer": _id_in_header})
        records: list[Record] = []
        for seq, payload in enumerate(payloads):
            headers: list[tuple[str, Any]] = [("x-seq", str(seq).encode())]
            ctx = SerializationContext(topic, MessageField.VALUE, headers)
            value = ser(plain.to_builtins(plain.from_builtins(payload)), ctx)
            records.append(
                {"key": str(seq).encode(), "value": value, "headers": headers}
            )
    body = records[0]["value"]
    guid = uuid.uuid4().bytes
    poison = {
        b"p-guid-frame": (b"\x01" + guid + body, []),
        b"p-guid-header": (body, [(SCHEMA_ID_HEADER, b"\x01" + guid)]),
    }
    batch = records[:20]
    for key, (value, headers) in poison.items():
        batch.append({"key": key, "value": value, "headers": headers})
    batch += records[20:]
    produce(kafka_bootstrap, topic, batch)
    args = ["--codec", "avro", "--framing", "confluent", "--registry-url", registry_url]
    args += ["--dlq-topic", dlq, "--logic", HANDLER, "--max-attempts", "1"]
    with WorkerProcess(kafka_bootstrap, topic, *args, log=tmp_path / "w.log") as w:
        assert w.wait_for(len(records)) == len(records)
        w.wait_for(len(poison), outcome="decode_error")
        dead = consume_all(kafka_bootstrap, dlq, len(poison))
        time.sleep(0.5)
        assert w.messages("ok") == len(records)  # each equal to what was sent
        assert w.messages("logic_error") == 0
        assert w.stop() == 0
    assert sorted(m.key() for m in dead) == sorted(poison)
    for m in dead:
        letter = dict(m.headers())
        assert m.value() == poison[m.key()][0]  # the original bytes
        assert letter["x-dlq-reason"] == b"guid_unsupported"
        assert guid.hex().encode() in letter["x-dlq-exception-message"]
        assert b"/schemas/guids/" in letter["x-dlq-exception-message"]
