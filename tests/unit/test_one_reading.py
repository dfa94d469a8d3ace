"""One reading of a team's model: every command gives each codec the same verdict,
and every form `derive` prints runs and reads the producer's bytes back.

Over every model of `tests/fixtures/usermodels` (each module's public pydantic
models and Structs, its generic aliases, and the `.proto` messages):

- `codec-schema check` runs the codecs `codec.codec_refusal` accepts and leaves
  out the others; `show` says "derived" or "refused" alike; `derive` prints the
  form or its refusal as comments; the worker's and the load generator's settings
  (`codec.check_form`) and codec-ab's plan (`abrunner.schema_fit.schema_limits`) refuse
  the same codecs;
- each form `derive` prints for an accepted codec compiles with its own tool
  (msgspec and pydantic: imported; protobuf: built in a descriptor pool;
  FlatBuffers: flatc; Cap'n Proto: pycapnp; Avro: fastavro) and reads the
  producer's messages (`model_dump_json(by_alias=True)` of the model's own
  validated payloads, written in each format by its codec) to the model's values.
"""

from __future__ import annotations

import importlib
import inspect
import json
import subprocess
import sys
import types
from pathlib import Path
from typing import Any, Final

import fastavro
import msgspec
import pytest
from pydantic import BaseModel

from abrunner.schema_fit import schema_limits
from codec import check_form, codec_refusal, get_codec
from schemas.compare import diff, read_native
from schemas.derive.capnp_schema import capnp_form
from schemas.derive.proto_file import message_class
from schemas.errors import ConfigError
from schemas.prototext.parser import parse_proto
from schemas.registry import user_schema
from schemas.user.loader import UserSchema, load_schema
from schemas.user.synthetic import make_payloads
from schematool.check import run_check
from schematool.cli import derive_text
from schematool.codecs import WIRE_CODECS
from schematool.failures import naive_read_back
from schematool.show import render_show

FIXTURES: Final = Path(__file__).resolve().parents[1] / "fixtures" / "usermodels"
PAYLOADS: Final = 3
_FORM_OF: Final = {
    "msgspec-json": "msgspec",
    "msgspec-msgpack": "msgspec",
    "protobuf": "proto",
    "flatbuffers": "flatbuffers",
    "capnp": "capnp",
    "avro": "avro",
}


def _specs() -> list[str]:
    sys.path.insert(0, str(FIXTURES))
    try:
        out = []
        for path in sorted(FIXTURES.glob("*.py")):
            module = importlib.import_module(path.stem)
            for name, cls in vars(module).items():
                if (
                    inspect.isclass(cls)
                    and issubclass(cls, BaseModel | msgspec.Struct)
                    and cls.__module__ == module.__name__
                    and not name.startswith("_")
                ):
                    out.append(f"{path.stem}:{name}")
    finally:
        sys.path.remove(str(FIXTURES))
    protos = ["shipment.proto:Shipment", "registry_team.proto:Order"]
    return out + [str(FIXTURES / p) for p in protos]


SPECS: Final = _specs()


@pytest.fixture(autouse=True)
def _user_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fixtures are a team's own modules, importable from PYTHONPATH."""
    monkeypatch.syspath_prepend(str(FIXTURES))


def _load(spec: str) -> UserSchema:
    """The schema as every tool of a process has it (loaded once: `user_schema`)."""
    try:
        schema = user_schema(spec)
    except ConfigError as exc:  # a fixture of what no form holds: not a verdict
        pytest.skip(f"refused as a whole: {exc}")
    assert schema is not None
    return schema


def _refusal(text: str) -> bool:
    """`derive`'s output is a refusal: comments (or Avro's JSON object) saying so."""
    lines = [line for line in text.splitlines() if line.strip()]
    said = " cannot carry " in lines[0] or " cannot hold " in lines[0]
    comments = all(line.startswith(("#", "//")) for line in lines)
    return text.startswith('{\n  "refused"') or (said and comments)


def _name(spec: str) -> str:
    return spec.rsplit("/", 1)[-1]


@pytest.mark.parametrize("spec", SPECS, ids=_name)
def test_every_command_gives_each_codec_the_same_verdict(spec: str) -> None:
    schema = _load(spec)
    accepted = {c for c in WIRE_CODECS if codec_refusal(c, schema) is None}
    for codec in WIRE_CODECS:  # the worker's and the load generator's settings
        try:
            check_form(codec, schema)
        except ConfigError:
            assert codec not in accepted, codec
        else:
            assert codec in accepted, codec
    shown = {
        line.split(": ", 1)[0]: line.split(": ", 1)[1].startswith("derived")
        for line in render_show(schema).splitlines()
        if line.split(": ", 1)[0] in WIRE_CODECS
    }
    assert {c for c, ok in shown.items() if ok} == accepted & set(shown)
    for codec, form in _FORM_OF.items():
        if (schema.source, form) in (("msgspec", "msgspec"), ("proto", "proto")):
            continue  # the team's own form: not derived
        text = derive_text(schema, form)
        mates = [c for c, f in _FORM_OF.items() if f == form]
        printed = any(c in accepted for c in mates)
        assert printed != _refusal(text), (codec, text[:200])
    try:
        report = run_check(schema, count=1)
    except ConfigError as exc:  # no payload can be made: check stops, says why
        assert "schema error" in str(exc)
        return
    assert set(report.codecs) == accepted
    assert set(report.refused) == set(WIRE_CODECS) - accepted
    if schema.source == "pydantic":
        kept, left_out, _ = schema_limits(spec, tuple(WIRE_CODECS))
        assert set(kept) == accepted
        assert {c for c, _ in left_out} == set(WIRE_CODECS) - accepted


