"""Reading a case's topics back ends as soon as the data does.

librdkafka's `consume(n, timeout)` returns when it has `n` messages or when `timeout`
has passed: a read of a topic's last messages always waits its whole timeout. The
fake consumer here keeps that rule on a clock of its own; nothing is timed.
"""

from __future__ import annotations

import pytest

from abrunner.lab import loss_check
from service.kafka import headers
from tests.fakes import FakeMessage, WaitingConsumer

RUN = "run-1"


def _messages(count: int, *, dlq: bool = False) -> list[FakeMessage]:
    out = []
    for seq in range(count):
        found: list[tuple[str, bytes | None]] = [
            (headers.RUN_ID, RUN.encode()),
            (headers.SEQ, str(seq).encode()),
        ]
        if dlq:
            found += [("x-dlq-reason", b"decode"), ("x-dlq-exception-message", b"bad")]
        out.append(FakeMessage(b"v", seq % 2, seq // 2, _headers=found))
    return out


@pytest.fixture
def consumer(monkeypatch: pytest.MonkeyPatch) -> WaitingConsumer:
    found = WaitingConsumer(_messages(50))
    monkeypatch.setattr(loss_check, "Consumer", found)
    return found


def test_reading_a_topic_back_waits_no_second_at_its_end(
    consumer: WaitingConsumer,
) -> None:
    assert loss_check.missing_seqs("127.0.0.1:9", "t", RUN, 50) == 0
    assert consumer.waited <= loss_check.READ_WAIT_S


def test_a_missing_seq_is_counted(consumer: WaitingConsumer) -> None:
    assert loss_check.missing_seqs("127.0.0.1:9", "t", RUN, 52) == 2


def test_reading_dead_letters_back_waits_no_second_at_their_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    dlq = WaitingConsumer(_messages(7, dlq=True))
    monkeypatch.setattr(loss_check, "Consumer", dlq)
    assert sum(loss_check.dead_letters("127.0.0.1:9", "t.dlq", RUN).values()) == 7
    assert dlq.waited <= loss_check.READ_WAIT_S
