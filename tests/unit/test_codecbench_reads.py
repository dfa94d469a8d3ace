"""codec-bench's +all and +k columns: every codec, the named fields, bad names refused."""

from __future__ import annotations

import pytest

import codecbench
from codec import REAL_CODECS
from codecbench.cli import main
from codecbench.render import HEADERS, to_markdown
from tests.support import in_fresh_interpreter

FAST = {
    "pool_size": 3,
    "repeats": 1,
    "warmups": 0,
    "min_time_s": 2e-4,
    "large_bytes": 2000,
    "alloc_calls": 3,
}


def test_every_codec_has_the_three_columns() -> None:
    report = in_fresh_interpreter(
        codecbench.run,
        REAL_CODECS,
        ["small"],
        read_fields="name,tags",
        **FAST,  # type: ignore[arg-type]
    )
    assert report.method.read_fields == "name,tags"
    for case in report.results:
        assert case.read_all is not None and case.read_fields is not None
        assert case.decode.us.median > 0
        assert case.read_all.us.median > 0 and case.read_fields.us.median > 0
    md = to_markdown(report)
    assert "+all us" in HEADERS and "+k us" in HEADERS
    assert "compares like with like" in md and "+k reads 'name,tags'" in md


def test_bad_fields_are_refused_before_measuring(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = main(
        ["--codecs", "avro", "--profiles", "small,medium", "--read-fields", "customer"]
    )
    assert code == 2
    assert "--read-fields: small: read_fields: 'customer': Payload has no field" in (
        capsys.readouterr().err
    )


def test_read_k_is_a_count(capsys: pytest.CaptureFixture[str]) -> None:
    flags = ["--pool-size", "3", "--repeats", "1", "--warmups", "0"]
    flags += ["--min-time", "0.0002", "--alloc-calls", "3"]
    assert (
        main(["--codecs", "flatbuffers", "--profiles", "small", "--read", "2", *flags])
        == 0
    )
    assert "+k reads '2'" in capsys.readouterr().out
