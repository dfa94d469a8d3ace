"""A recording of framed values (a schema registry's frames) replayed without
`--framing confluent` is refused before the run, saying so in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from codec.registry.frame import id_header
from loadgen.recording import Record, RecordingInfo, RecordingWriter
from loadgen.replay import probe
from schemas.errors import ConfigError


def test_framed_values_without_framing_say_so(tmp_path: Path) -> None:
    path = tmp_path / "framed.rec"
    with RecordingWriter(path, RecordingInfo("orders", 1, 1)) as out:
        for i in range(3):  # no content-type: confluent-kafka's serializers set none
            out.write(Record(0, i, 1, 1000 + i, None, id_header(7) + b"\x02ab", []))
    with pytest.raises(ConfigError) as info:
        probe(path, "medium")
    text = str(info.value)
    assert "\n" not in text
    assert "look framed (magic byte 0, schema id 7)" in text
    assert text.endswith(
        "give --framing confluent and the --registry-url they were written to"
    )
