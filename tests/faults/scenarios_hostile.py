"""Hostile input from any producer: H1 headers a worker must shrug off."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from typing import Final

from codec import CodecName
from service.kafka.headers import CONTENT_TYPE
from tests.faults.harness import Env, Outcome, http_get
from tests.faults.model import Header
from tests.faults.producer import Payload, Plan, good_traffic
from tests.faults.run import Run

HOSTILE_SENT_NS: Final[tuple[tuple[bytes, str], ...]] = (
    (b"abc", "unparsable"),
    (b"", "unparsable"),
    (b"1.7e18", "unparsable"),
    (b"\xff\xfe\x00\x80", "unparsable"),
    (b"9" * 5000, "unparsable"),
    (b"-1", "unparsable"),
    (b"99999999999999999999", "negative"),
    (b"1700000000", "too_large"),
)
"""Each hostile `x-sent-ns` and the reason it must be counted under."""
_FUTURE_S: Final = 3600
"""An `x-sent-ns` this far ahead: a producer whose clock is an hour fast."""
EXTRA_HEADERS: Final[tuple[tuple[Header, ...], ...]] = (
    (("x-sent-ns", b"not the first one"),),  # a second stamp: the first one counts
    (("x-empty", None),),
    (("x-big", b"\x00" * 100_000),),
    (("x-\u00e9\u2603\u0000", b"\xc3\x28"),),
    (("content-type", b"application/x-nonsense"),),  # the codec is fixed
)
"""Headers besides `x-sent-ns` that mean nothing to the worker, nor may hurt it."""
EVERY: Final = 5
"""One message in EVERY carries a hostile header; the rest are ordinary."""


def hostile_headers(codec: CodecName) -> tuple[Plan, dict[str, int]]:
    """Good values, one in `EVERY` with a hostile header; and how many invalid
    latencies of each reason the plan holds for `count` messages (filled in as the
    producer asks for seqs)."""
    good = good_traffic(codec)
    expected = {"unparsable": 0, "negative": 0, "too_large": 0}
    kinds = len(HOSTILE_SENT_NS) + 1 + len(EXTRA_HEADERS)

    def plan(seq: int) -> Payload:
        payload = good(seq)
        if seq % EVERY:
            return payload
        kind = (seq // EVERY) % kinds
        if kind < len(HOSTILE_SENT_NS):
            value, reason = HOSTILE_SENT_NS[kind]
            expected[reason] += 1
            return Payload(payload.value, sent_ns=value)
        if kind == len(HOSTILE_SENT_NS):
            expected["negative"] += 1
            ahead = time.time_ns() + _FUTURE_S * 10**9
            return Payload(payload.value, sent_ns=str(ahead).encode())
        extra = EXTRA_HEADERS[kind - len(HOSTILE_SENT_NS) - 1]
        return Payload(payload.value, headers=extra)

    return plan, expected


def h1_hostile_headers(env: Env) -> Outcome:
    """Hostile headers (bad, future and stale `x-sent-ns`, junk headers): never a crash.

    Every message is handled (missing 0, no dead letter: the values are good), the
    worker keeps running without a traceback, and each bad stamp is counted in
    `worker_e2e_latency_invalid_total` by reason instead of in the latency
    histogram, whose mean stays a plausible latency.
    """
    outcome = Outcome("H1", "Hostile headers: bad, future and stale x-sent-ns, junk")
    count = 1500 if env.fast else 6000
    with Run(env, outcome) as run:
        worker = run.worker()
        plan, expected = hostile_headers(run.codec)
        run.produce(plan, rate=500, count=count)
        run.wait_drained(60)
        scraped = worker.scrape()
        if not worker.alive():
            outcome.fail(f"the worker exited with {worker.exit_code()}")
        run.finish()
        if scraped is None:
            outcome.fail("the worker's /metrics did not answer after the drain")
            return outcome
        name = "worker_e2e_latency_invalid_total"
        counted = {r: int(scraped.total(name, reason=r)) for r in expected}
        e2e = scraped.histogram("worker_e2e_latency_seconds")
        mean = e2e.mean()
        outcome.figures.update(
            invalid=",".join(f"{r}={n}" for r, n in counted.items()),
            e2e_mean_s=None if mean is None else round(mean, 3),
        )
        if counted != expected:
            outcome.fail(f"invalid latencies {counted}, expected {expected}")
        if mean is None or not 0 <= mean < 60:
            outcome.fail(f"e2e latency mean {mean} s: bad stamps reached the histogram")
        if scraped.total("worker_dead_letters_total"):
            outcome.fail("good values with hostile headers were dead-lettered")
    return outcome


PROBE_LIMIT_S: Final = 1.0
"""The slowest probe or scrape answer C1 accepts (a liveness probe allows 2 s)."""
IDLE_CONNECTIONS: Final = 300


def _slowloris(host: str, port: int, stop: threading.Event, count: list[int]) -> None:
    """Keep reconnecting and sending one byte every 0.5 s; count the cut-offs."""
    while not stop.is_set():
        with (
            contextlib.suppress(OSError),
            socket.create_connection((host, port), 5) as s,
        ):
            for byte in b"GET /metrics HTTP/1.1\r\n" + b"X-Slow: 1\r\n" * 500:
                if stop.wait(0.5):
                    return
                s.send(bytes([byte]))
        count[0] += 1


def c1_control_plane_abuse(env: Env) -> Outcome:
    """Control plane under abuse: 300 idle connections, slowloris, probes under 1 s.

    While the worker handles a steady stream, 300 connections are held open
    without a word (opened at once, before the probes) and slow clients send a
    byte every half second; `/healthz` and `/metrics` are probed every 0.2 s and
    each must be answered within `PROBE_LIMIT_S`. Nothing is lost meanwhile.
    """
    outcome = Outcome("C1", "Control plane abuse: 300 idle + slowloris; probes < 1 s")
    seconds = 10 if env.fast else 40
    with Run(env, outcome) as run:
        worker = run.worker()
        run.produce(rate=1000, count=1000 * (seconds + 2))
        stop = threading.Event()
        cut = [0]
        slow = [
            threading.Thread(
                target=_slowloris,
                args=(worker.host, worker.port, stop, cut),
                daemon=True,
            )
            for _ in range(4)
        ]
        for thread in slow:
            thread.start()
        worst = {"/healthz": 0.0, "/metrics": 0.0}
        failed: list[str] = []
        with contextlib.ExitStack() as idle:
            for _ in range(IDLE_CONNECTIONS):
                with contextlib.suppress(OSError):
                    idle.enter_context(
                        socket.create_connection((worker.host, worker.port), 5)
                    )
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                for path in worst:
                    start = time.monotonic()
                    answer = http_get(worker.host, worker.port, path, timeout=5)
                    took = time.monotonic() - start
                    worst[path] = max(worst[path], took)
                    if answer is None or answer[0] != 200:
                        failed.append(
                            f"{path}: {answer and answer[0]} after {took:.2f} s"
                        )
                time.sleep(0.2)
        stop.set()
        for thread in slow:
            thread.join(10)
        run.wait_drained(60)
        run.finish()
        outcome.figures.update(
            healthz_max_ms=round(worst["/healthz"] * 1000),
            metrics_max_ms=round(worst["/metrics"] * 1000),
            slowloris_cut=cut[0],
        )
        if failed:
            outcome.fail(f"{len(failed)} probes failed: {'; '.join(failed[:3])}")
        for path, took in worst.items():
            if took > PROBE_LIMIT_S:
                outcome.fail(f"{path} took {took:.2f} s (limit {PROBE_LIMIT_S:.0f} s)")
    return outcome


def ct1_relabelled(env: Env) -> Outcome:
    """`auto` reads a relabelled message by its last `content-type` (Kafka's rule).

    An `auto` worker; the producer stamps `application/json` first and every
    message carries a second `content-type` after it, naming the wire format its
    value is in (MessagePack for every other one, JSON for the rest): each is
    handled, none dead-lettered.
    """
    outcome = Outcome("CT1", "auto: two content-type headers, the last one right")
    msgpack, json = good_traffic("msgspec-msgpack"), good_traffic("msgspec-json")

    def plan(seq: int) -> Payload:
        if seq % 2:
            headers: tuple[Header, ...] = ((CONTENT_TYPE, b"application/vnd.msgpack"),)
            return Payload(msgpack(seq).value, headers=headers)
        return Payload(json(seq).value, headers=((CONTENT_TYPE, b"application/json"),))

    with Run(env, outcome, codec="auto") as run:
        worker = run.worker()
        run.produce(plan, rate=500, count=1000)
        run.wait_drained(60)
        scraped = worker.scrape()
        run.finish()
        dead = (
            -1 if scraped is None else int(scraped.total("worker_dead_letters_total"))
        )
        outcome.figures["dead_letters"] = dead
        if dead:
            outcome.fail(f"{dead} relabelled messages were dead-lettered")
    return outcome
