"""A dead letter the topic refuses for what it is never stops a partition: written
without its value, cut to its essentials, spooled at last; and never twice."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError

from service.delivery.letter_ladder import KEPT_HEADER_BYTES, SMALL_BYTES, Spool
from tests.unit.test_consumer import Rig

TOO_LARGE = KafkaError(KafkaError.MSG_SIZE_TOO_LARGE)
TOPIC_LIMIT = 1_000_000
MANY: list[tuple[str, bytes | None]] = [(f"h{i:04d}", b"v" * 1000) for i in range(1100)]
"""1,100 headers of 1 KB: alone over a 1,000,000-byte topic limit."""


def _size(record: dict[str, Any]) -> int:
    headers = record["headers"] or []
    return (
        len(record["value"] or b"")
        + len(record["key"] or b"")
        + sum(len(k) + len(v or b"") for k, v in headers)
    )


def _over_limit(record: dict[str, Any]) -> KafkaError | None:
    """The broker's answer for a topic whose `max.message.bytes` is 1,000,000."""
    return TOO_LARGE if _size(record) > TOPIC_LIMIT else None


def _second_times_out_once(
    then: Callable[[dict[str, Any]], KafkaError | None] = lambda _record: None,
) -> Callable[[dict[str, Any]], KafkaError | None]:
    """A `fail_with` for which the letter keyed `2` times out once; the rest
    `then`."""
    timeouts = [KafkaError(KafkaError._MSG_TIMED_OUT)]

    def fail(record: dict[str, Any]) -> KafkaError | None:
        if record["key"] == b"2" and timeouts:
            return timeouts.pop()
        return then(record)

    return fail


def _spool_to(rig: Rig, path: Path) -> None:
    dead_letters = rig.loop._poison._dead_letters
    assert dead_letters is not None
    dead_letters[0]._spool = Spool(path)


def _rig(tmp_path: Path, **kwargs: Any) -> tuple[Rig, Path]:
    rig = Rig(**kwargs)
    spool = tmp_path / "letters.spool"
    _spool_to(rig, spool)
    return rig, spool


class TestEssentials:
    """Headers alone over the topic's limit: the letter is cut, the partition goes on."""

    def test_headers_alone_too_large(self, tmp_path: Path) -> None:
        rig, spool = _rig(tmp_path, fail_with=_over_limit)
        poison = rig.msg(1, value=b"\xc1 not msgpack", headers=MANY)
        rig.process([rig.msg(0), poison, rig.msg(2)])
        [letter] = rig.producer.acked
        headers = dict(letter["headers"])
        assert letter["value"] is None
        assert letter["key"] == b"1"
        assert _size(letter) < KEPT_HEADER_BYTES + 2048
        assert headers["x-dlq-headers-dropped"] == b"1100"
        assert headers["x-dlq-headers-dropped-bytes"] == str(1100 * 1005).encode()
        digest = hashlib.sha256()
        for name, value in MANY:
            for part in (name.encode(), value or b""):
                digest.update(len(part).to_bytes(8, "big") + part)
        assert headers["x-dlq-headers-sha256"] == digest.hexdigest().encode()
        assert headers["x-dlq-value-sha256"] == (
            hashlib.sha256(b"\xc1 not msgpack").hexdigest().encode()
        )
        assert headers["x-dlq-reason"] == b"decode"
        assert headers["x-dlq-offset"] == b"1"
        assert rig.consumer.stored == [[("in", 0, 3)]]
        assert rig.loop.hold.reason is None
        assert rig.sample("worker_dead_letters_cut_total") == 1
        assert not spool.exists()
        # written once: as it was, without its value, cut (three attempts, one ack)
        assert len(rig.producer.produced) == 3

    def test_small_original_headers_and_key_are_kept(self, tmp_path: Path) -> None:
        rig, _ = _rig(tmp_path, fail_with=_over_limit)
        headers: list[tuple[str, bytes | None]] = [
            ("x-seq", b"7"),
            ("content-type", b"application/x"),
            *MANY,
        ]
        rig.process([rig.msg(7, value=b"\xc1", headers=headers)])
        kept = dict(rig.producer.acked[0]["headers"])
        assert (kept["x-seq"], kept["content-type"]) == (b"7", b"application/x")
        assert all(len(k) + len(v) <= SMALL_BYTES for k, v in kept.items())

    def test_a_refused_timestamp_is_dropped(self, tmp_path: Path) -> None:
        invalid = KafkaError(KafkaError.INVALID_TIMESTAMP)
        rig, _ = _rig(tmp_path, fail_with=lambda r: invalid if r["timestamp"] else None)
        rig.process([rig.msg(0, value=b"\xc1")])
        [letter] = rig.producer.acked
        assert letter["timestamp"] == 0  # the producer's own time
        assert letter["value"] == b"\xc1"  # nothing else was dropped
        assert dict(letter["headers"])["x-dlq-timestamp"] == b"1700000000000"


