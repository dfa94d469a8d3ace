"""The tree reads as the architecture: one-way imports, no cycles, small modules."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

LAYERS = {
    "schemas": 0,
    "codec": 1,
    "service": 2,
    "loadgen": 3,
    "localkafka": 3,
    "schematool": 3,
    "codecbench": 4,
    "abrunner": 5,
}
"""A package may import only packages of a lower layer (and its own)."""

ALLOWED_ACROSS = {("abrunner", "localkafka"), ("schematool", "loadgen")}
"""The runner starts the local broker; `codec-schema check --recording` reads a
recording (`loadgen.recording`); nothing else crosses within a layer."""


PARTS = {
    "schemas": {
        "schemas": 0,
        "schemas.errors": 0,
        "schemas.shape": 1,
        "schemas.unions": 2,
        "schemas.untagged": 2,
        "schemas.formats": 3,
        "schemas.compare": 3,
        "schemas.carried": 4,
        "schemas.prototext": 2,
        "schemas.builtin": 2,
        "schemas.derive": 4,
        "schemas.user": 5,
        "schemas.registry": 6,
        "schemas.wire_shape": 6,
    },
    "codec": {
        "codec.base": 0,
        "codec.work_bounds": 0,
        "codec.shape_fixes": 0,
        "codec.views": 1,
        "codec.avro_exact": 1,
        "codec.protobuf_unions": 1,
        "codec.record_names": 1,
        "codec.msgspec_codec": 2,
        "codec.pydantic_json": 2,
        "codec.protobuf_codec": 2,
        "codec.avro_codec": 2,
        "codec.flatbuffers": 2,
        "codec.capnp_codec": 3,  # shares the FlatBuffers cache and time conversions
        "codec.convert": 3,
        "codec.auto": 4,
        "codec.registry": 5,  # framing wraps any codec, auto too
        "codec": 5,
    },
    "service": {
        "service": 0,
        "service.lifecycle": 1,
        "service.telemetry": 1,
        "service.logic": 1,
        "service.kafka": 2,
        "service.settings": 3,
        "service.delivery": 4,
        "service.shadow": 4,
        "service.loop": 5,
        "service.app": 6,
        "service.cli": 7,
        "service.console": 8,
        "service.__main__": 9,
    },
    "abrunner": {
        "abrunner": 0,
        "abrunner.plan": 1,
        "abrunner.windowed": 1,
        "abrunner.results": 2,
        "abrunner.config": 2,
        "abrunner.report": 3,
        "abrunner.lab": 4,
        "abrunner.staging": 4,
        "abrunner.framing": 4,
        "abrunner.guarantees": 4,
        "abrunner.cli": 5,
        "abrunner.__main__": 6,
    },
}
"""Within a package, its parts (subpackages and top modules) in layers: a module may
import only parts of a lower layer, or its own part. Each package's `__init__`
docstring draws the same order."""

MAX_MODULES = 15
"""Modules in one folder at most (`__init__` and `__main__` count): past that, the
folder holds more than one part."""


def modules() -> dict[str, Path]:
    found = {}
    for package in LAYERS:
        for path in (ROOT / package).rglob("*.py"):
            if path.name.endswith(("_pb2.py", "_pb2.pyi")):
                continue
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def imports(path: Path, known: dict[str, Path]) -> set[str]:
    """The project modules `path` imports, anywhere in it (functions too)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        out |= {n for n in names if n in known}
    return out


def graph() -> dict[str, set[str]]:
    known = modules()
    # A module importing its own package (for a sibling) is not a dependency on it.
    return {
        m: {t for t in imports(p, known) if t != m and not m.startswith(t + ".")}
        for m, p in known.items()
    }


