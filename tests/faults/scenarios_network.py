"""Network faults, the worker in a network namespace: D12 partition, D13 netem.

The namespace is joined to this machine by a veth pair (10.231.0.1 here, 10.231.0.2
inside); the broker gets a second listener on the host end, which it advertises to
clients that come that way. Every address is on this machine. Needs root, `ip` and
`tc`; a scenario is SKIPPED, with the reason, where they are missing or refused.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from typing import Final, Self

from abrunner.lab import worker_probe
from service.lifecycle.child_processes import free_ports
from tests.faults.harness import WAIT_S, Env, FaultBroker, Outcome
from tests.faults.observe import worker_lines
from tests.faults.run import Run

NS: Final = "faults-w1"
HOST_IF, NS_IF = "veth-fh", "veth-fn"
HOST_IP, NS_IP = "10.231.0.1", "10.231.0.2"
RATE: Final = 300
DOWN_S: Final = 20.0
"""Link down for twice the session timeout (RELIABILITY D12)."""
NETEM: Final = ("delay", "100ms", "loss", "5%", "rate", "3mbit")
"""RELIABILITY D13 (Trogdor's DegradedNetworkFault): 300 msg/s of ~1 KB is
2.4 Mbit/s each way, under the 3 Mbit/s cap."""
_MB: Final = 1024 * 1024


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(args), capture_output=True, text=True, timeout=20, check=False
    )


def unavailable() -> str | None:
    """Why namespaces cannot be used here, or None when they can."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, tc)"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"no `{tool}` command"
    probe = f"{NS}-probe"
    done = _run("ip", "netns", "add", probe)
    _run("ip", "netns", "del", probe)
    if done.returncode != 0:
        return f"`ip netns add` refused: {done.stderr.strip()}"
    return None


class Netns:
    """The namespace, its veth pair and addresses; removed on exit."""

    prefix: Final = ("ip", "netns", "exec", NS)

    def __enter__(self) -> Self:
        self._remove()  # leftovers of an interrupted run
        steps = [
            ("ip", "netns", "add", NS),
            ("ip", "link", "add", HOST_IF, "type", "veth", "peer", "name", NS_IF),
            ("ip", "link", "set", NS_IF, "netns", NS),
            ("ip", "addr", "add", f"{HOST_IP}/30", "dev", HOST_IF),
            ("ip", "link", "set", HOST_IF, "up"),
            ("ip", "-n", NS, "addr", "add", f"{NS_IP}/30", "dev", NS_IF),
            ("ip", "-n", NS, "link", "set", NS_IF, "up"),
            ("ip", "-n", NS, "link", "set", "lo", "up"),
        ]
        for step in steps:
            done = _run(*step)
            if done.returncode != 0:
                self._remove()
                raise RuntimeError(f"{' '.join(step)}: {done.stderr.strip()}")
        return self

    def link(self, up: bool) -> None:
        """Cut or restore the worker's only path to the broker."""
        _run("ip", "link", "set", HOST_IF, "up" if up else "down")

    def degrade(self, netem: Sequence[str]) -> None:
        """Apply `tc netem` to both ends of the pair (each direction)."""
        _run("tc", "qdisc", "add", "dev", HOST_IF, "root", "netem", *netem)
        _run(*self.prefix, "tc", "qdisc", "add", "dev", NS_IF, "root", "netem", *netem)

    def clear(self) -> None:
        """Remove the degradation."""
        _run("tc", "qdisc", "del", "dev", HOST_IF, "root")
        _run(*self.prefix, "tc", "qdisc", "del", "dev", NS_IF, "root")

    def _remove(self) -> None:
        _run("ip", "netns", "del", NS)
        _run("ip", "link", "del", HOST_IF)

    def __exit__(self, *exc: object) -> None:
        self._remove()


def _listeners(port: int, ns_port: int, controller: int) -> dict[str, str]:
    """server.properties for a second listener (NETNS) on the host end of the pair."""
    return {
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller},"
        f"NETNS://{HOST_IP}:{ns_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port},NETNS://{HOST_IP}:{ns_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,"
        "NETNS:PLAINTEXT",
        "controller.quorum.voters": f"1@127.0.0.1:{controller}",
    }


def _in_namespace(env: Env, outcome: Outcome, fault: str, seconds: int) -> Outcome:
    """A worker in the namespace at `RATE` msg/s while `fault` runs on its link."""
    if reason := unavailable():
        outcome.skip(reason)
        return outcome
    port, ns_port, controller = free_ports(3)
    overrides = _listeners(port, ns_port, controller)
    root = env.root / f"broker-{outcome.id.lower()}"
    with (
        Netns() as net,
        FaultBroker(root, port=port, overrides=overrides) as broker,
        Run(env, outcome, bootstrap=broker.bootstrap) as run,
    ):
        worker = run.worker(
            prefix=Netns.prefix, host=NS_IP, bootstrap=f"{HOST_IP}:{ns_port}"
        )
        assert worker.proc is not None
        base = worker_probe.rss_bytes(worker.proc.pid)
        run.produce(rate=RATE, count=RATE * seconds)
        worker.wait_for(3 * RATE, timeout=WAIT_S)
        start = time.monotonic()
        run.mark(fault)
        if fault == "link down":
            net.link(False)
            time.sleep(DOWN_S)
            net.link(True)
        else:
            net.degrade(NETEM)
            time.sleep(seconds - 15)
            peak = worker_probe.rss_bytes(worker.proc.pid)
            p99 = worker.scrape()
            net.clear()
            outcome.figures["rss_growth_mb"] = round((peak - base) / _MB, 1)
            if p99 is not None:
                q = p99.histogram("worker_e2e_latency_seconds").quantile(0.99)
                outcome.figures["e2e_p99_s"] = "n/a" if q is None else round(q, 2)
            if peak - base > 64 * _MB:
                outcome.fail(f"RSS grew {(peak - base) / _MB:.0f} MiB under netem")
        run.fault_ends.append(run.mark("network healed"))
        run.wait_drained(120)
        run.dup_bound += run.redo_faults(worker, [start])
        if not worker.alive():
            outcome.fail(f"the worker exited ({worker.exit_code()}) over the fault")
        run.finish()
        lost = sum(
            1
            for line in worker_lines(worker.log_path)
            if line.get("event") == "partitions_lost"
        )
        outcome.figures["partitions_lost_events"] = lost
        if fault != "link down" and lost:
            outcome.fail("partitions lost under a degraded (not cut) network")
    return outcome


def d12_network_partition(env: Env) -> Outcome:
    """The worker's link to the broker goes down for 20 s (2 x session timeout)."""
    outcome = Outcome(
        "D12", f"Network partition worker-broker: link down {DOWN_S:.0f} s"
    )
    return _in_namespace(env, outcome, "link down", 45)


def d13_degraded_network(env: Env) -> Outcome:
    """netem delay 100 ms, loss 5 %, 3 Mbit/s on the worker's link for a minute."""
    seconds = 30 if env.fast else 75
    outcome = Outcome("D13", f"Degraded network: netem {' '.join(NETEM)}")
    return _in_namespace(env, outcome, "netem", seconds)
