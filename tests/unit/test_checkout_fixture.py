"""Issue 29's "Done when" on a third team's model, in another team's spelling: the
checkout events (`tests/fixtures/usermodels/checkout.py`: a union picked by a callable
`Discriminator`, a wrap model validator, Before/After annotations, computed fields).

`codec-schema check` on the full `OrderPlaced` exits 0 with the code the derived
codecs do not run listed; `PaymentSettled` (which every codec carries but for a plain
`datetime` that may be naive) names each format of instants at that field. Its
recorded traffic, 200 records with naive datetimes and lax values, is replayed and
shadow-decoded here without Kafka: the replay's transcoding (`replay_source`), the
dead letters (each codec's decode of what its case is sent) and the shadow verdicts
(`Comparer`) agree record for record.
"""

from __future__ import annotations

import base64
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from codec import AutoCodec, CodecName, get_codec
from loadgen.config import LoadgenSettings
from loadgen.recording import Record, RecordingInfo, RecordingWriter
from loadgen.replay import replay_source
from schemas.errors import DecodeError
from schemas.user.loader import load_schema
from schemas.wire_shape import shape_of
from schematool.cli import main as schema_main
from schematool.failures import by_attribute
from service.shadow.verdict import Comparer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "usermodels"
PAYMENT = "tests.fixtures.usermodels.checkout:PaymentSettled"
ORDER = "tests.fixtures.usermodels.checkout:OrderPlaced"
COUNT = 200
NAIVE = {i for i in range(COUNT) if i % 20 in (0, 7, 13)}
LAX = {i for i in range(COUNT) if i % 10 == 5}
INSTANTS: tuple[CodecName, ...] = ("protobuf", "flatbuffers", "capnp", "avro")
DERIVED = "msgspec-json, msgspec-msgpack, protobuf, flatbuffers, capnp, avro"
NOT_RUN = (
    "OrderPlaced: model_validator(mode='wrap') 'default_currency' not run by ",
    "OrderPlaced: computed_field 'line_count' not run by ",
    "OrderPlaced.customer_email: BeforeValidator '_lower' not run by ",
    "OrderPlaced.items[]<LineItem>.unit_price: AfterValidator '_cents' not run by ",
    "OrderPlaced.total: AfterValidator '_cents' not run by ",
    "OrderPlaced.method: Discriminator 'payment_method' not run by ",
)


def _method(i: int) -> dict[str, Any]:
    if i % 3 == 0:
        return {"method": "card", "brand": "visa", "last4": f"{i:04d}", "threeDs": True}
    if i % 3 == 1:
        return {"method": "bank", "iban": f"DE{i % 90 + 10}37040044{i:08d}"} | {
            "country": "DE"
        }
    return {"method": "wallet", "provider": "paypal", "tokenRef": str(uuid.UUID(int=i))}


def _payment(i: int) -> bytes:
    """As the team's producer writes it: some bookedAt without an offset, some
    numbers as strings (lax), an unknown key, currency left out by old producers."""
    at = f"2026-03-0{1 + i % 9}T{i // 60 % 24:02d}:{i % 60:02d}:00.{i % 1000:03d}"
    body: dict[str, Any] = {
        "paymentId": str(uuid.UUID(int=10**9 + i)),
        "orderRef": 2**63 - 1 if i % 50 == 0 else i * 1_000_003,
        "apiVersion": 1 + i % 3,
        "tier": 1 + i % 3,
        "channel": ("web", "ios", "android", "pos")[i % 4],
        "settledAt": at + "Z",
        "bookedAt": at if i in NAIVE else at + "+02:00",
        "amount": f"{i % 500}.{i % 100:02d}",
        "customerEmail": f"buyer{i}@example.com",
        "feeRate": "0.029" if i in LAX else 0.029,
        "riskScore": str(i % 1000) if i in LAX else i % 1000,
        "method": _method(i),
        "merchantNet": f"10.{i % 256}.0.0/16",
        "receiptCodes": {str(j): f"R{i}-{j}" for j in range(i % 3)},
        "signature": base64.b64encode(b"sig-%d" % i).decode(),
        "traceId": f"t-{i}",
    }
    if i % 4 != 3:
        body["currency"] = ("EUR", "USD", "GBP")[i % 3]
    if i % 5 == 0:
        body["clientIp"] = f"2001:db8::{i:x}"
    return json.dumps(body).encode()


VALUES = [_payment(i) for i in range(COUNT)]


@pytest.fixture
def recording(tmp_path: Path) -> Path:
    path = tmp_path / "payments.rec"
    with RecordingWriter(path, RecordingInfo("payments", 1, 1)) as out:
        for i, v in enumerate(VALUES):
            out.write(Record(0, i, 1, 1000 + i, b"%d" % i, v, [("content-type", JSON)]))
    return path


JSON = b"application/json"


