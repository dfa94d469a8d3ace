"""An empty value is dead-lettered `empty` by every codec before decoding; `auto`
follows a message's last `content-type` header (Kafka's convention)."""

from __future__ import annotations

import pytest

from codec import REAL_CODECS, CodecName, get_codec
from service.kafka.headers import CONTENT_TYPE, last_header
from tests.unit.test_app import unfreeze  # noqa: F401 (a fixture)
from tests.unit.test_consumer import PAYLOADS, Rig

CODECS: list[CodecName] = [*REAL_CODECS, "auto"]


class TestEmpty:
    """Empty or missing: reason `empty`, the logic never runs, the rest goes on."""

    @pytest.mark.parametrize("codec", CODECS)
    @pytest.mark.parametrize("step", ["noop", "aggregate"])
    @pytest.mark.parametrize("value", [b"", None], ids=["empty", "tombstone"])
    def test_every_codec(
        self, codec: CodecName, step: str, value: bytes | None
    ) -> None:
        rig = Rig(codec, step=step)
        empty = rig.msg(1)
        empty._value = value
        rig.process([rig.msg(0), empty, rig.msg(2)])
        [letter] = rig.producer.acked
        headers = dict(letter["headers"])
        assert headers["x-dlq-reason"] == b"empty"
        assert headers["x-dlq-stage"] == b"decode"
        assert headers["x-dlq-offset"] == b"1"
        assert letter["value"] == value
        assert rig.ok() == 2
        assert rig.sample("worker_logic_retries_total") == 0
        assert rig.consumer.stored == [[("in", 0, 3)]]


class TestLastContentType:
    """Two `content-type` headers: the last one says how the value is read."""

    def test_last_header(self) -> None:
        headers: list[tuple[str, bytes | None]] = [
            (CONTENT_TYPE, b"application/json"),
            ("x-seq", b"1"),
            (CONTENT_TYPE, b"application/vnd.msgpack"),
        ]
        assert last_header(headers, CONTENT_TYPE) == b"application/vnd.msgpack"
        assert last_header(None, CONTENT_TYPE) is None
        assert last_header([("a", b"1")], CONTENT_TYPE) is None

    @pytest.mark.parametrize("relabelled", [False, True])
    def test_auto_reads_by_the_last(self, relabelled: bool) -> None:
        rig = Rig("auto")
        msgpack = get_codec("msgspec-msgpack", "medium")
        value = msgpack.encode(msgpack.from_builtins(PAYLOADS[0]))
        labels = [b"application/json", b"application/vnd.msgpack"]
        if not relabelled:
            labels.reverse()  # says JSON last: the msgpack value cannot be JSON
        headers: list[tuple[str, bytes | None]] = [(CONTENT_TYPE, v) for v in labels]
        rig.process([rig.msg(0, value=value, headers=headers)])
        ok = rig.sample("worker_messages_total", codec="auto", outcome="ok")
        assert ok == (1 if relabelled else 0)
        assert len(rig.producer.acked) == (0 if relabelled else 1)


@pytest.mark.usefixtures("unfreeze")
class TestEmptyAsync:
    """An async handler's path: the same `empty` letter, the handler never awaited."""

    @pytest.mark.parametrize("codec", REAL_CODECS)
    def test_every_codec(
        self, codec: CodecName, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        from tests.unit import test_app
        from tests.unit.test_async_worker import HANDLERS, run, stored

        monkeypatch.setattr(test_app, "CODEC", get_codec(codec, "medium"))
        rig = test_app.Rig(logic=f"{HANDLERS}:touch")
        empty = test_app.msg(1, value=b"")
        assert run(rig, [[test_app.msg(0), empty, test_app.msg(2)]]) == 0
        [letter] = rig.producer.acked
        headers = dict(letter["headers"])
        assert headers["x-dlq-reason"] == b"empty"
        assert headers["x-dlq-offset"] == b"1"
        assert rig.sample("worker_messages_total", codec=codec, outcome="ok") == 2
        assert stored(rig) == {0: 3}
