"""`codec-kafka start`: a signal may land between any two statements of a start.

The broker is a fake here; tests/integration/test_localkafka.py runs the real one.
A signal is simulated by raising KeyboardInterrupt (what the foreground SIGTERM
handler raises) from the call it would interrupt.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest

import localkafka.cli as cli
from localkafka.state import STATE_FILE


class FakeKafka:
    """Stands in for LocalKafka; ``interrupt_in`` names the call a signal hits."""

    interrupt_in: ClassVar[str] = ""
    made: ClassVar[list[FakeKafka]] = []
    client_file: Path | None = None  # a plaintext listener writes none

    def __init__(self, data_dir: Path, port: int, **kwargs: object) -> None:
        self.data_dir = data_dir
        self.detached = kwargs["detached"]
        self.stopped = 0
        self.made.append(self)

    @property
    def pid(self) -> int:
        return 4242

    def start(self, timeout: float = 60.0) -> str:
        if self.interrupt_in == "start":
            raise KeyboardInterrupt
        return "127.0.0.1:19092"

    def wait(self) -> int:
        # the state file is written before the wait: a signal now must remove it
        assert (self.data_dir / STATE_FILE).is_file()
        if self.interrupt_in == "wait":
            raise KeyboardInterrupt
        return 3

    def stop(self, timeout: float = 20.0) -> None:
        # a second signal during the stop is ignored, not raised
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
        self.stopped += 1


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[FakeKafka]]:
    monkeypatch.setattr(cli, "LocalKafka", FakeKafka)
    monkeypatch.setattr(cli, "kafka_version", lambda: "4.1.2")
    FakeKafka.made, FakeKafka.interrupt_in = [], ""
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield FakeKafka
    for sig, handler in handlers.items():
        signal.signal(sig, handler)


def _interrupt_in(monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    def hit(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    if where == "write_state":
        monkeypatch.setattr(cli, "write_state", hit)
    elif where == "print":
        monkeypatch.setattr("builtins.print", hit)
    else:
        FakeKafka.interrupt_in = where


@pytest.mark.parametrize("where", ["start", "write_state", "print", "wait"])
def test_foreground_signal_anywhere_stops_once_and_exits_0(
    fake: type[FakeKafka],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    where: str,
) -> None:
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT,)}
    _interrupt_in(monkeypatch, where)
    assert cli.main(["start", "--foreground", "--data-dir", str(tmp_path)]) == 0
    (kafka,) = fake.made
    assert kafka.stopped == 1
    assert not (tmp_path / STATE_FILE).exists()
    # the handlers held during the stop are given back
    assert signal.getsignal(signal.SIGINT) is handlers[signal.SIGINT]
    assert signal.getsignal(signal.SIGTERM) is cli._interrupt


def test_foreground_broker_death_is_exit_1_and_cleans_up(
    fake: type[FakeKafka], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["start", "--foreground", "--data-dir", str(tmp_path)]) == 1
    (kafka,) = fake.made
    assert kafka.stopped == 1
    assert not (tmp_path / STATE_FILE).exists()
    assert "broker exited with code 3" in capsys.readouterr().err


def test_detached_start_leaves_the_broker_running(
    fake: type[FakeKafka], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["start", "--data-dir", str(tmp_path)]) == 0
    (kafka,) = fake.made
    assert kafka.detached and kafka.stopped == 0
    state = json.loads((tmp_path / STATE_FILE).read_text())
    assert state["pid"] == 4242 and state["bootstrap"] == "127.0.0.1:19092"
    assert capsys.readouterr().out.strip() == "127.0.0.1:19092"


def test_detached_start_interrupted_stops_what_it_started(
    fake: type[FakeKafka], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _interrupt_in(monkeypatch, "write_state")
    assert cli.main(["start", "--data-dir", str(tmp_path)]) == 0
    (kafka,) = fake.made
    assert kafka.stopped == 1
    assert not (tmp_path / STATE_FILE).exists()
