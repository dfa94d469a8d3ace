"""What `bench_worker` runs and measures: the bare loop, the worker, the load."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from array import array
from collections.abc import Callable, Sequence
from contextlib import ExitStack, suppress
from multiprocessing.connection import Connection
from typing import Any, Final

import numpy as np
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from codec import get_codec
from localkafka import LocalKafka, create_topic, delete_topic
from service.delivery.dead_letters import PoisonHandler
from service.kafka.headers import SENT_NS
from service.lifecycle.child_processes import die_with_parent, free_port
from service.loop.batch_loop import BatchLoop
from service.settings.worker import MetricsSettings, ProcessingSettings
from service.telemetry.histogram import LATENCY_BUCKETS, quantile
from service.telemetry.metrics import Metrics

PROFILE: Final = "medium"
_TICKS: Final = os.sysconf("SC_CLK_TCK")
_PRESTART_POLL_S: Final = 0.05
"""Progress poll while a contender starts up: that time is excluded, so polling
fast costs the measurement nothing and catches the first message within 50 ms."""

WORKER_DEFAULTS: Final = ProcessingSettings()
"""The worker's own defaults: the bare loop consumes with the same batch and wait."""

LATENCY_SAMPLE_EVERY: Final = MetricsSettings().latency_sample_every
"""The worker's default e2e sampling, which the timed bare loop copies: converting a
message's headers costs 1.8-4.5 us, so a bare loop timing every message would spend
~10 % of a core on it at 40k msg/s and flatter the worker's CPU."""

_MIN_SLEEP_S: Final = 0.25
"""Shortest gap between drain samples: an idle consumer polls at ~1.6 % of a core,
so 0.25 s past the end costs it ~4 ms, what one more scrape would."""
_MAX_SLEEP_S: Final = 2.0
"""Longest gap between drain samples: a rate misjudged at the start (broker and
consumer warming up) overshoots the end by at most this, ~32 ms of idle polling."""

# Slots of the bare loop's shared array; read and written without a lock (one
# aligned 8-byte word each, one writer).
_DONE, _STOP, _ASSIGNED = 0, 1, 2


def log(msg: str) -> None:
    """A progress line on stderr (stdout carries the result)."""
    print(msg, file=sys.stderr, flush=True)


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds so far of each of `pid`'s threads, by `tid:name`, to the ns.

    From each thread's `/proc/<pid>/task/<tid>/schedstat` run time: a drain's
    threads live as long as the process (the control plane serves in one thread),
    and `/proc/<pid>/stat`'s user + system time comes in 10 ms clock ticks, 1 % of a
    fast codec's 1-second drain."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with suppress(OSError):
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                out[f"{tid}:{name}"] = int(f.read().split()[0]) / 1e9
    return out


def cpu_seconds(pid: int) -> float:
    """CPU seconds of all of `pid`'s threads so far (`thread_cpu`)."""
    return sum(thread_cpu(pid).values())


def steal_seconds() -> float:
    """CPU time the hypervisor took from this machine's CPUs so far (`/proc/stat`):
    a drain during which it grows ran on a machine busy elsewhere."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return int(fields[8]) / _TICKS


def by_role(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """Per-thread CPU deltas summed by thread name (`rdk:broker1`, `python`, ...)."""
    out: dict[str, float] = {}
    for key, cpu in after.items():
        name = key.split(":", 1)[1]
        out[name] = out.get(name, 0.0) + cpu - before.get(key, 0.0)
    return {k: round(v, 3) for k, v in sorted(out.items()) if v >= 0.001}


def in_process_loop(
    consumer: Any,
    codec: Any,
    codec_name: str,
    *,
    step: Callable[[Any], Any] | None = None,
    batch_size: int = 500,
    latency_sample_every: int = LATENCY_SAMPLE_EVERY,
    store_interval_s: float = 0.0,
) -> BatchLoop:
    """The worker's `BatchLoop` on `consumer` decoding with `codec` (medium profile,
    metrics on, no DLQ or output topic), for the in-process benchmarks."""
    metrics = Metrics(CollectorRegistry(), codec=codec_name, schema="medium")
    return BatchLoop(
        consumer,
        codec=codec,
        step=step,
        metrics=metrics,
        poison=PoisonHandler(metrics, codec=codec_name, group="g", dead_letters=None),
        output=None,
        max_payload_bytes=4 << 20,
        batch_size=batch_size,
        batch_timeout_s=0.005,
        latency_sample_every=latency_sample_every,
        store_interval_s=store_interval_s,
    )


def kafka(stack: ExitStack, bootstrap_servers: str | None) -> str:
    """`bootstrap_servers`, else that of a `LocalKafka` started for `stack`'s life."""
    if bootstrap_servers:
        return bootstrap_servers
    return stack.enter_context(LocalKafka()).bootstrap_servers


