"""The stack test's phases: images, build, up, load, live checks, drain, verify, down.

Each phase is timed; each judged thing is a `checks.Check`. The report prints as the
run goes and again, in short, at the end. Exit status: 0 every check passed; 1 a check
failed; 2 the stack could not be built, started or read (the run stops there, and the
stack is still torn down); 4 `--break` broke something no check noticed.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from service.lifecycle.child_processes import free_ports
from tests.deploy.stack import checks, live, readback
from tests.deploy.stack.breaks import BREAKS, renamed_metric_dashboards
from tests.deploy.stack.checks import Check, Leftovers
from tests.deploy.stack.engine import Engine, EngineError
from tests.deploy.stack.images import ImageOrigin, needed_images, provide
from tests.deploy.stack.readback import Side
from tests.deploy.support import (
    PROMETHEUS_CONFIG,
    compose_services,
    dashboards,
    load_yaml,
)

PORT_VARIABLES: Final = (
    "KAFKA_HOST_PORT",
    "PROMETHEUS_HOST_PORT",
    "GRAFANA_HOST_PORT",
    "WORKER_A_HOST_PORT",
    "WORKER_B_HOST_PORT",
)
SCRAPE_S: Final = 5
"""deploy/prometheus/prometheus.yml's scrape interval: a staging slice spans 4."""
WARMUP_S: Final = 30
"""Load seconds left out of the staging window (start-up, first scrapes)."""
LIVE_CHECKS_BEFORE_END_S: Final = 45
"""The live checks start this long before the load generators stop (their targets
are up only while they run)."""
MIN_DURATION_S: Final = 4 * SCRAPE_S * 9 + WARMUP_S + 10
"""Nine staging slices of four scrapes, the warm-up and a margin: 220 s."""


@dataclass(frozen=True)
class Options:
    """The run's settings (`python -m tests.deploy.stack --help`)."""

    duration: int = 240
    rate: int = 1000
    codec_a: str = "json+pydantic"
    codec_b: str = "msgspec-msgpack"
    project: str = "codec-ab-stack-test"
    breaks: str | None = None
    keep: bool = False
    out: Path | None = None


class Abort(RuntimeError):
    """The stack could not be built, started or read: no verdict possible."""


