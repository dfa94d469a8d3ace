"""The fault suite reads a run's topics back and ends as soon as the data does.

librdkafka's `consume(n, timeout)` returns when it has `n` messages or when `timeout`
has passed: a read of a topic's last messages always waits its whole timeout. The
fake consumer (`tests.fakes.WaitingConsumer`) keeps that rule on a clock of its own;
nothing is timed.
"""

from __future__ import annotations

import pytest

from service.kafka.headers import SEQ
from tests.fakes import FakeMessage, WaitingConsumer
from tests.faults import observe, scenarios_exactly_once


def _messages(count: int) -> list[FakeMessage]:
    return [
        FakeMessage(b"v", seq % 2, seq // 2, _headers=[(SEQ, str(seq).encode())])
        for seq in range(count)
    ]


@pytest.mark.parametrize("committed", [True, False])
def test_an_exactly_once_read_back_waits_no_longer_at_its_end(
    monkeypatch: pytest.MonkeyPatch, committed: bool
) -> None:
    consumer = WaitingConsumer(_messages(30))
    monkeypatch.setattr(scenarios_exactly_once, "Consumer", consumer)
    read = scenarios_exactly_once.read_all("127.0.0.1:9", "t", committed=committed)
    assert sorted(w.seq for w in read if w.seq is not None) == list(range(30))
    assert consumer.waited <= observe.READ_WAIT_S


def test_a_read_to_the_end_waits_no_longer_at_its_end(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    consumer = WaitingConsumer(_messages(30))
    monkeypatch.setattr(observe, "Consumer", consumer)
    read = observe.read_to_end("127.0.0.1:9", "t")
    assert sorted(w.seq for w in read if w.seq is not None) == list(range(30))
    assert consumer.waited <= observe.READ_WAIT_S
