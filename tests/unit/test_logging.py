"""Log lines for people: pid and worker on each, librdkafka's lines in structlog."""

from __future__ import annotations

import io
import logging
import os
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import structlog
from confluent_kafka import Consumer

from service.telemetry.log_setup import (
    RateLimiter,
    configure_logging,
    kafka_logger,
)


class Output:
    """A byte stream standing in for stdout; `lines()` parses what was written."""

    def __init__(self) -> None:
        self.raw = io.BytesIO()
        self.stream = io.TextIOWrapper(self.raw, write_through=True)

    def lines(self) -> list[dict[str, Any]]:
        return [orjson.loads(line) for line in self.raw.getvalue().splitlines()]


@pytest.fixture
def output() -> Iterator[Output]:
    """Logging configured onto an `Output`; every global it touches restored."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    logging.getLogger("librdkafka").handlers.clear()  # a fresh rate limit
    out = Output()
    yield out
    structlog.reset_defaults()
    root.handlers, root.level = saved[0], saved[1]


def configure(out: Output, level: Any = "info") -> None:
    configure_logging(
        level, "json", cache=False, stream=out.stream, fields={"worker": 1}
    )


def librdkafka_line(level: int, facility: str = "FAIL") -> None:
    """A line as confluent-kafka hands it to the `logger` setting."""
    kafka_logger().log(
        level,
        "%s [%s] %s",
        facility,
        "rdkafka#consumer-1",
        "[thrd:b]: b: Connect failed",
    )


class TestFields:
    """Every line names its process and its worker index."""

    def test_pid_and_worker_on_our_lines_and_other_libraries(
        self, output: Output
    ) -> None:
        configure(output)
        structlog.get_logger("t").info("hello")
        logging.getLogger("asyncio").warning("loop %s", "slow")
        lines = output.lines()
        assert [(ln["event"], ln["pid"], ln["worker"]) for ln in lines] == [
            ("hello", os.getpid(), 1),
            ("loop slow", os.getpid(), 1),
        ]


class TestLibrdkafkaLines:
    """librdkafka's lines are structured, rate-limited and governed by the level."""

    def test_a_burst_is_one_line_with_its_facility(self, output: Output) -> None:
        configure(output)
        for _ in range(100):
            librdkafka_line(logging.ERROR)
        [line] = output.lines()
        assert line["event"] == "librdkafka"
        assert (line["facility"], line["client"]) == ("FAIL", "rdkafka#consumer-1")
        assert line["message"] == "b: Connect failed"
        assert line["pid"] == os.getpid() and line["worker"] == 1
        # Each of these errors also reaches error_cb, which says it clearly.
        assert line["level"] == "info"

    def test_warnings_stay_warnings_and_the_level_filters(self, output: Output) -> None:
        configure(output, "warning")
        librdkafka_line(logging.ERROR)
        librdkafka_line(logging.WARNING, "CONFWARN")
        assert [(ln["facility"], ln["level"]) for ln in output.lines()] == [
            ("CONFWARN", "warning")
        ]

    def test_debug_lines_asked_for_are_all_kept(self, output: Output) -> None:
        configure(output, "debug")
        for _ in range(5):
            librdkafka_line(logging.DEBUG, "PROTOCOL")
        assert len(output.lines()) == 5

    def test_a_real_client_writes_no_raw_lines(
        self, output: Output, capfd: pytest.CaptureFixture[str]
    ) -> None:
        configure(output)
        consumer = Consumer(
            {
                "bootstrap.servers": "127.0.0.1:1",
                "group.id": "g",
                "logger": kafka_logger(),
            }
        )
        consumer.subscribe(["t"])
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:  # ~20 refused connections a second
            consumer.consume(10, 0.1)
        consumer.close()
        lines = output.lines()
        assert capfd.readouterr().err == ""
        assert [ln["facility"] for ln in lines if ln["event"] == "librdkafka"] == [
            "FAIL"
        ]


class TestRateLimiter:
    """One line per key per interval; the rest are counted for the next line."""

    def test_counts_what_it_drops(self) -> None:
        now = [0.0]
        limiter = RateLimiter(30.0, clock=lambda: now[0])
        seen = []
        for t in range(0, 95, 5):  # every 5 s for 90 s
            now[0] = float(t)
            seen.append(limiter.allow("k"))
        assert [n for n in seen if n is not None] == [0, 5, 5, 5]
        assert limiter.allow("other") == 0
