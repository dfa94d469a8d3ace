"""One settings system for every tool: TOML sections, environment, flags, clear errors.

One TOML file may hold all of it (`--config FILE` on every command):

```toml
[kafka]            # the connection, shared (service.kafka.connection.KafkaConnection)
bootstrap_servers = "127.0.0.1:9092"
[registry]         # the schema registry, shared by the tools that frame values
url = "http://127.0.0.1:8081"
[worker.codec]     # codec-worker: nested sections
name = "msgspec-msgpack"
[loadgen]          # codec-loadgen: flat
rate = 40000
[ab]               # codec-ab
codecs = ["json+pydantic", "msgspec-msgpack"]
```

A tool reads `[kafka]` (and `[registry]` if it takes one) and its own section and
ignores the other tools' sections.
The environment follows the same paths: the section's name in capitals, `_`, then
the keys joined by `__`: `KAFKA_BOOTSTRAP_SERVERS`, `WORKER_CODEC__NAME`,
`LOADGEN_RATE`, `AB_CODECS`. Values that start with `{` or `[` are read as JSON.
Precedence: defaults < TOML < environment < flags. Unknown keys and stray
`WORKER_*`/`LOADGEN_*`/`AB_*` variables are errors, with the closest known name when
one is close (`KAFKA_*` variables that name no field are left alone: Kafka's own
scripts use that prefix). Every error is one line per problem naming the setting,
the value, where it came from and what is allowed; the tools print it and exit with
status 2 before touching Kafka.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final, TypeVar, get_args, get_origin

from pydantic import BaseModel, ValidationError

from schemas.errors import ConfigError
from service.kafka.connection import MASK, KafkaConnection, is_secret_key

SECTIONS: Final = ("kafka", "registry", "worker", "loadgen", "ab")
"""The TOML file's top-level tables: the shared connections, then one per tool."""

KAFKA: Final = "kafka"
REGISTRY: Final = "registry"
SHARED: Final = (KAFKA, REGISTRY)
"""Sections every tool that has the field reads from the top level of the file."""

M = TypeVar("M", bound=BaseModel)
Path_ = tuple[str, ...]
"""A setting's location in the tool's root model, e.g. ("codec", "name")."""


def env_name(tool: str, path: Path_) -> str:
    """The environment variable of a setting, e.g. `WORKER_CODEC__NAME`."""
    if path[0] in SHARED:
        return f"{path[0].upper()}_" + "__".join(path[1:]).upper()
    return f"{tool.upper()}_" + "__".join(path).upper()


def dotted(tool: str, path: Path_) -> str:
    """A setting's name as the TOML file spells it, e.g. `worker.codec.name`."""
    return ".".join(path if path[0] in SHARED else (tool, *path))


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The BaseModel inside a field's annotation (`X`, `X | None`), if any."""
    candidates = get_args(annotation) if get_origin(annotation) else (annotation,)
    for candidate in candidates:
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def field_paths(model: type[BaseModel], prefix: Path_ = ()) -> list[Path_]:
    """Every leaf setting of `model` (nested models expanded), in declared order."""
    out: list[Path_] = []
    for name, info in model.model_fields.items():
        key = info.alias or name
        nested = _model_of(info.annotation)
        out += field_paths(nested, (*prefix, key)) if nested else [(*prefix, key)]
    return out