class TestLayout:
    """Each top-level package is one part; dependencies flow one way."""

    def test_imports_flow_one_way(self) -> None:
        upward = [
            (m, t)
            for m, targets in graph().items()
            for t in targets
            if (a := m.split(".")[0]) != (b := t.split(".")[0])
            and LAYERS[b] >= LAYERS[a]
            and (a, b) not in ALLOWED_ACROSS
        ]
        assert upward == []

    def test_no_import_cycle(self) -> None:
        edges, state, cycles = graph(), {}, []

        def visit(node: str, path: list[str]) -> None:
            state[node] = "open"
            for nxt in sorted(edges[node]):
                if state.get(nxt) == "open":
                    cycles.append([*path[path.index(nxt) :], nxt])
                elif nxt not in state:
                    visit(nxt, [*path, nxt])
            state[node] = "done"

        for node in sorted(edges):
            if node not in state:
                visit(node, [node])
        assert cycles == []

    @pytest.mark.parametrize("package", sorted(LAYERS))
    def test_modules_stay_small(self, package: str) -> None:
        sizes = {
            str(p.relative_to(ROOT)): len(p.read_text().splitlines())
            for name, p in modules().items()
            if name.split(".")[0] == package
        }
        assert {f: n for f, n in sizes.items() if n > 400} == {}

    @pytest.mark.parametrize("package", sorted(PARTS))
    def test_parts_import_downwards(self, package: str) -> None:
        parts = PARTS[package]

        def part(module: str) -> str:
            names = module.split(".")
            for end in range(len(names), 0, -1):
                if (key := ".".join(names[:end])) in parts:
                    return key
            raise AssertionError(f"{module} belongs to no part of {package}")

        upward = [
            (m, t)
            for m, targets in graph().items()
            if m.split(".")[0] == package
            for t in targets
            if t.split(".")[0] == package
            and (a := part(m)) != (b := part(t))
            and parts[b] >= parts[a]
        ]
        assert upward == []

    @pytest.mark.parametrize("package", sorted(LAYERS))
    def test_folders_name_their_parts(self, package: str) -> None:
        """No folder holds more than `MAX_MODULES` modules, no three modules in one
        folder share a name prefix (`staging_*`: a subpackage waiting to be made), and
        every package's `__init__` says what lives there."""
        crowded, prefixed, undocumented = {}, {}, []
        for folder in [
            ROOT / package,
            *(p.parent for p in (ROOT / package).rglob("*/__init__.py")),
        ]:
            names = sorted(
                p.stem for p in folder.glob("*.py") if not p.stem.endswith("_pb2")
            )
            if len(names) > MAX_MODULES:
                crowded[str(folder.relative_to(ROOT))] = len(names)
            stems = [n.split("_")[0] for n in names if not n.startswith("__")]
            shared = sorted({s for s in stems if stems.count(s) >= 3})
            if shared:
                prefixed[str(folder.relative_to(ROOT))] = shared
            init = folder / "__init__.py"
            if init.exists() and not ast.get_docstring(ast.parse(init.read_text())):
                undocumented.append(str(init.relative_to(ROOT)))
        assert (crowded, prefixed, undocumented) == ({}, {}, [])

    def test_no_formatter_escapes(self) -> None:
        escaped = [
            str(p.relative_to(ROOT))
            for folder in (*LAYERS, "tests")
            for p in (ROOT / folder).rglob("*.py")
            if "fmt: " + "skip" in p.read_text() or "fmt: " + "off" in p.read_text()
        ]
        assert escaped == []


def test_a_worker_loads_only_its_own_codec_runtime() -> None:
    """A msgspec worker does not import the FlatBuffers (and so numpy), Cap'n
    Proto or Avro runtimes: its RSS and heap, which the A/B report compares, are
    its own codec's. Building one of those codecs loads its runtime."""
    import subprocess
    import sys

    probe = (
        "import sys; import service.app, service.cli; from codec import get_codec; "
        "get_codec('msgspec-msgpack', 'medium'); "
        "print(sorted(m for m in ('numpy', 'capnp', 'fastavro', 'flatbuffers') "
        "if m in sys.modules)); get_codec('avro', 'medium'); "
        "print('fastavro' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == ["[]", "True"]