@pytest.mark.parametrize("spec", SPECS, ids=_name)
def test_every_derived_form_runs_and_reads_the_producers_bytes(
    spec: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = _load(spec)
    try:
        payloads = make_payloads(schema.shape, PAYLOADS, seed=3)
    except ConfigError as exc:
        pytest.skip(f"no synthetic payload: {exc}")
    own = get_codec(_OWN[schema.source], schema)  # type: ignore[arg-type]
    expected = [read_native(own.decode(_wire(own, p)), schema.shape) for p in payloads]
    for codec in WIRE_CODECS:
        form = _FORM_OF.get(codec)
        if form is None or codec_refusal(codec, schema) is not None:
            continue
        if (schema.source, form) in (("msgspec", "msgspec"), ("proto", "proto")):
            continue
        text = derive_text(schema, form)
        read = _READERS[form](schema, text, tmp_path, monkeypatch, codec)
        for payload, values in zip(payloads, expected, strict=True):
            got = read_native(read(payload), schema.shape)
            root = schema.shape.name
            found = [
                (path, what)
                for path, what in diff(values, got, schema.shape, root)
                if not naive_read_back(values, got, path.removeprefix(root), codec)
            ]
            assert found == [], (codec, found)


_OWN: Final = {
    "pydantic": "json+pydantic",
    "msgspec": "msgspec-json",
    "proto": "protobuf",
}


def _wire(codec: Any, payload: dict[str, Any]) -> bytes:
    out: bytes = codec.encode(codec.from_builtins(payload))
    return out


Reader = Any


def _msgspec(
    schema: UserSchema, text: str, tmp: Path, monkeypatch: Any, codec: str
) -> Reader:
    module = types.ModuleType("derived_structs")
    monkeypatch.setitem(sys.modules, "derived_structs", module)
    exec(compile(text, "<derived_structs>", "exec"), module.__dict__)  # noqa: S102  (our own generated text)
    root = getattr(module, schema.shape.name)
    dec_hook = getattr(module, "dec_hook", None)
    if codec == "msgspec-json":
        return lambda p: msgspec.json.decode(
            json.dumps(p).encode(), type=root, dec_hook=dec_hook
        )
    packer = get_codec("msgspec-msgpack", schema)
    return lambda p: msgspec.msgpack.decode(
        _wire(packer, p), type=root, dec_hook=dec_hook
    )


def _proto(
    schema: UserSchema, text: str, tmp: Path, monkeypatch: Any, codec: str
) -> Reader:
    cls = message_class(
        parse_proto(text, schema.proto_file.name), schema.shape.proto_name
    )
    writer = get_codec("protobuf", schema)
    return lambda p: cls.FromString(_wire(writer, p))


def _runs_as_printed(
    schema: UserSchema, text: str, codec: str, compile_it: Any
) -> Reader:
    """The codec's own form is the printed text (so its decode is the printed
    form's), and the format's tool compiles the printed text."""
    compile_it(text)
    runtime = get_codec(codec, schema)  # type: ignore[arg-type]
    return lambda p: runtime.decode(_wire(runtime, p))


def _flatc(tmp: Path) -> Any:
    def run(text: str) -> None:
        source = tmp / "derived.fbs"
        source.write_text(text)
        done = subprocess.run(
            ["flatc", "--python", "-o", str(tmp / "fbs"), str(source)],  # noqa: S607
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr

    return run


def _capnp(schema: UserSchema) -> Any:
    """pycapnp compiles the printed text when the codec loads it (loading one
    file id twice in a process aborts it): the codec's text must be the printed."""

    def run(text: str) -> None:
        assert text.endswith(capnp_form(schema.shape).text)

    return run


def _avro(text: str) -> None:
    fastavro.parse_schema(json.loads(text))


_READERS: Final[dict[str, Any]] = {
    "msgspec": _msgspec,
    "proto": _proto,
    "flatbuffers": lambda s, t, tmp, m, c: _runs_as_printed(s, t, c, _flatc(tmp)),
    "capnp": lambda s, t, tmp, m, c: _runs_as_printed(s, t, c, _capnp(s)),
    "avro": lambda s, t, tmp, m, c: _runs_as_printed(s, t, c, _avro),
}


def test_the_printed_binary_forms_are_the_ones_the_codecs_run() -> None:
    """The text `derive` prints is the text the codec derives and runs."""
    from schemas.derive.avro_schema import avro_text
    from schemas.derive.fbs_schema import flatbuffers_form

    sys.path.insert(0, str(FIXTURES))
    schema = load_schema("ledger:ChartEvent")
    assert derive_text(schema, "avro") == avro_text(schema.shape)
    assert derive_text(schema, "capnp").endswith(capnp_form(schema.shape).text)
    fbs = flatbuffers_form(schema.shape).text
    assert derive_text(schema, "flatbuffers").endswith(fbs)