class _Tree:
    """Nested values gathered from the sources, with where each leaf came from."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.origins: dict[Path_, str] = {}

    def set(self, path: Path_, value: Any, origin: str) -> None:
        node = self.values
        for key in path[:-1]:
            child = node.get(key)
            if not isinstance(child, dict):
                child = node[key] = {}
            node = child
        node[path[-1]] = value
        self.origins[path] = origin

    def merge(self, data: Mapping[str, Any], origin: str, prefix: Path_ = ()) -> None:
        for key, value in data.items():
            path = (*prefix, key)
            if isinstance(value, Mapping) and key != "extra":
                self.merge(value, origin, path)
            else:
                self.set(path, value, origin)

    def origin(self, loc: Path_) -> str:
        for end in range(len(loc), 0, -1):
            if (found := self.origins.get(loc[:end])) is not None:
                return found
        return ""


def _read_toml(
    path: Path, tool: str
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The `[kafka]`, `[registry]` and the tool's own tables of a TOML file."""
    if not path.is_file():
        raise ConfigError(f"config error: --config {str(path)!r}: no such file")
    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config error: {path}: {exc}") from None
    except OSError as exc:  # unreadable: permissions, an I/O error
        why = exc.strerror or type(exc).__name__
        raise ConfigError(
            f"config error: --config {str(path)!r}: cannot read: {why}"
        ) from None
    for section, value in data.items():
        if section not in SECTIONS or not isinstance(value, dict):
            raise ConfigError(
                f"config error: {path}: unknown section [{section}] "
                f"(sections: {', '.join(f'[{s}]' for s in SECTIONS)})"
            )
    own = data.get(tool, {})
    for shared in SHARED:
        if shared in own:
            raise ConfigError(
                f"config error: {path}: [{tool}.{shared}]: its settings go in "
                f"[{shared}]"
            )
    return data.get(KAFKA, {}), data.get(REGISTRY, {}), own


def _env_value(raw: str) -> Any:
    if raw.lstrip()[:1] in ("{", "["):
        try:
            return json.loads(raw)
        except ValueError:
            return raw  # validation names the variable and the bad value
    return raw


