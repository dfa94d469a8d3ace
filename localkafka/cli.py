"""`codec-kafka` (also `python -m localkafka`): the local broker's command line.

Commands::

    codec-kafka resolve | version | --version
    codec-kafka start [--port P] [--data-dir D] [--partitions N] [--heap H] [--foreground]
    codec-kafka stop [--data-dir D]
    codec-kafka topics create NAME [NAME...] [--partitions N] [--topic-config K=V]...
    codec-kafka topics list [--internal]
    codec-kafka topics delete NAME [NAME...]
    codec-kafka registry resolve | start [--port P] [--data-dir D] | stop [--data-dir D]

The `topics` commands take what every tool takes to reach a cluster: `--config FILE`
(its `[kafka]` table), `KAFKA_*`, `--bootstrap-servers` and the other `[kafka]` flags,
`-X`, `--print-config`. Every error is one line on stderr: exit status 2 for a usage
or configuration error, 1 for any other.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType
from typing import Final, NoReturn

from confluent_kafka import KafkaException

from localkafka.broker import LocalKafka
from localkafka.classpath import kafka_version, resolve_classpath
from localkafka.process import port_open, stop_process_group
from localkafka.registry.commands import add_registry_commands, run_registry
from localkafka.security import CLIENT_FILE, MECHANISM, SECURITY_MODES
from localkafka.state import (
    DEFAULT_DATA_DIR,
    STATE_FILE,
    BrokerState,
    clear_state,
    read_state,
    write_state,
)
from localkafka.topics import (
    CONNECT_TIMEOUT_S,
    TOOL,
    TopicAdmin,
    TopicsCommandSettings,
    cluster,
    kafka_error_text,
)
from schemas.errors import ConfigError, LocalKafkaError
from service import __version__
from service.kafka.security_check import check_access
from service.settings.cli_flags import KAFKA_FLAGS, add_common, add_flags, overrides

PROG: Final = "codec-kafka"
DEFAULT_PARTITIONS: Final = 4
"""The project's default partition count (DESIGN: `--partitions N`, default 4)."""


class _Parser(argparse.ArgumentParser):
    """argparse whose usage errors are one line too, like every other error here."""

    def error(self, message: str) -> NoReturn:
        """Prints ``PROG: error: message`` and exits with status 2."""
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value


def _port(text: str) -> int:
    if (value := _positive(text)) > 65535:
        raise argparse.ArgumentTypeError(f"not a TCP port: {value}")
    return value


def _config_entry(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def _add_data_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path(DEFAULT_DATA_DIR),
        help=f"data, config, logs and {STATE_FILE} (default: {DEFAULT_DATA_DIR}/)",
    )


def _add_topics(sub: argparse._SubParsersAction[_Parser], version: str) -> None:
    where = (
        "The cluster, as every tool finds it: the [kafka] flags, else KAFKA_* "
        "variables, else [kafka] in --config FILE; with no address in them, the "
        "broker 'start' left running in --data-dir (with the client settings it "
        "recorded), else 127.0.0.1:9092."
    )
    topics = sub.add_parser(
        "topics", help="create, list or delete topics", description=where
    )
    actions = topics.add_subparsers(dest="action", required=True, metavar="ACTION")
    create = actions.add_parser(
        "create", help="create topics (one with the same partition count is kept)"
    )
    create.add_argument("names", nargs="+", metavar="NAME", help="topics to create")
    create.add_argument(
        "--partitions",
        type=_positive,
        default=DEFAULT_PARTITIONS,
        help=f"partitions of each topic (default: {DEFAULT_PARTITIONS})",
    )
    create.add_argument(
        "--topic-config",
        type=_config_entry,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a topic setting, repeatable, e.g. retention.ms=60000; set on a topic "
        "that exists already (default: none)",
    )
    listing = actions.add_parser("list", help="print the topic names, one a line")
    listing.add_argument(
        "--internal", action="store_true", help="include Kafka's own __* topics"
    )
    delete = actions.add_parser("delete", help="delete topics (a missing one is fine)")
    delete.add_argument("names", nargs="+", metavar="NAME", help="topics to delete")
    for parser in (create, listing, delete):
        parser.description = where
        add_common(parser, TOOL, version=version)
        add_flags(parser, KAFKA_FLAGS, TopicsCommandSettings, TOOL)
        _add_data_dir(parser)


