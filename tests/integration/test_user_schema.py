"""Your own schema on a real broker: traffic, record, replay, worker and codec-ab.

The schema is `tests/fixtures/usermodels/shop.py`, a pydantic model written outside
the project (an optional field, a nested model, a list, Literals, a datetime).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from abrunner.report.tables import read
from codec import AutoCodec, get_codec
from loadgen.cli import main as loadgen_main
from schemas.compare import read_native
from schemas.registry import resolve
from schemas.user.loader import UserSchema
from service.kafka.headers import CONTENT_TYPE
from tests.support import WorkerProcess, consume_all

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "usermodels"
SHOP = "shop:Order"
BIN = Path(sys.executable).parent

TopicFactory = Callable[..., str]


@pytest.fixture(autouse=True)
def _user_modules(monkeypatch: pytest.MonkeyPatch) -> None:
    """This process imports the user's module from PYTHONPATH, as a user's would."""
    monkeypatch.syspath_prepend(str(FIXTURES))


def shop() -> UserSchema:
    schema = resolve(SHOP)
    assert isinstance(schema, UserSchema)
    return schema


def produce(
    bootstrap: str, topic: str, codec: str, count: int, seed: int, processes: int = 1
) -> None:
    """`codec-loadgen --schema shop:Order`: the user's service writing its events."""
    argv = ["--bootstrap-servers", bootstrap, "--topic", topic, "--schema", SHOP]
    argv += ["--codec", codec, "--count", str(count), "--rate", "5000"]
    argv += ["--seed", str(seed), "--processes", str(processes)]
    assert loadgen_main([*argv, "--progress", "never", "--json"]) == 0


def read_all(bootstrap: str, topic: str, count: int) -> dict[bytes, Any]:
    """Every message of `topic` read through the schema, by key (its order id)."""
    auto = get_codec("auto", shop(), auto_json="json+pydantic")
    assert isinstance(auto, AutoCodec)
    out = {}
    for m in consume_all(bootstrap, topic, count):
        content_type = dict(m.headers() or [])[CONTENT_TYPE]
        native = auto.codec_for(content_type).decode(m.value())
        out[m.key()] = read_native(native, shop().shape)
    assert len(out) == count
    return out