def _read_env(
    model: type[BaseModel], tool: str, environ: Mapping[str, str], tree: _Tree
) -> None:
    paths = {env_name(tool, p): p for p in field_paths(model)}
    prefix = f"{tool.upper()}_"
    for name in sorted(environ):
        path = paths.get(name)
        if path is not None:
            tree.set(path, _env_value(environ[name]), f"env {name}")
        elif name.startswith(prefix) and tool in SECTIONS:  # `topics`: no section
            close = difflib.get_close_matches(name, paths, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ConfigError(
                f"config error: environment variable {name} names no setting{hint}; "
                f"{tool} settings are listed by its --help"
            )


def _shown(path: Path_, value: Any) -> str:
    if path[-1:] == ("extra",) and isinstance(value, dict):
        return "{keys: " + ", ".join(sorted(map(str, value))) + "}"
    if any(is_secret_key(str(p)) for p in path):
        return MASK
    text = _URL_SECRET.sub(rf"\1{MASK}@", repr(value))
    return text if len(text) <= 80 else text[:77] + "..."


_URL_SECRET: Final = re.compile(r"(://[^/:@\s'\"]*:)[^@/\s'\"]*@")
"""The password of a URL's `user:password@` (a registry URL with its key and
secret), masked wherever a value is shown."""


def _siblings(model: type[BaseModel], parent: Path_) -> list[str]:
    """The keys a section of `model` takes (its fields' names), [] past a leaf."""
    node = model
    for key in parent:
        fields = node.model_fields.items()
        info = next((f for name, f in fields if key in (name, f.alias)), None)
        child = None if info is None else _model_of(info.annotation)
        if child is None:
            return []
        node = child
    return [info.alias or name for name, info in node.model_fields.items()]


def _did_you_mean(model: type[BaseModel] | None, tool: str, loc: Path_) -> str:
    """`: did you mean kafka.sasl_password?` for a misspelt key, else ""."""
    if model is None:
        return ""
    close = difflib.get_close_matches(loc[-1], _siblings(model, loc[:-1]), n=1)
    return f": did you mean {dotted(tool, (*loc[:-1], close[0]))}?" if close else ""


def format_errors(
    exc: ValidationError,
    tool: str,
    tree: _Tree,
    model: type[BaseModel] | None = None,
) -> str:
    """One line per problem: the setting, the value, its source, what is allowed
    (for an unknown key of `model`, the closest known one, as for a variable)."""
    lines = []
    for err in exc.errors(include_url=False):
        loc = tuple(str(p) for p in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        if not loc:  # a rule across several settings
            lines.append(f"config error: {tool}: {msg}")
            continue
        where = tree.origin(loc)
        source = f" ({where})" if where else ""
        if err["type"] == "extra_forbidden":
            hint = _did_you_mean(model, tool, loc)
            name = dotted(tool, loc)
            lines.append(f"config error: unknown setting {name}{source}{hint}")
        else:
            shown = _shown(loc, err.get("input"))
            lines.append(f"config error: {dotted(tool, loc)} = {shown}{source}: {msg}")
    return "\n".join(lines)


def load(
    model: type[M],
    tool: str,
    *,
    flags: Mapping[str, Any] | None = None,
    flag_names: Mapping[Path_, str] | None = None,
    config_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
    base: Mapping[str, Any] | None = None,
    base_origin: str = "",
) -> M:
    """Build `model` (a tool's root settings, with a `kafka` field) from every source.

    The `kafka` connection built also records how the command line gave it
    (`--config FILE`, the flags set), which `KafkaConnection.arguments` repeats in
    the commands a tool prints as hints.

    Args:
        model: the tool's root settings model.
        tool: its section name: `worker`, `loadgen`, `ab` (or `topics`: `[kafka]`
            only).
        flags: nested values from the command line (highest precedence).
        flag_names: the flag of each settings path, named in error messages.
        config_file: the TOML file (`--config`).
        environ: the environment (default: `os.environ`).
        base: nested values under every source (lowest precedence but the
            defaults), e.g. the client settings a local broker recorded.
        base_origin: where `base` came from, named in error messages.

    Raises:
        ConfigError: one line per problem (see `format_errors`).
    """
    tree = _Tree()
    if base:
        tree.merge(base, base_origin or "base")
    given_file = None
    if config_file is not None:
        kafka, registry, own = _read_toml(config_file, tool)
        tree.merge({KAFKA: kafka}, f"{config_file} [kafka]")
        if REGISTRY in model.model_fields:  # the other tools leave it alone
            tree.merge({REGISTRY: registry}, f"{config_file} [registry]")
        tree.merge(own, f"{config_file} [{tool}]")
        given_file = config_file if kafka else None
    _read_env(model, tool, os.environ if environ is None else environ, tree)
    names = flag_names or {}
    for path, value in _flatten(flags or {}):
        tree.set(path, value, f"flag {names.get(path, '/'.join(path))}")
    try:
        settings = model.model_validate(tree.values)
    except ValidationError as exc:
        raise ConfigError(format_errors(exc, tool, tree, model)) from None
    if isinstance(connection := getattr(settings, KAFKA, None), KafkaConnection):
        flagged = [
            path[1]
            for path, origin in tree.origins.items()
            if path[0] == KAFKA and len(path) > 1 and origin.startswith("flag ")
        ]
        connection.given(config_file=given_file, flagged=flagged)
    return settings


def loader(model: type[M], tool: str) -> Callable[..., M]:
    """`load` bound to one tool: `load_settings(overrides=None, **sources)`."""

    def load_settings(overrides: Mapping[str, Any] | None = None, **sources: Any) -> M:
        return load(model, tool, flags=overrides, **sources)

    return load_settings


def _flatten(data: Mapping[str, Any], prefix: Path_ = ()) -> list[tuple[Path_, Any]]:
    out: list[tuple[Path_, Any]] = []
    for key, value in data.items():
        if isinstance(value, Mapping) and key != "extra":
            out += _flatten(value, (*prefix, key))
        else:
            out.append(((*prefix, key), value))
    return out


def printable(settings: BaseModel, tool: str) -> dict[str, Any]:
    """The effective settings as `{"kafka": ..., tool: ...}`, every secret masked."""
    data = settings.model_dump(mode="json", by_alias=True)
    kafka = getattr(settings, KAFKA)
    assert isinstance(kafka, KafkaConnection)  # noqa: S101  # every root model has one
    data.pop(KAFKA)
    shown = {KAFKA: kafka.masked()}
    if REGISTRY in data:  # SecretStr dumps masked
        shown[REGISTRY] = data.pop(REGISTRY)
    return {**shown, tool: data}
