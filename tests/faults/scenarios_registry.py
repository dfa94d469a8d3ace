"""A team's schema registry set up wrong or failing: Rg1 a wrong password, Rg2 a
CA or CA file that cannot vouch for it, Rg3 a registry that fails after start.

The registry is served as Confluent Cloud serves one: HTTPS with a private CA and
basic auth (`tests.registry_proxy`), in front of a local Apicurio Registry started
once for these scenarios (stopped when the suite's process exits). The traffic:
1,000 framed Avro order events (their schema registered before the run) on 2
partitions; the workers write framed output (`--output-topic`), so their output
schema is registered at start too.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Final

from codec import get_codec
from codec.registry import RegistryAccess, RegistryClient, frame_codec
from loadgen.payloads import make_payloads
from localkafka.registry import LocalRegistry
from tests.faults.harness import Env, Outcome, wait_until
from tests.faults.producer import Payload, Plan
from tests.faults.run import Run
from tests.registry_proxy import SecuredRegistry

COUNT: Final = 1000
START_S: Final = 60.0
"""How long a worker set up wrong may take to end (about 2 s here)."""
FRAMED: Final = ("--framing", "confluent")
SENTINEL: Final = "S3NT1NEL-registry-"
_shared: list[LocalRegistry] = []


def _upstream() -> str:
    """The local registry's URL, started at the first call (about 10 s)."""
    if not _shared:
        registry = LocalRegistry(heap="384m")
        registry.start()
        _shared.append(registry)
    return _shared[0].url


def _framed_traffic(upstream: str, topic: str) -> Plan:
    framed = frame_codec(
        get_codec("avro", "medium"), RegistryClient(RegistryAccess(upstream))
    )
    framed.register(f"{topic}-value")
    pool = [framed.encode(framed.from_builtins(p)) for p in make_payloads("medium", 64)]
    return lambda seq: Payload(pool[seq % len(pool)])


def _secured(env: Env, name: str) -> SecuredRegistry:
    password = SENTINEL + uuid.uuid4().hex
    directory = env.root / f"{name}-ca-{uuid.uuid4().hex[:6]}"
    return SecuredRegistry(_upstream(), directory, password)


def _with_wrong_settings(
    outcome: Outcome,
    env: Env,
    name: str,
    wrong: Callable[[SecuredRegistry], Mapping[str, Mapping[str, str | None]]],
    setting: str,
) -> Outcome:
    """Each of ``wrong``'s settings ends the worker at start with one line naming
    ``setting``, exit 1, nothing consumed or committed; then a worker with the
    right settings drains every message (missing 0, no dead letter)."""
    with _secured(env, name) as proxy, Run(env, outcome, codec="avro") as run:
        run.args += FRAMED
        plan = _framed_traffic(proxy.upstream_url, run.topic)
        run.produce(plan, rate=1000, count=COUNT).wait(60)
        for case, changes in wrong(proxy).items():
            worker = run.worker(env=proxy.environment(**changes), ready=False)
            assert worker.proc is not None
            started = time.monotonic()
            try:
                code: int | None = worker.proc.wait(START_S)
            except subprocess.TimeoutExpired:  # it went on: see what it did
                code = None
                worker.stop(signal.SIGTERM, timeout=60)
            lines = worker.log_path.read_text(errors="replace").strip().splitlines()
            outcome.figures[f"{case}: exit"] = code
            outcome.figures[f"{case}: s"] = round(time.monotonic() - started, 1)
            if code is None:
                outcome.fail(f"{case}: still running {START_S:.0f} s after its start")
            elif code != 1 or len(lines) != 1:
                outcome.fail(f"{case}: exit {code}, {len(lines)} lines: {lines[-3:]}")
            elif (
                setting not in lines[0]
                or json.loads(lines[0])["event"] != "worker_failed"
            ):
                outcome.fail(f"{case}: the line does not name {setting}: {lines[0]}")
            if SENTINEL in "".join(lines):
                outcome.fail(f"{case}: a password was printed")
        committed = sum(max(0, o) for o in run.monitor.latest().values())
        written = run.written()
        outcome.figures.update(
            committed_before_right=committed, written_before_right=written
        )
        if committed or written:
            outcome.fail(f"set up wrong, it committed {committed} and wrote {written}")
        run.worker(env=proxy.environment())
        run.wait_drained(60)
        run.finish()
        _no_dead_letters(run, outcome)
    return outcome