def run_bench(
    args: Any,
    measure: Callable[[str], dict[str, Any]],
    show: Callable[[dict[str, Any]], None],
) -> int:
    """A benchmark's `main`: `measure(bootstrap)` on `args.bootstrap_servers` (or a
    `LocalKafka`), the load average before it and the CPU count added, then one JSON
    object (`args.json`) or `show(result)`."""
    load_before = os.getloadavg()
    with ExitStack() as stack:
        res = measure(kafka(stack, args.bootstrap_servers))
    res["load_average_before"] = [round(x, 2) for x in load_before]
    res["cpus"] = os.cpu_count()
    if args.json:
        print(json.dumps(res))
    else:
        show(res)
    return 0


def fresh_topic(stack: ExitStack, bootstrap: str, codec: str, partitions: int) -> str:
    """A fresh topic (and its dead-letter topic), deleted when `stack` closes."""
    topic = f"bench-{re.sub('[^a-z0-9]+', '-', codec)}-{uuid.uuid4().hex[:8]}"
    for name, parts in ((topic, partitions), (f"{topic}.dlq", 1)):
        create_topic(bootstrap, name, parts)
        stack.callback(_delete, bootstrap, name)
    return topic


def _delete(bootstrap: str, topic: str) -> None:
    with suppress(Exception):  # cleanup: a topic left behind is no failure
        delete_topic(bootstrap, topic)


def loadgen_cmd(bootstrap: str, topic: str, codec: str, *flags: str) -> list[str]:
    """`codec-loadgen` writing `codec` medium events to `topic`, JSON on stdout."""
    fixed = {
        "--bootstrap-servers": bootstrap,
        "--topic": topic,
        "--codec": codec,
        "--profile": PROFILE,
        "--progress": "never",
    }
    return [sys.executable, "-m", "loadgen", *_flat(fixed), "--json", *flags]


def _flat(flags: dict[str, str]) -> list[str]:
    return [x for pair in flags.items() for x in pair]


def loadgen_summary(proc: subprocess.Popen[str], timeout: float) -> dict[str, Any]:
    """Wait for a `codec-loadgen` run; its JSON summary, or raise if it failed."""
    out, _ = proc.communicate(timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"codec-loadgen exited {proc.returncode}")
    summary: dict[str, Any] = json.loads(out)
    return summary


def fill_topic(bootstrap: str, topic: str, codec: str, count: int) -> dict[str, Any]:
    """Produce `count` events with `codec-loadgen --rate 0 --count N` (unthrottled)."""
    cmd = loadgen_cmd(bootstrap, topic, codec, "--rate", "0", "--count", str(count))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    return loadgen_summary(proc, timeout=600)


def _bare_drain(
    consumer: Any, decode: Callable[[bytes], Any], shared: Any, batch: int, t: float
) -> None:
    consume, n = consumer.consume, 0
    while not shared[_STOP]:
        msgs = consume(batch, t)
        for m in msgs:
            if m.error() is None:  # an error event is not a message
                decode(m.value())
        n += len(msgs)
        shared[_DONE] = n


