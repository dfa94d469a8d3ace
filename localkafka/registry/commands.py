"""``codec-kafka registry resolve|start|stop``: the local schema registry's commands.

``start`` runs Apicurio Registry detached (or ``--foreground``), prints its
Confluent-compatible URL on stdout and records it in ``<data-dir>/registry.json``,
where every tool finds it when no registry URL is given (the broker's data dir: one
``--data-dir`` finds both). ``stop`` stops the one ``start`` left running there.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import Any, Final

from localkafka.process import port_open, stop_process_group
from localkafka.registry.distribution import registry_version, resolve_registry
from localkafka.registry.server import LocalRegistry
from schemas.errors import LocalKafkaError
from service.kafka.broker_record import DEFAULT_DATA_DIR
from service.kafka.registry_record import (
    REGISTRY_STATE_FILE,
    RegistryState,
    clear_registry_state,
    read_registry_state,
    write_registry_state,
)

_PROG: Final = "codec-kafka registry"
_STOP_TIMEOUT_S: Final = 20.0
"""`stop`: how long the JVM gets after SIGTERM before SIGKILL."""


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"not a TCP port: {value}")
    return value


def add_registry_commands(sub: argparse._SubParsersAction[Any]) -> None:
    """Adds ``registry resolve|start|stop`` to ``codec-kafka``'s commands."""
    registry = sub.add_parser(
        "registry",
        help="run a local schema registry (Apicurio Registry, Confluent-compatible API)",
        description="A local Apicurio Registry, in memory, on 127.0.0.1: its "
        "Confluent-compatible URL is recorded in <data-dir>/"
        f"{REGISTRY_STATE_FILE}, where every tool finds it.",
    )
    actions = registry.add_subparsers(dest="action", required=True, metavar="ACTION")
    actions.add_parser("resolve", help="fetch and unpack the registry with Maven")
    start = actions.add_parser("start", help="start it, print its URL")
    stop = actions.add_parser("stop", help="stop the registry 'start' left running")
    for cmd in (start, stop):
        cmd.add_argument(
            "--data-dir",
            type=Path,
            default=Path(DEFAULT_DATA_DIR),
            help=f"logs and {REGISTRY_STATE_FILE}, beside the broker's state "
            f"(default: {DEFAULT_DATA_DIR}/)",
        )
    start.add_argument(
        "--port", type=_port, help="HTTP port on 127.0.0.1 (default: a free one)"
    )
    start.add_argument("--heap", default="512m", help="JVM heap (default: 512m)")
    start.add_argument(
        "--timeout", type=float, default=90.0, help="start deadline in s (default: 90)"
    )
    start.add_argument(
        "--foreground",
        action="store_true",
        help="stay attached until SIGINT/SIGTERM, then stop the registry",
    )


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _start(args: argparse.Namespace) -> int:
    data_dir: Path = args.data_dir.resolve()
    if (running := read_registry_state(data_dir)) is not None:
        print(f"{_PROG}: already running, pid {running['pid']}", file=sys.stderr)
        print(running["url"], flush=True)
        return 0
    data_dir.mkdir(parents=True, exist_ok=True)
    registry = LocalRegistry(
        data_dir, args.port, heap=args.heap, detached=not args.foreground
    )
    if args.foreground:
        signal.signal(signal.SIGTERM, _interrupt)
    handed_off = False
    try:
        url = registry.start(timeout=args.timeout)
        if (pid := registry.pid) is None:
            raise LocalKafkaError("the registry exited right after it started")
        state = RegistryState(pid=pid, url=url, version=registry_version())
        write_registry_state(data_dir, state)
        print(url, flush=True)
        if not args.foreground:
            handed_off = True
            return 0
        code = registry.wait()
        print(f"{_PROG}: the registry exited with code {code}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        if not handed_off:
            registry.stop()
            clear_registry_state(data_dir)


def _stop(args: argparse.Namespace) -> int:
    data_dir: Path = args.data_dir.resolve()
    if (state := read_registry_state(data_dir)) is None:
        print(f"{_PROG}: no registry running in {data_dir}", file=sys.stderr)
        clear_registry_state(data_dir)
        return 0
    stop_process_group(state["pid"], timeout=_STOP_TIMEOUT_S)
    host_port = state["url"].split("//", 1)[-1].split("/", 1)[0]
    host, _, port = host_port.rpartition(":")
    if port_open(int(port), host):
        raise LocalKafkaError(f"port {port} still answers after the registry stopped")
    clear_registry_state(data_dir)
    print(f"stopped the registry at {state['url']} (pid {state['pid']}, {data_dir})")
    return 0


def run_registry(args: argparse.Namespace) -> int:
    """Runs one ``codec-kafka registry`` action; returns its exit status.

    Raises:
        LocalKafkaError: It could not be fetched, started or stopped (one line first).
    """
    if args.action == "resolve":
        runner = resolve_registry()
        print(f"apicurio-registry {registry_version()}: {runner}")
        return 0
    return _start(args) if args.action == "start" else _stop(args)
