"""The site's reference pages, written from the code: commands, settings, metrics.

`mkdocs build` runs this module through mkdocs-gen-files (mkdocs.yml `plugins`), so
the pages under `reference/` are made anew at every build and cannot drift from the
parsers, the settings models and the metric objects they describe.
`tests/unit/test_docs_reference.py` checks that every flag, setting and metric has
its entry. Run by hand, it prints the pages: `python scripts/docs_reference.py cli`.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import importlib.util
import inspect
import itertools
import re
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, get_args

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("codec-ab", "abrunner.cli", "build_parser"),
    ("codec-ab staging", "abrunner.staging.cli", "build_parser"),
    ("codec-worker", "service.cli", "build_parser"),
    ("codec-loadgen", "loadgen.cli", "build_parser"),
    ("codec-loadgen record", "loadgen.cli", "build_record_parser"),
    ("codec-kafka", "localkafka.cli", "build_parser"),
    ("codec-schema", "schematool.cli", "build_parser"),
    ("codec-bench", "codecbench.cli", "build_parser"),
)
"""Every console script (pyproject.toml `[project.scripts]`) and subcommand that has
a parser of its own, with the function that builds it."""

SECTIONS: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    (
        "worker",
        "service.settings.worker",
        "Settings",
        ("codec-worker",),
    ),
    (
        "loadgen",
        "loadgen.config",
        "LoadgenSettings",
        ("codec-loadgen", "codec-loadgen record"),
    ),
    ("ab", "abrunner.config", "AbSettings", ("codec-ab", "codec-ab staging")),
)
"""The TOML file's tool sections: the root settings model and the commands reading it.
`[kafka]` is each model's `kafka` field, shared by every command."""


def parser_of(module: str, function: str) -> argparse.ArgumentParser:
    """The parser a command builds."""
    built = getattr(importlib.import_module(module), function)()
    assert isinstance(built, argparse.ArgumentParser)  # noqa: S101  (a parser builder)
    return built


def parsers() -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every command's parser, subcommands of argparse's kind included, in order."""
    for name, module, function in COMMANDS:
        yield from _walk(name, parser_of(module, function))


def _walk(
    name: str, parser: argparse.ArgumentParser
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, child in action.choices.items():
                yield from _walk(f"{name} {sub}", child)


def options(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """The parser's flags and positionals, without help and subcommand actions."""
    return [
        a
        for a in parser._actions
        if not isinstance(a, argparse._HelpAction | argparse._SubParsersAction)
    ]


def _cell(text: str) -> str:
    """Text for a table cell: one line; `|` escaped, or `/` inside a code span,
    where no escape holds (`a|b` reads `a/b`)."""
    parts = re.split(r"(`[^`]*`)", " ".join(text.split()))
    return "".join(
        p.replace("|", "/") if p.startswith("`") else p.replace("|", "\\|")
        for p in parts
    )


def _usage_name(action: argparse.Action) -> str:
    if action.option_strings:
        names = ", ".join(f"`{o}`" for o in action.option_strings)
        if action.nargs == 0 or isinstance(
            action, argparse.BooleanOptionalAction | argparse._StoreConstAction
        ):
            return names
        metavar = action.metavar or (action.dest or "").upper()
        return f"{names} `{metavar}`"
    return f"`{action.metavar or action.dest}`"


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help or action.help == argparse.SUPPRESS:
        return ""
    return _cell(parser._get_formatter()._expand_help(action))


def cli_page() -> str:
    """reference/cli.md: each command's description and every flag's help."""
    out = [
        "# Command-line reference",
        "",
        "Written from each command's own parser at every build of this site: what",
        "`--help` prints, as tables. Every flag that sets a configuration key names its",
        "environment variable and default; the [configuration reference](configuration.md)",
        "gives the TOML key of each.",
        "",
    ]
    for name, parser in parsers():
        out += [f"## `{name}`", ""]
        if parser.description:
            out += [_cell(parser.description), ""]
        out += [f"```text\n{parser.format_usage().strip()}\n```", ""]
        rows = [a for a in options(parser) if a.help != argparse.SUPPRESS]
        if rows:
            out += ["| flag | what it does |", "| --- | --- |"]
            out += [f"| {_usage_name(a)} | {_help(parser, a)} |" for a in rows]
            out.append("")
    return "\n".join(out)