def _settings(path: Path, target: str) -> LoadgenSettings:
    return LoadgenSettings.model_validate(
        {"replay": path, "topic": "t", "schema": PAYMENT, "transcode": target}
        | {"rate": 10}
    )


def _dead_letters(target: CodecName, values: list[bytes | None]) -> int:
    codec = get_codec(target, _settings(Path("x.rec"), target).forms)
    dead = 0
    for v in values:
        try:
            codec.decode(v or b"")
        except DecodeError:
            dead += 1
    return dead


class TestCheck:
    """`codec-schema check` on the team's two models."""

    @pytest.fixture(autouse=True)
    def _on_path(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.syspath_prepend(str(FIXTURES))

    def test_the_full_model_passes_with_the_skipped_code_listed(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        code = schema_main(["check", "checkout:OrderPlaced", "--count", "10"])
        out = capsys.readouterr().out
        assert code == 0, out
        for codec in ("json+pydantic", "orjson+pydantic", "msgspec-json"):
            assert f"  {codec:<20}  ok" in out
        for line in NOT_RUN:
            assert f"  {line}{DERIVED}: " in out
        for fmt in INSTANTS:
            assert f"  {fmt:<20}  left out: cannot carry" in out
        assert "all codecs agree (4 left out above)" in out
        assert "Traceback" not in out

    def test_the_slim_model_names_each_format_of_instants_at_its_field(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        code = schema_main(["check", "checkout:PaymentSettled", "--count", "20"])
        out = capsys.readouterr().out
        assert code == 0, out  # the formats' limit, listed: not a disagreement
        assert "disagreements" not in out
        head = "values a codec's format cannot hold as sent"
        found = out.split(head)[1].split(":\n", 1)[1].split("\nall codecs agree")[0]
        lines = found.splitlines()
        assert [line.split(": ")[0].strip() for line in lines] == list(INSTANTS)
        for line in lines:  # attribute paths, as every line of the check has them
            assert line.split(": ")[1] == "PaymentSettled.booked_at", line
        assert (
            ": from_builtins failed: a datetime without a timezone (protobuf's "
            "Timestamp holds instants)" in lines[0]
        )
        for line, fmt in zip(lines[1:], INSTANTS[1:], strict=True):
            assert (  # in the replay's words, not two reprs cut short
                ": PaymentSettled.booked_at: a datetime without a timezone "
                f"({fmt} holds instants: it reads back as UTC) (vs json+pydantic)"
            ) in line, line
        codecs = ("json+pydantic", "msgspec-json", "msgspec-msgpack")
        named = ["--codecs", ",".join(codecs)]
        assert schema_main(["check", "checkout:PaymentSettled", *named]) == 0


class TestReplay:
    """The recorded traffic, as each case of `codec-ab --replay` is sent it."""

    @pytest.mark.parametrize("target", INSTANTS)
    def test_a_format_of_instants_counts_the_naive_records_as_not_carried(
        self, recording: Path, target: CodecName
    ) -> None:
        source = replay_source(_settings(recording, target), 1)
        assert sum(source.not_carried.values()) == len(NAIVE), source.not_carried
        (why,) = source.not_carried
        assert why.startswith("bookedAt: a datetime without a timezone ("), why
        assert len(source.values) == COUNT - len(NAIVE)
        assert _dead_letters(target, source.values) == 0

    def test_msgspec_msgpack_carries_every_record(self, recording: Path) -> None:
        source = replay_source(_settings(recording, "msgspec-msgpack"), 1)
        assert source.not_carried == {}
        assert _dead_letters("msgspec-msgpack", source.values) == 0

    @pytest.mark.parametrize(
        ("target", "dead"),
        [("json+pydantic", 0), ("orjson+pydantic", 0), ("msgspec-json", len(LAX))],
    )
    def test_json_cases_read_the_recorded_bytes(
        self, recording: Path, target: CodecName, dead: int
    ) -> None:
        source = replay_source(_settings(recording, target), 1)
        assert source.values == VALUES  # byte for byte
        assert _dead_letters(target, source.values) == dead

    @pytest.mark.parametrize("shadow", [*INSTANTS, "msgspec-json", "msgspec-msgpack"])
    def test_the_shadow_decode_agrees_with_the_replay(
        self, recording: Path, shadow: CodecName
    ) -> None:
        settings = _settings(recording, shadow)
        forms = settings.forms
        live = get_codec("auto", forms, auto_json="json+pydantic")
        assert isinstance(live, AutoCodec)
        comparer = Comparer(live, get_codec(shadow, forms), shape_of(forms))
        verdicts = [comparer.compare(v, JSON) for v in VALUES]
        outcomes = [v.outcome if v is not None else None for v in verdicts]
        if shadow == "msgspec-json":  # its case reads the recorded bytes
            rejected = {i for i, o in enumerate(outcomes) if o == "shadow_rejected"}
            assert rejected == LAX
            assert outcomes.count("agree") == COUNT - len(LAX)
            return
        kept = set(replay_source(settings, 1).keys)
        for i, outcome in enumerate(outcomes):
            if b"%d" % i in kept:
                assert outcome == "agree", (i, verdicts[i])
            else:
                assert outcome in ("differ", "shadow_rejected"), (i, verdicts[i])


def test_protobuf_json_names_read_back_as_attribute_paths() -> None:
    """protobuf's parser names a field by its JSON name (the alias) and a union by
    its wrapper's member; the check names every field by attribute."""
    shape = load_schema(PAYMENT).shape
    assert by_attribute("bookedAt", shape) == "booked_at"
    assert by_attribute("method.card.threeDs", shape) == "method<Card>.three_ds"
    assert by_attribute("receiptCodes[3]", shape) == "receipt_codes[3]"
    assert by_attribute("noSuchKey", shape) == "noSuchKey"


class TestShowDerive:
    """`show` and `derive` give the verdict `check`, codec-ab and the worker give."""

    def test_show_lists_every_refused_field_of_every_derived_codec(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert schema_main(["show", ORDER]) == 0
        out = capsys.readouterr().out
        assert "protobuf: refused: protobuf cannot carry 8 fields of " in out
        assert "flatbuffers: refused: flatbuffers cannot carry 5 fields of " in out
        # list[Optional[LineItem]] holds no union: its None is what FlatBuffers lacks
        assert "OrderPlaced.items: a FlatBuffers union" not in out
        assert "  OrderPlaced.items[]: FlatBuffers holds no None inside a list" in out
        assert "  OrderPlaced.refunds: FlatBuffers map keys are str or int" in out
        assert "capnp: refused: capnp cannot carry 4 fields of " in out
        assert "avro: refused: avro cannot carry 6 fields of " in out

    def test_derive_gives_no_proto_for_a_model_protobuf_cannot_carry(
        self, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert schema_main(["derive", ORDER, "--form", "proto"]) == 0
        out = capsys.readouterr().out
        assert out.startswith(f"// protobuf cannot carry 8 fields of {ORDER}:"), out
        assert all(line.startswith("// ") for line in out.splitlines())
        assert "message OrderPlaced" not in out
        assert "// OrderPlaced.terminal: protobuf has no fixed-length tuple" in out
        assert schema_main(["derive", PAYMENT, "--form", "proto"]) == 0
        assert "message PaymentSettled {" in capsys.readouterr().out


def _order(i: int) -> bytes:
    """The full model's traffic: None for the whole list and inside it, a time and
    a timedelta, a set, fixed and variable tuples, a UUID-keyed map of Decimals,
    some promisedBy naive, some quantities as strings (lax)."""
    at = f"2026-03-01T10:{i % 60:02d}:00"
    quantity: Any = str(1 + i % 5) if i in LAX else 1 + i % 5
    item = {"sku": f"ABC-{1000 + i}", "quantity": quantity, "unitPrice": "9.50"}
    body = {
        "orderId": str(uuid.UUID(int=10**8 + i)),
        "orderRef": i * 7,
        "tier": 1 + i % 3,
        "channel": "pos",
        "placedAt": at + "Z",
        "promisedBy": at if i in NAIVE else at + "-05:00",
        "pickupSlot": "14:30:00" if i % 3 else None,
        "holdFor": f"PT{5 + i % 55}M",
        "customerEmail": f"Buyer{i}@Example.com",
        "items": None if i % 11 == 0 else [item, None],
        "total": "19.00",
        "refunds": {str(uuid.UUID(int=i)): "1.50"} if i % 7 == 0 else {},
        "notesByLine": {"1": "gift wrap"},
        "method": _method(i),
        "storeNet": "192.168.0.0/24",
        "couponIds": [i % 5, i % 7],
        "terminal": [i % 40, f"T{i % 40}", 1.5],
        "retryDelaysMs": [100, 200][: i % 3],
        "signature": "c2ln",
    }
    return json.dumps(body).encode()


@pytest.mark.parametrize(
    ("target", "dead"),
    [
        ("msgspec-msgpack", 0),  # transcoded from the team's lax decode
        ("json+pydantic", 0),
        ("msgspec-json", len({i for i in LAX if i % 11})),  # lax with items
    ],
)
def test_the_full_models_replay(tmp_path: Path, target: CodecName, dead: int) -> None:
    path = tmp_path / "orders.rec"
    with RecordingWriter(path, RecordingInfo("orders", 1, 1)) as out:
        for i in range(COUNT):
            out.write(Record(0, i, 1, 1000 + i, b"%d" % i, _order(i), []))
    settings = LoadgenSettings.model_validate(
        {"replay": path, "topic": "t", "schema": ORDER, "transcode": target}
        | {"rate": 10}
    )
    source = replay_source(settings, 1)
    assert source.not_carried == {}
    codec = get_codec(target, settings.forms)
    rejected = 0
    for v in source.values:
        try:
            codec.decode(v or b"")
        except DecodeError:
            rejected += 1
    assert rejected == dead