def _no_dead_letters(run: Run, outcome: Outcome) -> None:
    """No message dead-lettered, and no registry password in any worker's log."""
    dead = len(run.data.dlq) if run.data else -1
    outcome.figures["dead_letters"] = dead
    if dead:
        outcome.fail(
            f"{dead} messages dead-lettered: the registry's fault is not theirs"
        )
    logs = [log for log in run.logs() if SENTINEL in log.read_text(errors="replace")]
    if logs:
        outcome.fail(f"a registry password in {', '.join(log.name for log in logs)}")


def rg1_wrong_password(env: Env) -> Outcome:
    """A team's registry with a wrong password (or none) stops the worker at start.

    The worker reaches the registry before Kafka: a wrong `REGISTRY_PASSWORD` and a
    missing login each end it with one line naming the setting, exit status 1,
    nothing consumed or committed and the password in no output; with the right
    one, every message is handled and none dead-lettered.
    """
    outcome = Outcome("Rg1", "A team's registry: wrong password, no login")
    return _with_wrong_settings(
        outcome,
        env,
        "rg1",
        lambda proxy: {
            "wrong password": {"password": SENTINEL + "wrong"},
            "no login": {"username": None, "password": None},
        },
        "REGISTRY_PASSWORD",
    )


def rg2_wrong_ca(env: Env) -> Outcome:
    """A CA that did not sign the registry's certificate, or a CA file missing or
    without a certificate, stops the worker at start.

    Each ends it with one line naming `REGISTRY_CA_FILE`, exit status 1, nothing
    consumed or committed (no traceback, no `ssl.SSLError`); with the right CA file
    every message is handled and none dead-lettered.
    """
    outcome = Outcome("Rg2", "A team's registry: wrong CA, CA file missing or empty")

    def wrong(proxy: SecuredRegistry) -> dict[str, dict[str, str | None]]:
        empty = proxy.ca_file.with_name("empty.pem")
        empty.write_text("no certificate here\n")
        return {
            "another CA": {"ca_file": str(proxy.other_ca_file)},
            "CA file missing": {"ca_file": str(proxy.ca_file.with_name("gone.pem"))},
            "CA file without a certificate": {"ca_file": str(empty)},
        }

    return _with_wrong_settings(outcome, env, "rg2", wrong, "REGISTRY_CA_FILE")


def rg3_registry_fails_after_start(env: Env) -> Outcome:
    """A registry that fails after start pauses the partitions, never drains them.

    The worker starts with the registry up, then it goes down (connections
    refused) and traffic arrives whose schema id the worker has not seen; then it
    refuses the worker's credentials (HTTP 401, a rotated secret); then it comes
    back. While it fails, `/readyz` is 503 naming the registry, nothing is handled,
    dead-lettered or committed; once it is back every message is handled, none
    dead-lettered, missing 0.
    """
    outcome = Outcome("Rg3", "A team's registry fails after start: paused, not drained")
    config = {"registry": {"attempts": 2, "cooldown_s": 1.0}}  # refused at once
    with (
        _secured(env, "rg3") as proxy,
        Run(env, outcome, codec="avro", config=config) as run,
    ):
        run.args += FRAMED
        worker = run.worker(env=proxy.environment())
        plan = _framed_traffic(proxy.upstream_url, run.topic)
        for mode, seconds in (("down", 10.0), ("refusing", 6.0)):
            proxy.set_mode(mode)  # type: ignore[arg-type]
            run.mark(f"registry {mode}")
            if run.producer is None:
                run.produce(plan, rate=500, count=COUNT)
            wait_until(
                lambda: (worker.readyz() or (0, ""))[0] == 503, 30, what="readyz 503"
            )
            time.sleep(seconds)
            status, reason = worker.readyz() or (0, "")
            written = run.written()
            committed = sum(max(0, o) for o in run.monitor.latest().values())
            outcome.figures[f"{mode}: readyz"] = status
            outcome.figures[f"{mode}: written"] = written
            if status != 503 or "schema registry" not in reason:
                outcome.fail(f"registry {mode}: /readyz {status} {reason[:200]}")
            if written or committed:
                outcome.fail(f"registry {mode}: wrote {written}, committed {committed}")
        proxy.set_mode("up")
        run.mark("registry back")
        run.wait_drained(60)
        scraped = worker.scrape()
        waits = scraped.total("worker_registry_waits_total") if scraped else -1
        outcome.figures["registry_waits"] = int(waits)
        outcome.figures["readyz after"] = (worker.readyz() or (0, ""))[0]
        if outcome.figures["readyz after"] != 200:
            outcome.fail("not ready again once the registry answered")
        run.finish()
        _no_dead_letters(run, outcome)
    return outcome