@dataclass
class StackRun:
    """One run of the stack test."""

    options: Options
    print: Callable[[str], None] = print
    phases: dict[str, float] = field(default_factory=dict)
    results: list[Check] = field(default_factory=list)
    images: list[ImageOrigin] = field(default_factory=list)
    engine: Engine | None = None
    services: list[str] = field(default_factory=list)
    ports: dict[str, int] = field(default_factory=dict)

    # -- reporting -------------------------------------------------------------------

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self.print(f"== {name}")
        start = time.monotonic()
        try:
            yield
        finally:
            self.phases[name] = self.phases.get(name, 0.0) + time.monotonic() - start
            self.print(f"   {name}: {self.phases[name]:.1f} s")

    def judged(self, check: Check) -> None:
        self.results.append(check)
        for line in check.lines():
            self.print(f"   {line}")

    # -- the phases ------------------------------------------------------------------

    def run(self) -> int:
        started = time.monotonic()
        status: int | None = None
        try:
            self._up_and_load()
        except KeyboardInterrupt:
            self.print("INTERRUPTED: tearing the stack down")
            status = 130
        except Exception as exc:  # any failure is reported, and the stack torn down
            self.print(f"ABORTED: {type(exc).__name__}: {exc}")
            status = 2
        self._down()
        self._summary(time.monotonic() - started)
        return self._status() if status is None else status

    def _up_and_load(self) -> None:
        o = self.options
        if o.duration < MIN_DURATION_S:
            raise Abort(f"--duration {o.duration}: at least {MIN_DURATION_S} s")
        self.ports = dict(
            zip(PORT_VARIABLES, free_ports(len(PORT_VARIABLES)), strict=True)
        )
        env = {k: str(v) for k, v in self.ports.items()}
        env |= {"RATE": str(o.rate), "DURATION": str(o.duration)}
        env |= {"CODEC_A": o.codec_a, "CODEC_B": o.codec_b}
        with self.phase("engine"):
            self.engine = engine = Engine.find(o.project, env)
            self.print(f"   {engine.name}; project {o.project}; ports {env}")
            engine.compose("down", timeout=300)  # what an interrupted run left
        with self.phase("images"):
            for image in needed_images():
                origin = provide(engine, image, lambda m: self.print(f"   {m}"))
                self.images.append(origin)
                self.print(f"   {origin.line()}")
        missing = [i.image for i in self.images if not i.available]
        if any("grafana" not in image for image in missing):
            raise Abort(f"images missing: {', '.join(missing)}")
        self.services = [s for s in _services() if not (missing and s == "grafana")]
        with self.phase("build"):
            engine.compose("build", timeout=1800, nice=True)
            self.judged(_image_check(engine))
        with self.phase("up"):
            late = BREAKS[o.breaks].late_services if o.breaks else ()
            engine.compose(
                "up",
                "-d",
                "--no-build",
                timeout=900,
                services=[s for s in self.services if s not in late],
            )
            load_start = time.time()
            self._wait("Prometheus ready", lambda: self.prometheus.ready(), 120)
        with self.phase("load"):
            self._load(load_start)
        with self.phase("drain"):
            waited = readback.wait_drained(self.bootstrap, self.sides, 180)
            self.print(f"   both groups committed to the log end {waited:.0f} s after")
        with self.phase("verify"):
            self._verify(load_start)

    @property
    def prometheus(self) -> live.Prometheus:
        return live.Prometheus(f"http://127.0.0.1:{self.ports['PROMETHEUS_HOST_PORT']}")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.ports['KAFKA_HOST_PORT']}"

    @property
    def sides(self) -> list[Side]:
        return [
            Side(
                "A",
                "ab-a",
                "codec-ab-a",
                "worker-a",
                "loadgen-a",
                self.ports["WORKER_A_HOST_PORT"],
            ),
            Side(
                "B",
                "ab-b",
                "codec-ab-b",
                "worker-b",
                "loadgen-b",
                self.ports["WORKER_B_HOST_PORT"],
            ),
        ]

    def _wait(self, what: str, ready: Callable[[], object], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            if time.monotonic() > deadline:
                raise Abort(f"{what}: not after {timeout:.0f} s")
            time.sleep(1)

    def _sleep_until(self, when: float) -> None:
        time.sleep(max(0.0, when - time.time()))

    def _load(self, load_start: float) -> None:
        o, engine = self.options, self._engine
        self._sleep_until(load_start + 15)
        for side in self.sides:
            readback.inject_poison(self.bootstrap, side.topic)
        self.print("   one undecodable message injected into ab-a and ab-b")
        if o.breaks:
            BREAKS[o.breaks].during_load(self)
        self._sleep_until(load_start + o.duration - LIVE_CHECKS_BEFORE_END_S)
        self._live_checks()
        self._wait(
            "the load generators to finish",
            lambda: all(
                engine.containers()[s.loadgen].status == "exited" for s in self.sides
            ),
            max(60.0, load_start + o.duration + 90 - time.time()),
        )

    def _live_checks(self) -> None:
        prom = self.prometheus
        brk = BREAKS[self.options.breaks] if self.options.breaks else None
        if brk is not None:
            brk.before_targets(self)
        self.judged(checks.judge_targets(prom.targets(), _scrape_targets()))
        if brk is not None:
            brk.after_targets(self)
        self.judged(
            checks.judge_answers("rules", prom.rule_answers(), "recording rules")
        )
        boards: list[tuple[Path, Mapping[str, Any]]] = list(dashboards())
        if self.options.breaks == "query":
            boards = renamed_metric_dashboards(boards)
        answers = prom.panel_answers(boards)
        self.judged(checks.judge_answers("panels", answers, "dashboard panel queries"))
        declared = [d for d in live.declared_health() if d.service in self.services]
        observed = live.observe(self._engine, declared)
        self.judged(checks.judge_health(declared, observed, name="health during load"))
        self.judged(live.grafana_provisioning(self._engine, "grafana" in self.services))

    def _verify(self, load_start: float) -> None:
        engine = self._engine
        containers = engine.containers()
        for side in self.sides:
            summary = checks.parse_loadgen_summary(engine.logs(side.loadgen))
            rb = readback.read_back(
                self.bootstrap,
                side,
                summary,
                poison=1,
                restarts=containers[side.worker].restarts,
            )
            self.judged(checks.judge_side(rb))
        declared = [d for d in live.declared_health() if d.service in self.services]
        loadgens = frozenset(s.loadgen for s in self.sides)
        self.judged(
            checks.judge_health(
                declared,
                live.observe(engine, declared),
                finished=loadgens,
                name="health after load",
            )
        )
        start = load_start + WARMUP_S
        end = load_start + self.options.duration - 5
        status, ratios, out, err = live.staging_report(
            self.prometheus.prometheus, start, end, 4 * SCRAPE_S
        )
        self.judged(checks.judge_staging(status, ratios, err or out))

    @property
    def _engine(self) -> Engine:
        assert self.engine is not None
        return self.engine

    def _down(self) -> None:
        if self.engine is None or self.options.keep:
            return
        with self.phase("down"):
            try:
                self.engine.compose("down", timeout=300)
                left = self.engine.leftovers()
            except EngineError as exc:
                self.judged(Check("down", False, "compose down failed", (str(exc),)))
                return
            busy = [p for p in self.ports.values() if _listening(p)]
            self.judged(checks.judge_down(Leftovers(**left, ports_in_use=busy)))

    # -- the end ---------------------------------------------------------------------

    def _status(self) -> int:
        failed = {c.name for c in self.results if not c.ok}
        if self.options.breaks:
            expected = BREAKS[self.options.breaks].fails
            if expected not in failed:
                self.print(f"break {self.options.breaks}: `{expected}` did not fail")
                return 4
            self.print(f"break {self.options.breaks}: `{expected}` failed, as it must")
        return 1 if failed else 0

    def _summary(self, total: float) -> None:
        self.print("== report")
        for image in self.images:
            self.print(f"   image {image.line()}")
        for check in self.results:
            for line in check.lines() if not check.ok else check.lines()[:1]:
                self.print(f"   {line}")
        times = ", ".join(f"{k} {v:.0f} s" for k, v in self.phases.items())
        self.print(f"   phases: {times}; total {total:.0f} s")
        if self.options.out is not None:
            self.options.out.mkdir(parents=True, exist_ok=True)
            (self.options.out / "report.json").write_text(
                json.dumps(self._json(total), indent=2)
            )

    def _json(self, total: float) -> dict[str, Any]:
        return {
            "engine": self.engine.name if self.engine else None,
            "options": {k: str(v) for k, v in vars(self.options).items()},
            "images": [vars(i) for i in self.images],
            "checks": [vars(c) for c in self.results],
            "phases_s": self.phases,
            "total_s": total,
        }


def _services() -> list[str]:
    return list(compose_services())


def _scrape_targets() -> int:
    """How many targets deploy/prometheus/prometheus.yml scrapes."""
    jobs = load_yaml(PROMETHEUS_CONFIG)["scrape_configs"]
    return sum(len(c["targets"]) for job in jobs for c in job["static_configs"])


def _image_check(engine: Engine) -> Check:
    """`image`: the built image kept the Dockerfile's HEALTHCHECK."""
    image = str(compose_services()["worker-a"]["image"])
    test = engine.image_healthcheck(image)
    ok = bool(test) and "/healthz" in " ".join(test)
    detail = f"{image} built; HEALTHCHECK {'kept' if ok else 'missing'}"
    return Check("image", ok, detail)


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0
