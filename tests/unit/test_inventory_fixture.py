"""Issue 29's "Done when", first part, on a model another team wrote (the inventory
envelope, `tests/fixtures/usermodels/inventory.py`): `codec-schema check` exits 0,
lists the validators the derived codecs skip, runs msgspec, and leaves out (with a
line per field) the formats that cannot carry it. The replay and shadow part is
`tests/integration/test_replay_inventory.py` (`make acceptance`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from schematool.cli import main as schema_main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "usermodels"
VALIDATORS = (
    "InventoryEvent: model_validator(mode='before') 'legacy_qty' not run by ",
    "InventoryEvent: model_validator(mode='after') 'weight_is_plausible' not run by ",
    "InventoryEvent.payload<StockReceived>.sku: field_validator(mode='after') "
    "'upper_sku' not run by ",
    "InventoryEvent.payload<StockAdjusted>.note: AfterValidator 'strip' not run by ",
)


@pytest.fixture(autouse=True)
def _fixtures_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(FIXTURES))


def _check(capsys: pytest.CaptureFixture[str], spec: str) -> tuple[int, str]:
    code = schema_main(["check", spec, "--count", "10"])
    return code, capsys.readouterr().out


def test_check_passes_with_the_validators_listed(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out = _check(capsys, "inventory:InventoryEvent")
    assert code == 0, out
    for codec in ("json+pydantic", "json-stdlib+pydantic", "orjson+pydantic"):
        assert f"  {codec:<20}  ok" in out
    for codec in ("msgspec-json", "msgspec-msgpack"):
        assert f"  {codec:<20}  ok" in out
    for line in VALIDATORS:
        assert line in out
    for fmt in ("protobuf", "flatbuffers", "capnp", "avro"):
        assert f"  {fmt:<20}  left out: cannot carry" in out
    assert "all codecs agree (4 left out above)" in out


def test_plain_bytes_leave_the_derived_codecs_out(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out = _check(capsys, "inventory:InventoryEventRaw")
    assert code == 0, out
    assert (
        "  msgspec-json: InventoryEventRaw.raw_frame: pydantic writes bytes to JSON "
        "as utf8 text"
    ) in out
    assert "all codecs agree (6 left out above)" in out