def _bare_timed(
    consumer: Any,
    decode: Callable[[bytes], Any],
    shared: Any,
    batch: int,
    t: float,
    every: int,
    store_every_s: float = 0.0,
    timer: bool = False,
) -> array[int]:
    """The timed bare loop; with `store_every_s`, it also stores its position at
    most that often, as the worker does (`bench_loop_parts`' `bare+settings`); with
    `timer`, it waits for a batch as the worker does (`BatchLoop.run`: after a batch
    under half full, sleep the wait, then take what came)."""
    consume, n, lat = consumer.consume, 0, array("q")
    append, store_at, on_queue = lat.append, 0.0, not timer
    while not shared[_STOP]:
        if on_queue:
            msgs = consume(batch, t)
        else:
            time.sleep(t)
            msgs = consume(batch, 0)
        on_queue = not timer or 2 * len(msgs) >= batch
        for m in msgs:
            if m.error() is None:  # an error event is not a message
                decode(m.value())
        now = time.time_ns()  # "processed": after the batch, as the worker stamps it
        # Every k-th message of the stream, as the worker samples.
        for m in msgs[(-n) % every :: every]:
            for key, value in m.headers():
                if key == SENT_NS:  # the load generator writes it first: one compare
                    append(now - int(value))
                    break
        if store_every_s and msgs and (mono := time.monotonic()) >= store_at:
            store_at = mono + store_every_s
            consumer.store_offsets(offsets=consumer.position(consumer.assignment()))
        n += len(msgs)
        shared[_DONE] = n
    return lat


def _latency_figures(lat_ns: array[int]) -> dict[str, Any]:
    """The latencies bucketed as the worker buckets them, plus exact quantiles."""
    secs = np.frombuffer(lat_ns, dtype=np.int64) * 1e-9
    bounds = np.asarray(LATENCY_BUCKETS)
    # side="right" is the worker's `bisect_right`: equal values go one bucket up.
    idx = np.searchsorted(bounds, secs, side="right")
    counts = np.bincount(idx, minlength=len(bounds) + 1).tolist()
    exact = np.quantile(secs, [0.5, 0.99]).tolist() if len(secs) else [None, None]
    return {"counts": counts, "exact_p50_s": exact[0], "exact_p99_s": exact[1]}


def bare_main(
    bootstrap: str,
    topic: str,
    codec: str,
    batch: int,
    timeout: float,
    shared: Any,
    results: Any,
    latency_sample_every: int = LATENCY_SAMPLE_EVERY,
    timer: bool = False,
) -> None:
    """The bare loop's process (see `bench_worker`); `results` None: no latencies;
    `timer`: the worker's way of waiting for a batch (`_bare_timed`)."""
    from confluent_kafka import Consumer

    decode = get_codec(codec, PROFILE).decode_unchecked  # type: ignore[arg-type]
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": f"bench-bare-{uuid.uuid4().hex[:8]}",
        "auto.offset.reset": "earliest",
    }
    consumer = Consumer(conf)

    def assigned(_consumer: Any, _partitions: list[Any]) -> None:
        shared[_ASSIGNED] = 1  # librdkafka assigns them itself after this returns

    consumer.subscribe([topic], on_assign=assigned)
    try:
        if results is None:
            _bare_drain(consumer, decode, shared, batch, timeout)
        else:
            lat = _bare_timed(
                consumer,
                decode,
                shared,
                batch,
                timeout,
                latency_sample_every,
                timer=timer,
            )
            results.send(_latency_figures(lat))
    finally:
        consumer.close()


