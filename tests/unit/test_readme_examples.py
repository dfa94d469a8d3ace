"""The README's and the docs site's command examples are valid as written: every flag exists and every
value passes the settings' checks (`--print-config`, which touches no broker), and a
rate pattern reaches the `--rate` it names within its run.

The quick start runs for real (`tests/integration/test_newcomer.py`). The examples
here run for a minute or more each, or name a reader's own module
(`shop.events:Order`, `shop.handlers:handle`) or broker: those are checked for their flags only, or not at
all, as the list below says.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest

from codec import CODECS
from loadgen.config import LoadgenSettings
from loadgen.schedule import rate_pieces

ROOT: Final = Path(__file__).resolve().parents[2]
README: Final = "\n".join(
    path.read_text()
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
)
"""The README and every page of the docs site: their examples are checked alike."""
MODULES: Final = {
    "codec-loadgen": "loadgen",
    "codec-ab": "abrunner",
    "codec-worker": "service",
    "codec-schema": "schematool",
}
READERS_OWN: Final = ("shop.events", "shop.handlers", "myapp.events", "kafka.staging")
"""A reader's module or broker: nothing here to check them against."""


def examples() -> list[str]:
    """Every `codec-*` command in the README's shell blocks, continuations joined."""
    found = []
    for block in re.findall(r"```(?:sh|bash)\n(.*?)```", README, re.S):
        text = re.sub(r"\\\n\s*", " ", block)
        for raw in text.splitlines():
            line = raw.split(" # ")[0].strip().rstrip("&").strip()
            line = line.removeprefix(".venv/bin/")
            if line.split(" ", 1)[0] in MODULES:
                found.append(line)
    return found


CHECKED = [
    line
    for line in examples()
    if not any(own in line for own in READERS_OWN) and "--compare" not in line
]


def test_the_examples_are_found() -> None:
    assert len(CHECKED) >= 15
    assert any("--pattern step" in line for line in CHECKED)


@pytest.mark.parametrize("line", CHECKED)
def test_an_example_is_valid_as_written(
    line: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    tool, *args = shlex.split(line)
    for name in list(os.environ):
        if name.startswith(("KAFKA_", "WORKER_", "LOADGEN_", "AB_")):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)  # no broker recorded here: nothing may need one
    main = importlib.import_module(f"{MODULES[tool]}.cli").main
    code = main([*args, "--print-config"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    if tool == "codec-loadgen" and "--pattern" in args:
        settings = LoadgenSettings.model_validate(json.loads(printed.out)["loadgen"])
        window = settings.duration or 60.0
        start, reached = 0.0, 0.0
        for seconds, low, high in rate_pieces(settings):
            if start < window:
                reached = max(reached, low, high)
            start += seconds
        assert reached >= settings.rate, "the pattern never reaches --rate"


def test_list_codecs_prints_the_codecs_pages_keys_and_content_types() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "service", "--list-codecs"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    printed = {row.split()[0]: row.split()[1] for row in done.stdout.splitlines()[1:]}
    page = (ROOT / "docs" / "explanation" / "codecs.md").read_text()
    parts = page.split("# Codecs", 1)[1].split("\n\n")
    section = next(part for part in parts if part.startswith("| key |"))
    table = re.findall(r"^\| `([^`]+)` \| .* \| (.*) \|$", section, re.M)
    assert sorted(printed) == sorted(CODECS) == sorted(key for key, _ in table)
    for key, wire in table:
        if "(" in wire:  # the first of a wire format names its content-type
            assert f"(`{printed[key]}`)" in wire
