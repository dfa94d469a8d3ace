"""The reference pages cover every command, flag, setting and metric the code has."""

from __future__ import annotations

import importlib.util
import re
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "docs_reference", ROOT / "scripts" / "docs_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("docs_reference", module)
    spec.loader.exec_module(module)
    return module


ref = _load()


def test_every_console_script_has_a_section() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    covered = {name.split()[0] for name, _, _ in ref.COMMANDS}
    assert covered == set(scripts)


@pytest.mark.parametrize("command", [c[0] for c in ref.COMMANDS])
def test_every_flag_has_help_and_an_entry(command: str) -> None:
    page = ref.cli_page()
    for name, parser in ref.parsers():
        if name.split()[: len(command.split())] != command.split():
            continue
        assert f"## `{name}`" in page
        for action in ref.options(parser):
            assert action.help, (
                f"{name} {action.option_strings or action.dest}: no help"
            )
            for option in action.option_strings:
                assert f"`{option}`" in page, f"{name} {option} missing"


def test_every_setting_has_a_row_a_variable_and_a_description() -> None:
    page = ref.config_page()
    keys = ref.config_keys()
    assert list(keys)[:2] == ["kafka", "registry"]
    listed = {(section, k.key) for section, (_, ks) in keys.items() for k in ks}
    for section, module, name, _commands in ref.SECTIONS:
        model = getattr(importlib.import_module(module), name)
        for path, _field, _doc in ref.settings(model):
            shared = path[0] in ("kafka", "registry")
            where = path[0] if shared else section
            key = ".".join(path[1:] if shared else path)
            assert (where, key) in listed, f"{name}: {'.'.join(path)} has no row"
    for section, (_, ks) in keys.items():
        for k in ks:
            assert f"| `{k.key}` | `{k.env}`" in page
            assert k.doc, (
                f"[{section}] {k.key}: no description (an attribute docstring or a "
                "flag's help)"
            )


METRIC = re.compile(
    r"(?:Counter|Gauge|Histogram|IntCounter|BatchHistogram|Summary|Info)\(\s*"
    r"\"(worker_[a-z_]+)\"",
    re.S,
)


def test_every_metric_the_worker_defines_is_listed() -> None:
    defined = {
        m
        for path in (ROOT / "service").rglob("*.py")
        for m in METRIC.findall(path.read_text())
    }
    assert len(defined) >= 15
    listed = {name for name, *_ in ref.metric_families()}
    missing = {m for m in defined if m not in listed and f"{m}_total" not in listed}
    assert not missing, f"metrics without a reference entry: {sorted(missing)}"