def attribute_docs(model: type) -> dict[str, str]:
    """The docstrings written under a class's attributes, its bases' included."""
    docs: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        if cls is object or cls.__module__.startswith(("pydantic", "typing")):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
        except (OSError, TypeError):
            continue
        first = tree.body[0] if tree.body else None
        body = first.body if isinstance(first, ast.ClassDef) else []
        for before, after in itertools.pairwise(body):
            if (
                isinstance(before, ast.AnnAssign)
                and isinstance(before.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[before.target.id] = inspect.cleandoc(after.value.value)
    return docs


def _model_of(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def settings(
    model: type[BaseModel], prefix: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], Any, str]]:
    """Every leaf setting of a model: (its path of TOML keys, its field, its doc).

    A field holding a model is a nested table; its keys are walked (a model that is
    one of several types, e.g. `X | None`, is a leaf).
    """
    docs = attribute_docs(model)
    for name, field in model.model_fields.items():
        key = field.alias or name
        nested = field.annotation
        if isinstance(nested, type) and issubclass(nested, BaseModel):
            yield from settings(nested, (*prefix, key))
            continue
        doc = field.description or docs.get(name, "")
        yield (*prefix, key), field, doc


def _default(field: Any) -> str:
    if field.default_factory is not None:
        if field.default_factory not in (dict, list, set, tuple, frozenset):
            return "(computed)"  # e.g. the broker `codec-kafka start` recorded
        value = field.default_factory()
    elif field.default is PydanticUndefined:
        return "(required)"
    else:
        value = field.default
    if isinstance(value, BaseModel):
        return "(computed)"
    text = repr(value) if not isinstance(value, str) else f'"{value}"'
    text = " ".join(text.replace("|", " or ").split())
    return text if len(text) <= 60 else text[:57] + "..."


def _type(field: Any) -> str:
    annotation = field.annotation
    if isinstance(annotation, type) and not get_args(annotation):
        text = annotation.__name__
    else:
        text = repr(annotation)
    text = text.replace("typing.", "").replace("typing_extensions.", "")
    for noise in ("annotated_types.", "pydantic.types.", "pathlib."):
        text = text.replace(noise, "")
    # A code span in a table cell cannot hold `|`, escaped or not: say "or".
    text = " ".join(text.replace("|", " or ").split())
    return text if len(text) <= 70 else text[:67] + "..."


def flags_by_setting() -> dict[tuple[str, tuple[str, ...]], list[tuple[str, str]]]:
    """(command, settings path) -> the flags that set it and their help, from the
    parsers (a settings flag's dest is its path joined by `/`)."""
    found: dict[tuple[str, tuple[str, ...]], list[tuple[str, str]]] = {}
    for name, parser in parsers():
        for action in options(parser):
            if action.option_strings and action.dest:
                path = tuple(action.dest.split("/"))
                text = (action.help or "").split(" (default: ")[0]
                found.setdefault((name, path), []).append(
                    (action.option_strings[0], text.replace("%%", "%"))
                )
    return found


def _env(tool: str, path: tuple[str, ...]) -> str:
    from service.settings.sources import env_name

    return env_name(tool, path)


@dataclass(frozen=True)
class Key:
    """One configuration key as the reference shows it."""

    section: str
    key: str
    env: str
    flags: tuple[str, ...]
    type: str
    default: str
    doc: str


def config_keys() -> dict[str, tuple[tuple[str, ...], list[Key]]]:
    """Section -> (the commands reading it, its keys): the shared sections first."""
    from service.settings.sources import SHARED

    flags = flags_by_setting()
    shared: dict[str, tuple[list[str], list[Key]]] = {}
    own: dict[str, tuple[tuple[str, ...], list[Key]]] = {}
    for section, module, name, commands in SECTIONS:
        model = getattr(importlib.import_module(module), name)
        mine: list[Key] = []
        for path, field, doc in settings(model):
            top = path[0] if path[0] in SHARED else section
            given = {
                flag: text
                for (command, p), found in flags.items()
                for flag, text in found
                if p == path and (command in commands or top == "kafka")
            }
            key = Key(
                section=top,
                key=".".join(path[1:] if top != section else path),
                env=_env(section, path),
                flags=tuple(sorted(given)),
                type=_type(field),
                default=_default(field),
                doc=_cell(doc or next((t for t in given.values() if t), "")),
            )
            if top == section:
                mine.append(key)
                continue
            readers, keys = shared.setdefault(top, ([], []))
            readers.extend(commands)
            if key.key not in {k.key for k in keys}:
                keys.append(key)
        own[section] = (commands, mine)
    ordered: dict[str, tuple[tuple[str, ...], list[Key]]] = {}
    for top in SHARED:
        if top in shared:
            readers, keys = shared[top]
            ordered[str(top)] = (tuple(readers), keys)
    return {**ordered, **own}


def config_page() -> str:
    """reference/configuration.md: every key of every section, with its variable."""
    out = [
        "# Configuration reference",
        "",
        "Written from the settings models at every build of this site. One TOML file",
        "(`--config FILE` on every command) holds `[kafka]`, shared by every command,",
        "`[registry]`, shared by the commands that frame values, and one section per",
        "tool; nested tables are dotted (`[worker.codec]`). Each key has an environment",
        "variable (the section in capitals, `_`, the keys joined by `__`) and most have",
        "a flag. Precedence: defaults < TOML < environment < flags. Unknown keys and",
        "misspelt variables are errors with a *did you mean*.",
        "",
    ]
    for section, (commands, keys) in config_keys().items():
        readers = (
            "every command"
            if section == "kafka"
            else ", ".join(f"`{c}`" for c in dict.fromkeys(commands))
        )
        out += [
            f"## `[{section}]`",
            "",
            f"Read by {readers}.",
            "",
            "| key | environment, flag | what it sets |",
            "| --- | --- | --- |",
        ]
        for k in keys:
            given = "<br>".join(f"`{f}`" for f in k.flags)
            set_by = f"`{k.env}`" + (f"<br>{given}" if given else "")
            out.append(
                f"| `{k.key}` | {set_by} | {k.doc}<br>*type* `{k.type}`, "
                f"*default* `{k.default}` |"
            )
        out.append("")
    return "\n".join(out)


def _beside(name: str) -> ModuleType:
    """The module `name` beside this script: `scripts/` is no package, and
    mkdocs-gen-files runs this file with runpy, the tests load it by path."""
    spec = importlib.util.spec_from_file_location(
        name, Path(__file__).with_name(f"{name}.py")
    )
    assert spec is not None and spec.loader is not None  # noqa: S101 (a file of the repo)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_metrics = _beside("docs_reference_metrics")
metric_families: Callable[[], list[tuple[str, str, list[str], str]]] = (
    _metrics.metric_families
)


def metrics_page() -> str:
    """reference/metrics.md: every metric the worker exports."""
    text: str = _metrics.page(_cell)
    return text


PAGES: dict[str, Callable[[], str]] = {
    "reference/cli.md": cli_page,
    "reference/configuration.md": config_page,
    "reference/metrics.md": metrics_page,
}


def _build() -> None:
    import mkdocs_gen_files  # type: ignore[import-not-found,unused-ignore]

    for path, page in PAGES.items():
        with mkdocs_gen_files.open(path, "w") as handle:
            handle.write(page())


if __name__ == "__main__":
    print(PAGES[f"reference/{sys.argv[1]}.md"]())
elif __name__ == "<run_path>":  # mkdocs-gen-files runs its scripts with runpy.run_path
    _build()
