"""Command-line flags over the settings system: one shape for every tool.

Each tool declares its flags as `Flag(flag, path, help)` rows; this module adds them
to an argparse parser with their default and environment variable in the help,
turns the parsed values into the nested overrides `service.settings.sources.load` takes,
and adds what every command has: `--config`, `--print-config`, `--version`, `-X`
and the `[kafka]` connection flags.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from schemas.errors import ConfigError
from service import __version__
from service.kafka.connection import is_secret_key
from service.settings.sources import (
    KAFKA,
    SECTIONS,
    Path_,
    env_name,
    load,
    printable,
)

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Flag:
    """One command-line flag bound to a settings path.

    Attributes:
        flag: e.g. `--batch-size`.
        path: the setting, e.g. `("processing", "batch_size")`.
        help: what it does (the default and variable are appended).
        type: converts the flag's text; validation happens in the model.
        boolean: a `--x/--no-x` switch instead of a value.
        many: repeatable; the values make a list.
        default: the default as shown in `--help` when the field's own is not telling.
    """

    flag: str
    path: Path_
    help: str
    type: Callable[[str], Any] = str
    boolean: bool = False
    default: str | None = None
    many: bool = False


KAFKA_FLAGS: Final = (
    Flag(
        "--bootstrap-servers",
        (KAFKA, "bootstrap_servers"),
        "Kafka bootstrap servers",
        default="the broker `codec-kafka start` recorded, else 127.0.0.1:9092",
    ),
    Flag(
        "--security-protocol",
        (KAFKA, "security_protocol"),
        "PLAINTEXT|SSL|SASL_PLAINTEXT|SASL_SSL",
    ),
    Flag(
        "--sasl-mechanism",
        (KAFKA, "sasl_mechanism"),
        "PLAIN|SCRAM-SHA-256|SCRAM-SHA-512|OAUTHBEARER|GSSAPI",
    ),
    Flag("--sasl-username", (KAFKA, "sasl_username"), "SASL user name"),
    Flag("--ssl-ca-location", (KAFKA, "ssl_ca_location"), "CA certificate file"),
)
"""The `[kafka]` flags every tool takes (the password only from env or TOML)."""

REGISTRY_FLAGS: Final = (
    Flag(
        "--registry-url",
        ("registry", "url"),
        "schema registry URL (Confluent-compatible API) for --framing confluent",
        default="the registry `codec-kafka registry start` recorded",
    ),
    Flag("--registry-username", ("registry", "username"), "registry basic-auth user"),
    Flag("--registry-ca-file", ("registry", "ca_file"), "registry CA bundle (https)"),
)
"""The `[registry]` flags of the tools that frame values (the password only from
REGISTRY_PASSWORD or `[registry] password`)."""

_EXTRA: Final = "extra"


def default_of(model: type[BaseModel], path: Path_) -> Any:
    """The declared default of the setting at `path` ("unset" for None)."""
    node: type[BaseModel] = model
    for key in path[:-1]:
        annotation = _field(node, key).annotation
        assert isinstance(annotation, type)  # noqa: S101  # sections are plain models
        node = annotation
    info = _field(node, path[-1])
    value = info.default
    if value is PydanticUndefined and info.default_factory is not None:
        value = "computed"
    value = getattr(value, "value", value)  # SecretStr/Enum
    return "unset" if value is None else value


def _field(model: type[BaseModel], key: str) -> Any:
    for name, info in model.model_fields.items():
        if key in (name, info.alias):
            return info
    raise KeyError(key)


def add_flags(
    parser: argparse.ArgumentParser,
    flags: Sequence[Flag],
    model: type[BaseModel],
    tool: str,
) -> None:
    """Add `flags`; each help text states the default and the environment variable."""
    for f in flags:
        default = f.default if f.default is not None else default_of(model, f.path)
        text = f"{f.help} (default: {default}; env {env_name(tool, f.path)})"
        text = text.replace("%", "%%")
        dest = "/".join(f.path)
        if f.boolean:
            action = argparse.BooleanOptionalAction
            parser.add_argument(
                f.flag, dest=dest, default=None, action=action, help=text
            )
        else:
            parser.add_argument(
                f.flag,
                dest=dest,
                type=f.type,
                default=None,
                action="append" if f.many else "store",
                metavar=f.path[-1].upper(),
                help=text,
            )


def add_common(
    parser: argparse.ArgumentParser, tool: str, *, version: str | None = None
) -> None:
    """`--config`, `--print-config`, `--version`, `-X` and the `[kafka]` flags.

    Args:
        parser: The command's parser.
        tool: Its section (`worker`...); one of no section reads `[kafka]` alone.
        version: What `--version` prints (default: the program and its version).
    """
    own = f"[kafka] and [{tool}] are" if tool in SECTIONS else "[kafka] is"
    others = "the other tools'" if tool in SECTIONS else "the tools'"
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help=f"TOML file: {own} read, {others} sections ([worker], [loadgen], [ab]) "
        "left to them; any other section is refused",
    )
    parser.add_argument(
        "--print-config",
        action="store_true",
        help="print the effective settings (secrets masked) and exit",
    )
    parser.add_argument(
        "--version",
        action="version",
        version=version or f"{parser.prog} {__version__}",
    )
    parser.add_argument(
        "-X",
        dest=_EXTRA,
        action="append",
        metavar="KEY=VALUE",
        default=[],
        help="librdkafka setting passed through, repeatable (env KAFKA_EXTRA as a "
        "JSON object; secrets belong in the environment or --config, not here)",
    )


def overrides(args: argparse.Namespace, flags: Sequence[Flag]) -> dict[str, Any]:
    """The flags given on the command line as nested overrides (with `-X` pairs).

    Raises:
        ConfigError: a `-X` item is not KEY=VALUE.
    """
    tree: dict[str, Any] = {}
    for f in flags:
        value = getattr(args, "/".join(f.path), None)
        if value is not None:
            node = tree
            for key in f.path[:-1]:
                node = node.setdefault(key, {})
            node[f.path[-1]] = value
    extra: dict[str, str] = {}
    for item in getattr(args, _EXTRA, None) or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"config error: -X {item!r}: expected KEY=VALUE")
        if is_secret_key(key):
            print(
                f"warning: -X {key}=... puts a secret on the command line, where "
                "other local users can read it (ps); prefer the environment "
                "(KAFKA_SASL_PASSWORD, KAFKA_EXTRA) or [kafka] in --config",
                file=sys.stderr,
            )
        extra[key] = value
    if extra:
        tree.setdefault(KAFKA, {})[_EXTRA] = extra
    return tree


def command_parser(prog: str, description: str, tool: str) -> argparse.ArgumentParser:
    """A command's parser with what every command has (see `add_common`)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    add_common(parser, tool)
    return parser


def settings_or_status(
    model: type[M], tool: str, args: argparse.Namespace, flags: Sequence[Flag]
) -> M | int:
    """The command's settings, or its exit status when it has nothing more to do:
    2 after printing a configuration error, 0 after `--print-config`."""
    try:
        settings = load_from_args(model, tool, args, flags)
    except ConfigError as exc:
        print(exc, file=sys.stderr)  # one line per problem, never re-wrapped
        return 2
    if args.print_config:
        print_config(settings, tool)
        return 0
    return settings


def load_from_args(
    model: type[M],
    tool: str,
    args: argparse.Namespace,
    flags: Sequence[Flag],
    environ: Mapping[str, str] | None = None,
) -> M:
    """The tool's settings from its parsed command line, environment and `--config`.

    Raises:
        ConfigError: one line per problem.
    """
    return load(
        model,
        tool,
        flags=overrides(args, flags),
        flag_names={f.path: f.flag for f in flags},
        config_file=args.config,
        environ=environ,
    )


def print_config(settings: BaseModel, tool: str) -> None:
    """`--print-config`: the effective settings as JSON, secrets masked."""
    print(json.dumps(printable(settings, tool), indent=2))