class SpawnedLoop:
    """A consumer loop in its own (spawned) process: progress, assignment and the
    stop flag in shared memory (`_DONE`, `_ASSIGNED`, `_STOP`).

    Spawned, not forked: the harness already runs librdkafka threads (topic admin),
    and a fork copies their locks in whatever state they are.
    """

    def __init__(self) -> None:
        self._ctx = mp.get_context("spawn")
        self._shared = self._ctx.RawArray("q", 3)

    def _start(self, target: Callable[..., None], args: tuple[Any, ...]) -> None:
        self._proc = self._ctx.Process(target=target, args=args, daemon=True)
        self._proc.start()
        assert self._proc.pid is not None
        self.pid: int = self._proc.pid

    def progress(self) -> int:
        """Messages consumed so far (raises if the process died)."""
        if not self._proc.is_alive():
            raise RuntimeError(f"loop exited {self._proc.exitcode}")
        return int(self._shared[_DONE])

    def ready(self) -> bool:
        """True once the group assigned it partitions."""
        self.progress()  # raises if the process died
        return bool(self._shared[_ASSIGNED])

    def close(self) -> None:
        self._shared[_STOP] = 1
        self._proc.join(10)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join()


class BareConsumer(SpawnedLoop):
    """The bare loop (`bare_main`) in its own process."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        codec: str,
        batch: int,
        timeout_s: float,
        *,
        latencies: bool = False,
        latency_sample_every: int = LATENCY_SAMPLE_EVERY,
        timer: bool = False,
    ) -> None:
        super().__init__()
        self._recv: Connection | None = None
        send: Connection | None = None
        if latencies:
            self._recv, send = self._ctx.Pipe(duplex=False)
        args = (
            bootstrap,
            topic,
            codec,
            batch,
            timeout_s,
            self._shared,
            send,
            latency_sample_every,
            timer,
        )
        self._start(bare_main, args)
        if send is not None:
            send.close()  # the child's end only: a dead child reads as EOF at once

    def latencies(self, timeout: float = 60) -> dict[str, Any]:
        """Stop the loop and return its latency figures (`_latency_figures`)."""
        assert self._recv is not None, "started without latencies=True"
        self._shared[_STOP] = 1
        if not self._recv.poll(timeout):
            raise TimeoutError("the bare loop sent no latencies")
        figures: dict[str, Any] = self._recv.recv()
        return figures


class WorkerProcess:
    """`python -m service --logic noop` with metrics on a free port."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        codec: str,
        batch_size: int | None,
        *extra: str,
    ) -> None:
        self.port = free_port()
        self.codec = codec
        flags = {
            "--bootstrap-servers": bootstrap,
            "--topic": topic,
            "--group": f"bench-worker-{uuid.uuid4().hex[:8]}",
            "--codec": codec,
            "--schema": PROFILE,
            "--logic": "noop",
            "--metrics-port": str(self.port),
            "--log-level": "warning",
        }
        if batch_size is not None:
            flags["--batch-size"] = str(batch_size)
        cmd = [sys.executable, "-m", "service", *_flat(flags), *extra]
        # Its log lines go to our stderr: stdout may carry the --json result.
        self._proc = subprocess.Popen(
            cmd, stdout=sys.stderr, preexec_fn=die_with_parent()
        )
        self.pid = self._proc.pid

    def _get(self, path: str) -> tuple[int, str]:
        if self._proc.poll() is not None:
            raise RuntimeError(f"worker exited {self._proc.returncode}")
        url = f"http://127.0.0.1:{self.port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, ""
        except OSError:
            return 0, ""

    def _families(self, *names: str) -> dict[str, Any]:
        """The worker's metric families; with `names`, only those series (and
        `worker_info`): a full scrape costs the worker ~2 ms of CPU, a named one
        ~0.2 ms, and the drain's samples are charged to it."""
        query = "&".join(f"name[]={n}" for n in (*names, "worker_info") if names)
        status, text = self._get(f"/metrics?{query}" if query else "/metrics")
        if status != 200:
            return {}
        fams = {f.name: f for f in text_string_to_metric_families(text)}
        info = fams.get("worker_info")
        # free_port may race: make sure our worker, not a stranger, answers.
        if info is None or info.samples[0].labels.get("codec") != self.codec:
            return {}
        return fams

    def progress(self) -> int:
        """`worker_messages_total`, every outcome (0 until it serves metrics)."""
        fam = self._families("worker_messages_total").get("worker_messages")
        return int(sum(s.value for s in fam.samples)) if fam else 0

    def ready(self) -> bool:
        """True once `/readyz` answers 200 (partitions assigned)."""
        return self._get("/readyz")[0] == 200 and bool(self._families())

    def e2e_buckets(self) -> list[float]:
        """`worker_e2e_latency_seconds` per bucket (not cumulative), overflow last."""
        fam = self._families("worker_e2e_latency_seconds_bucket").get(
            "worker_e2e_latency_seconds"
        )
        cum = {
            float(s.labels["le"]): s.value
            for s in (fam.samples if fam else ())
            if s.name.endswith("_bucket")
        }
        if not cum:
            return [0.0] * (len(LATENCY_BUCKETS) + 1)
        assert tuple(sorted(cum))[:-1] == LATENCY_BUCKETS, "unexpected latency buckets"
        running = [cum[b] for b in sorted(cum)]
        return [c - p for c, p in zip(running, [0.0, *running[:-1]], strict=True)]

    def close(self) -> None:
        self._proc.terminate()
        try:
            self._proc.wait(30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


def latency_ms(counts: Sequence[float], q: float) -> float | None:
    """The `q` quantile, in ms, of counts over `LATENCY_BUCKETS` (overflow last)."""
    value = quantile(LATENCY_BUCKETS, counts, q)
    return None if value is None else round(value * 1e3, 3)


def wait_until(what: str, done: Callable[[], bool], timeout: float) -> None:
    """Poll `done` until it is true; TimeoutError naming `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout:.0f} s")
        time.sleep(_PRESTART_POLL_S)


def measure_drain(
    pid: int, progress: Callable[[], int], total: int, interval: float, limit: float
) -> dict[str, Any]:
    """CPU and progress of `pid` from its first message until `total` are done.

    Start-up is excluded: the first sample is the first that sees progress (polled
    every 50 ms); the messages counted there are excluded too, with their CPU. The
    next sample comes `interval` later, and each later one at the end predicted
    from the rate so far (0.25 to 2 s ahead): a worker sample is a
    /metrics scrape costing it ~4 ms of CPU, so a drain is charged 2 to 6 of them
    whatever its length, and the idle polling after the end stays short.
    """
    deadline = time.monotonic() + limit
    n = 0
    while n <= 0:
        if time.monotonic() > deadline:
            raise TimeoutError(f"pid {pid}: no message in {limit:.0f} s")
        time.sleep(_PRESTART_POLL_S)
        n = progress()
    threads0, steal0 = thread_cpu(pid), steal_seconds()
    t0, n0, samples, delay = time.monotonic(), n, 1, interval
    while n < total:
        if time.monotonic() > deadline:
            raise TimeoutError(f"pid {pid}: {n} of {total} messages in {limit:.0f} s")
        time.sleep(delay)
        n, threads, now, samples = (
            progress(),
            thread_cpu(pid),
            time.monotonic(),
            samples + 1,
        )
        rate = (n - n0) / (now - t0)
        delay = (
            interval
            if rate <= 0
            else min(max((total - n) / rate, _MIN_SLEEP_S), _MAX_SLEEP_S)
        )
    if n == n0:
        raise RuntimeError(f"pid {pid} drained the topic before the first sample")
    cpu = sum(threads.values()) - sum(threads0.values())
    return {
        "messages": n - n0,
        "cpu_s": round(cpu, 3),
        "wall_s": round(now - t0, 3),
        "samples": samples,
        "msgs_per_cpu_s": round((n - n0) / max(cpu, 1e-9)),
        "threads_cpu_s": by_role(threads0, threads),
        "steal_s": round(steal_seconds() - steal0, 2),
    }