class TestSpool:
    """Refused even cut: the letter goes to the local spool, counted; the partition goes on."""

    def test_spooled(self, tmp_path: Path) -> None:
        rig, spool = _rig(tmp_path, fail_with=lambda r: TOO_LARGE)
        rig.process([rig.msg(0), rig.msg(1, value=b"\xc1 bad")])
        assert rig.producer.acked == []
        [line] = [json.loads(x) for x in spool.read_text().splitlines()]
        assert line["refused"] == "MSG_SIZE_TOO_LARGE"
        assert base64.b64decode(line["value_b64"]) == b"\xc1 bad"
        assert line["dlq_headers"]["offset"] == "1"
        assert line["dlq_headers"]["reason"] == "decode"
        assert rig.consumer.stored == [[("in", 0, 2)]]
        assert rig.sample("worker_dead_letters_spooled_total") == 1
        assert rig.loop.hold.reason is None

    def test_an_unwritable_spool_holds_the_partition(self, tmp_path: Path) -> None:
        rig = Rig(fail_with=lambda r: TOO_LARGE)
        (tmp_path / "file").write_text("")
        _spool_to(rig, tmp_path / "file" / "s")
        rig.process([rig.msg(0, value=b"\xc1")])
        assert rig.consumer.stored == []
        assert "spool" in (rig.loop.hold.reason or "")

    def test_a_topic_that_is_down_is_not_the_letters_fault(
        self, tmp_path: Path
    ) -> None:
        down = KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)
        rig, spool = _rig(tmp_path, fail_with=lambda r: down)
        rig.process([rig.msg(0, value=b"\xc1")])
        assert rig.consumer.stored == []
        assert rig.loop.hold.reason is not None
        assert not spool.exists()
        assert len(rig.producer.produced) == 1


class TestOnce:
    """A batch rewound after its writes partly failed does not write its letters again."""

    def test_acked_letters_are_not_written_again(self) -> None:
        rig = Rig(fail_with=_second_times_out_once())
        batch = [rig.msg(1, value=b"\xc1"), rig.msg(2, value=b"\xc1")]
        rig.process(batch)
        assert rig.consumer.stored == []  # the batch was rewound
        rig.loop.hold._retry_at = 0.0
        rig.loop.hold.due()
        rig.process(batch)
        keys = [r["key"] for r in rig.producer.acked]
        assert sorted(keys) == [b"1", b"2"]
        assert rig.consumer.stored == [[("in", 0, 3)]]


class TestOutputRefused:
    """A result the output topic refuses for what it is dead-letters its message."""

    def test_too_large_for_the_output_topic(self) -> None:
        rig = Rig(
            output=True,
            refuse_with=lambda r: TOO_LARGE if r["topic"] == "out" else None,
        )
        rig.process([rig.msg(0), rig.msg(1)])
        letters = [r for r in rig.producer.acked if r["topic"] == "in.dlq"]
        assert [dict(r["headers"])["x-dlq-reason"] for r in letters] == [b"encode"] * 2
        headers = dict(letters[0]["headers"])
        assert headers["x-dlq-stage"] == b"encode"
        assert b"MSG_SIZE_TOO_LARGE" in headers["x-dlq-exception-message"]
        assert rig.consumer.stored == [[("in", 0, 2)]]
        assert rig.loop.hold.reason is None

    def test_refused_by_the_broker_after_the_batch(self) -> None:
        rig = Rig(
            output=True, fail_with=lambda r: TOO_LARGE if r["topic"] == "out" else None
        )
        rig.process([rig.msg(0), rig.msg(1)])
        letters = [r for r in rig.producer.acked if r["topic"] == "in.dlq"]
        assert [dict(r["headers"])["x-dlq-offset"] for r in letters] == [b"0", b"1"]
        assert (
            b"refused its result"
            in dict(letters[0]["headers"])["x-dlq-exception-message"]
        )
        assert rig.consumer.stored == [[("in", 0, 2)]]
        assert rig.loop.hold.reason is None
        assert (
            rig.sample(
                "worker_dead_letters_total", codec="msgspec-msgpack", reason="encode"
            )
            == 2
        )


class TestRetriedBatch:
    """Read again after its transaction aborted, a letter starts where its ladder got."""

    def test_the_ladder_is_not_climbed_again(self) -> None:
        rig = Rig(fail_with=_second_times_out_once(then=_over_limit))
        rig.loop._poison._exactly_once = True  # no memory of acknowledged letters
        batch = [rig.msg(1, value=b"\xc1", headers=MANY), rig.msg(2, value=b"\xc1")]
        rig.process(batch)
        assert rig.consumer.stored == []  # rewound: read again
        rig.loop.hold._retry_at = 0.0
        rig.loop.hold.due()
        rig.process(batch)
        tries = [r for r in rig.producer.produced if r["key"] == b"1"]
        # first batch: as it is, then without its value (the batch fails meanwhile);
        # read again: without its value at once, then cut
        assert [r["value"] is None for r in tries] == [False, True, True, True]
        assert [len(r["headers"]) > 1000 for r in tries] == [True, True, True, False]
        assert rig.consumer.stored == [[("in", 0, 3)]]