def recorded_traffic(
    bootstrap: str, topic_factory: TopicFactory, out: Path, count: int
) -> dict[bytes, Any]:
    """A mixed topic (JSON, then MessagePack: a migration) recorded into `out`."""
    source = topic_factory(partitions=2)
    produce(bootstrap, source, "json+pydantic", count // 2, seed=1)
    # Two producer processes: each loads the schema itself (spawned, not forked).
    produce(bootstrap, source, "msgspec-msgpack", count - count // 2, 2, processes=2)
    argv = ["record", "--bootstrap-servers", bootstrap, "--topic", source]
    assert loadgen_main([*argv, "--out", str(out), "--timeout", "2"]) == 0
    return read_all(bootstrap, source, count)


class TestRecordReplay:
    """Recorded bytes of the user's schema replay transcoded, values intact, and a
    worker on that schema handles every one of them."""

    def test_record_replay_transcode_round_trip(
        self, kafka_bootstrap: str, topic_factory: TopicFactory, tmp_path: Path
    ) -> None:
        recording = tmp_path / "shop.rec"
        original = recorded_traffic(kafka_bootstrap, topic_factory, recording, 300)
        target = topic_factory(partitions=2)
        argv = ["--bootstrap-servers", kafka_bootstrap, "--topic", target]
        argv += ["--schema", SHOP, "--replay", str(recording), "--transcode"]
        argv += ["protobuf", "--rate", "5000", "--progress", "never", "--json"]
        assert loadgen_main(argv) == 0
        replayed = read_all(kafka_bootstrap, target, 300)
        assert replayed == original
        env = {**os.environ, "PYTHONPATH": str(FIXTURES)}
        worker_args = ("--codec", "protobuf", "--schema", SHOP)
        with WorkerProcess(
            kafka_bootstrap,
            target,
            *worker_args,
            "--on-decode-error",
            "fail",
            env=env,
        ) as worker:
            worker.wait_for(300, timeout=90)
            metrics = worker.metrics()
        info = f'worker_info{{codec="protobuf",schema="{SHOP}"'
        assert any(name.startswith(info) for name in metrics), sorted(metrics)


def codec_ab(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """`codec-ab` run from the user's directory, with no PYTHONPATH: the user's
    module is found there, by the runner and by every worker and load generator."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [str(BIN / "codec-ab"), *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


@pytest.fixture
def user_dir(tmp_path: Path) -> Path:
    """A directory of the user's own, holding their model (not the project's)."""
    home = tmp_path / "user"
    home.mkdir()
    shutil.copy(FIXTURES / "shop.py", home / "shop.py")
    return home


def assert_clean(report_dir: Path, codecs: list[str]) -> str:
    """Every case ran, lost nothing; returns report.md."""
    report = read(report_dir / "report.json")
    assert sorted(r.codec for r in report.results) == sorted(codecs)
    for r in report.results:
        assert r.error is None, r
        assert r.profile == SHOP
        assert r.lost == 0 and r.seq_missing == 0, r
        assert r.acked == r.sent and (r.sent or 0) > 0
        assert r.worker_exit == 0 and r.offsets_committed_to_end
        assert (r.dead_lettered or 0) == 0
    return (report_dir / "report.md").read_text()


class TestAbOnUserSchema:
    """`codec-ab --schema shop:Order`: every wire codec, synthetic or replayed."""

    @pytest.mark.slow
    @pytest.mark.timeout(900)
    def test_six_codecs_old_and_new_formats(
        self, kafka_bootstrap: str, user_dir: Path
    ) -> None:
        codecs = ["json+pydantic", "msgspec-msgpack", "protobuf"]
        codecs += ["flatbuffers", "capnp", "avro"]
        done = codec_ab(
            user_dir,
            *("--bootstrap-servers", kafka_bootstrap, "--schema", SHOP),
            *("--codecs", ",".join(codecs)),
            *("--rate", "2000", "--duration", "3", "--warmup", "1"),
            *("--partitions", "2", "--no-bench", "--out", "ab"),
        )
        assert done.returncode == 0, done.stderr[-3000:]
        md = assert_clean(user_dir / "ab", codecs)
        assert f"## Schema `{SHOP}`" in md
        assert "synthesized from its types" in md

    @pytest.mark.slow
    @pytest.mark.timeout(900)
    def test_replay_of_recorded_traffic(
        self, kafka_bootstrap: str, topic_factory: TopicFactory, user_dir: Path
    ) -> None:
        recording = user_dir / "orders.rec"
        recorded_traffic(kafka_bootstrap, topic_factory, recording, 400)
        codecs = ["json-stdlib+pydantic", "msgspec-msgpack", "protobuf"]
        done = codec_ab(
            user_dir,
            *("--bootstrap-servers", kafka_bootstrap, "--schema", SHOP),
            *("--replay", "orders.rec", "--codecs", ",".join(codecs)),
            *("--rate", "2000", "--duration", "3", "--warmup", "1"),
            *("--partitions", "2", "--no-bench", "--out", "ab"),
        )
        assert done.returncode == 0, done.stderr[-3000:]
        md = assert_clean(user_dir / "ab", codecs)
        assert "replayed from `orders.rec`" in md


class TestTaggedUnionOnEveryFormat:
    """A discriminated union (`tagged_events:TaggedEvent`) through every binary
    format on one topic: the same seeded events, decoded by content type, read the
    same member with the same values whichever format carried them."""

    def test_each_format_decodes_the_member_the_tag_names(
        self, kafka_bootstrap: str, topic_factory: TopicFactory
    ) -> None:
        spec, count = "tagged_events:TaggedEvent", 30
        formats = ("protobuf", "flatbuffers", "capnp", "avro")
        topic = topic_factory(partitions=1)
        for codec in formats:
            argv = ["--bootstrap-servers", kafka_bootstrap, "--topic", topic]
            argv += ["--schema", spec, "--codec", codec, "--count", str(count)]
            argv += ["--rate", "5000", "--seed", "3", "--progress", "never", "--json"]
            assert loadgen_main(argv) == 0
        schema = resolve(spec)
        assert isinstance(schema, UserSchema)
        auto = get_codec("auto", schema, auto_json="json+pydantic")
        assert isinstance(auto, AutoCodec)
        by_format: dict[bytes, list[Any]] = {}
        for m in consume_all(kafka_bootstrap, topic, count * len(formats)):
            content_type = dict(m.headers() or [])[CONTENT_TYPE]
            native = auto.codec_for(content_type).decode(m.value())
            by_format.setdefault(content_type, []).append(
                read_native(native, schema.shape)
            )
        assert len(by_format) == len(formats)
        first, *others = by_format.values()
        assert all(values == first for values in others)
        kinds = {v["payload"]["kind"] for v in first}
        assert kinds == {"scanned", "in_transit", "delivered"}


class TestUntaggedUnionOnEveryFormat:
    """An untagged union (`deliveries:Delivery`, pydantic's smart mode) through
    pydantic's JSON and every binary format on one topic: the same seeded payloads,
    each format's member the one json+pydantic decodes from pydantic's own JSON."""

    def test_each_format_decodes_the_member_pydantic_reads(
        self, kafka_bootstrap: str, topic_factory: TopicFactory
    ) -> None:
        spec, count = "deliveries:Delivery", 30
        formats = ("json+pydantic", "protobuf", "flatbuffers", "capnp", "avro")
        topic = topic_factory(partitions=1)
        for codec in formats:
            argv = ["--bootstrap-servers", kafka_bootstrap, "--topic", topic]
            argv += ["--schema", spec, "--codec", codec, "--count", str(count)]
            argv += ["--rate", "5000", "--seed", "3", "--progress", "never", "--json"]
            assert loadgen_main(argv) == 0
        schema = resolve(spec)
        assert isinstance(schema, UserSchema)
        auto = get_codec("auto", schema, auto_json="json+pydantic")
        assert isinstance(auto, AutoCodec)
        by_format: dict[bytes, list[Any]] = {}
        members: set[str] = set()
        for m in consume_all(kafka_bootstrap, topic, count * len(formats)):
            content_type = dict(m.headers() or [])[CONTENT_TYPE]
            native = auto.codec_for(content_type).decode(m.value())
            if content_type == b"application/json":
                members.add(type(native.destination).__name__)
            by_format.setdefault(content_type, []).append(
                read_native(native, schema.shape)
            )
        assert len(by_format) == len(formats)
        first, *others = by_format.values()
        assert all(values == first for values in others)
        assert members == {"HomeAddress", "Locker", "PickupPoint"}