def versions() -> str:
    """Both versions, labelled: `codec-ab 0.1.0, Kafka 4.1.2` (`version`, `--version`)."""
    try:
        kafka = kafka_version()
    except LocalKafkaError:
        kafka = "unknown (no pom)"
    return f"codec-ab {__version__}, Kafka {kafka}"


def build_parser() -> argparse.ArgumentParser:
    """Returns the parser of every command and flag (``--help`` shows defaults)."""
    parser = _Parser(
        prog=PROG,
        description="Run a local single-node KRaft Kafka broker without Docker; "
        "create, list and delete topics on any cluster.",
    )
    version = versions()
    parser.add_argument(
        "--version",
        action="version",
        version=version,
        help="print the project's and the pinned Kafka's versions, then exit",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    sub.add_parser("resolve", help="resolve the broker jars with Maven, then exit")
    sub.add_parser(
        "version", help="print the project's and the pinned Kafka's versions"
    )
    start = sub.add_parser("start", help="start a broker, print its bootstrap address")
    stop = sub.add_parser("stop", help="stop the broker that 'start' left running")
    for cmd in (start, stop):
        _add_data_dir(cmd)
    start.add_argument(
        "--port", type=_port, help="broker port on 127.0.0.1 (default: a free one)"
    )
    start.add_argument(
        "--partitions",
        type=_positive,
        default=DEFAULT_PARTITIONS,
        help=f"num.partitions (default: {DEFAULT_PARTITIONS})",
    )
    start.add_argument("--heap", default="1g", help="JVM heap (default: 1g)")
    start.add_argument(
        "--security",
        choices=SECURITY_MODES,
        default="plaintext",
        help="the client listener: plaintext, ssl (TLS), sasl_plaintext or sasl_ssl "
        f"({MECHANISM}), mtls (TLS with client certificates); other than "
        f"plaintext, a throw-away CA is made and the client settings are written to "
        f"<data-dir>/{CLIENT_FILE} (mode 0600) for --config (default: plaintext)",
    )
    start.add_argument(
        "--timeout", type=float, default=60.0, help="start deadline in s (default: 60)"
    )
    start.add_argument(
        "--foreground",
        action="store_true",
        help="stay attached until SIGINT/SIGTERM, then stop the broker",
    )
    _add_topics(sub, version)
    add_registry_commands(sub)
    return parser


_STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)
_STOP_TIMEOUT_S: Final = 20.0
"""`stop`: how long the JVM gets after SIGTERM before SIGKILL."""
_PORT_CLOSE_S: Final = 5.0
"""`stop`: how long the exited JVM's listener may take to close."""


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _start(args: argparse.Namespace) -> int:
    data_dir: Path = args.data_dir.resolve()
    if (running := read_state(data_dir)) is not None:
        if (mode := running.get("security", "plaintext")) != args.security:
            raise LocalKafkaError(f"a {mode} broker runs in {data_dir}: stop it first")
        print(f"{PROG}: already running, pid {running['pid']}", file=sys.stderr)
        print(running["bootstrap"], flush=True)
        return 0
    kafka = LocalKafka(
        data_dir,
        args.port,
        partitions_default=args.partitions,
        heap=args.heap,
        detached=not args.foreground,
        security=args.security,
    )
    if args.foreground:
        # before anything is printed: a SIGTERM right after start must stop cleanly
        signal.signal(signal.SIGTERM, _interrupt)
    handed_off = False  # detached and announced: the broker outlives this process
    # one try from start to exit: a signal lands between two statements, any of them
    try:
        bootstrap = kafka.start(timeout=args.timeout)
        if (pid := kafka.pid) is None:
            raise LocalKafkaError("the broker exited right after it started")
        state = BrokerState(pid=pid, bootstrap=bootstrap, version=kafka_version())
        state["security"] = args.security
        if (client := kafka.client_file) is not None:
            state["client_config"] = str(client)
        write_state(data_dir, state)
        print(bootstrap, flush=True)
        if client is not None:  # stdout's first line stays the address
            print(
                f"{PROG}: {args.security} listener; client settings: {client} "
                "(every tool uses them with this broker; elsewhere: --config "
                f"{client})",
                file=sys.stderr,
                flush=True,
            )
        if not args.foreground:
            handed_off = True
            return 0
        code = kafka.wait()
        print(f"{PROG}: broker exited with code {code}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        if not handed_off:
            # a second Ctrl-C or SIGTERM must not cut the stop short (it is bounded:
            # SIGTERM, then SIGKILL after a timeout)
            held = {sig: signal.signal(sig, signal.SIG_IGN) for sig in _STOP_SIGNALS}
            try:
                kafka.stop()
                clear_state(data_dir)
            finally:
                for sig, handler in held.items():
                    signal.signal(sig, handler)


def _stop(args: argparse.Namespace) -> int:
    data_dir: Path = args.data_dir.resolve()
    if (state := read_state(data_dir)) is None:
        print(f"{PROG}: no broker running in {data_dir}", file=sys.stderr)
        clear_state(data_dir)
        return 0
    # bounded: SIGTERM, 20 s, SIGKILL, 10 s; then its port must be closed too
    stop_process_group(state["pid"], timeout=_STOP_TIMEOUT_S)
    host, _, port = state["bootstrap"].rpartition(":")
    deadline = time.monotonic() + _PORT_CLOSE_S
    while port_open(int(port), host) and time.monotonic() < deadline:
        time.sleep(0.1)
    clear_state(data_dir)
    print(
        f"stopped the broker at {state['bootstrap']} (pid {state['pid']}, {data_dir})"
    )
    return 0


def _resolve(args: argparse.Namespace) -> int:
    jars = resolve_classpath(force=True).split(os.pathsep)
    print(f"kafka {kafka_version()}: {len(jars)} jars resolved")
    return 0


def _version(args: argparse.Namespace) -> int:
    print(versions())
    return 0


def _topics(args: argparse.Namespace) -> int:
    if args.config is not None and "=" in args.config.name and not args.config.exists():
        print(  # the topic setting's flag before --config meant a file everywhere
            f"{PROG}: error: --config takes a TOML file (its [kafka] table); a topic "
            f"setting is --topic-config {args.config}",
            file=sys.stderr,
        )
        return 2
    try:
        kafka = cluster(
            flags=overrides(args, KAFKA_FLAGS),
            flag_names={f.path: f.flag for f in KAFKA_FLAGS},
            config_file=args.config,
            data_dir=args.data_dir,
            environ=os.environ,
        )
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.print_config:
        print(json.dumps({"kafka": kafka.masked()}, indent=2))
        return 0
    conf = kafka.librdkafka(plaintext_secrets=True)
    try:
        check_access(conf, refused=LocalKafkaError)  # a refused login: one line, now
    except ConfigError as exc:  # a key or keystore the client cannot open
        print(exc, file=sys.stderr)
        return 2
    admin = TopicAdmin(conf, connect_timeout=CONNECT_TIMEOUT_S, silent=True)
    if args.action == "list":
        for name in admin.names(internal=args.internal):
            print(name)
        return 0
    for name in args.names:
        try:
            if args.action == "create":
                config = dict(args.topic_config)
                made = admin.create(name, args.partitions, config=config)
                if made:
                    print(f"created {name}", flush=True)
                elif config:  # an existing topic gets the settings asked for
                    admin.set_config(name, config)
                    shown = ", ".join(f"{k}={v}" for k, v in config.items())
                    print(f"exists {name}: set {shown}", flush=True)
                else:
                    print(f"exists {name}", flush=True)
            elif admin.delete(name):
                print(f"deleted {name}", flush=True)
            else:
                print(f"{PROG}: no topic {name!r} to delete", file=sys.stderr)
        except KafkaException as exc:
            what = f"cannot {args.action} topic {name!r}"
            raise LocalKafkaError(f"{what}: {kafka_error_text(exc)}") from None
    return 0


_COMMANDS: Final[dict[str, Callable[[argparse.Namespace], int]]] = {
    "resolve": _resolve,
    "version": _version,
    "start": _start,
    "stop": _stop,
    "topics": _topics,
    "registry": run_registry,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Runs one ``codec-kafka`` command; returns its exit status.

    Args:
        argv: The arguments after the program name (default: ``sys.argv[1:]``).
    """
    args = build_parser().parse_args(argv)
    try:
        return _COMMANDS[args.command](args)
    except (LocalKafkaError, TimeoutError) as exc:
        # the first line says what failed and where to look; a log tail may follow
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        print(f"{PROG}: error: {first}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130  # 128 + SIGINT, what a shell reports for Ctrl-C
