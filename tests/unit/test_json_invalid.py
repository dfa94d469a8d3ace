"""A value that is not valid JSON never decodes to a value, per JSON codec.

RFC 8259 has no NaN or Infinity, no number beyond what the reader can hold (`1e999`
and a 400-digit integer in a double field are overflows, not infinities), and JSON
exchanged between systems is UTF-8 without a byte order mark. msgspec-json and
orjson refuse each of these; pydantic's JSON parser read `NaN` and `1e999` as
floats, and `json.loads` (json-stdlib+pydantic) also read UTF-16 and UTF-32,
a BOM and UTF-8-encoded surrogates. Each input here is a valid message of the
project's payload generators made invalid by one rule, drawn by Hypothesis, so
the only right outcome is a `DecodeError`: what a codec would have written on
(`NaN` as `null` or as a bare `NaN`, a string no UTF-8 writer can write) is a
wrong value counted ok.
"""

from __future__ import annotations

import functools
import re
from typing import Final

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from codec import CodecName
from schemas.errors import DecodeError
from tests.fuzz.inputs import codec, samples

JSON_CODECS: Final = (
    "json+pydantic",
    "json-stdlib+pydantic",
    "orjson+pydantic",
    "msgspec-json",
)
INVALID: Final = settings(
    max_examples=60,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
_FLOAT: Final = re.compile(rb"(?<=[:\[,])-?\d+\.\d+(e[-+]?\d+)?(?=[,\]}])")
"""A float in the message (the double fields: metrics, prices, totals)."""
NOT_A_NUMBER: Final = (
    b"NaN",
    b"Infinity",
    b"-Infinity",
    b"1e999",
    b"-1e999",
    b"9" * 400 + b".0",
)
NOT_UTF8: Final = ("utf-16", "utf-16-le", "utf-32", "utf-8-sig")


@functools.cache
def valid(key: CodecName, profile: str) -> list[bytes]:
    return [s.data for s in samples(key, profile, 4, seed=29)]


def refused(key: CodecName, profile: str, data: bytes) -> None:
    with pytest.raises(DecodeError) as info:
        codec(key, profile).decode(data)
    assert info.value.codec == key and info.value.reason == "decode"


@pytest.mark.parametrize("profile", ["small", "medium"])
@pytest.mark.parametrize("key", JSON_CODECS)
@INVALID
@given(data=st.data())
def test_a_number_json_cannot_hold_is_refused(
    key: CodecName, profile: str, data: st.DataObject
) -> None:
    message = data.draw(st.sampled_from(valid(key, profile)))
    floats = list(_FLOAT.finditer(message))
    assert floats, message[:200]
    where = data.draw(st.sampled_from(floats))
    bad = data.draw(st.sampled_from(NOT_A_NUMBER))
    refused(key, profile, message[: where.start()] + bad + message[where.end() :])


@pytest.mark.parametrize("profile", ["small", "medium"])
@pytest.mark.parametrize("key", JSON_CODECS)
@INVALID
@given(data=st.data())
def test_json_not_in_utf8_is_refused(
    key: CodecName, profile: str, data: st.DataObject
) -> None:
    message = data.draw(st.sampled_from(valid(key, profile)))
    encoding = data.draw(st.sampled_from(NOT_UTF8))
    refused(key, profile, message.decode().encode(encoding))


@pytest.mark.parametrize("key", JSON_CODECS)
@pytest.mark.parametrize(
    "raw", [b"\xed\xa0\x80", b"\xed\xbf\xbf", b"\xc0\xaf", b"\xff"]
)
def test_invalid_utf8_in_a_string_is_refused(key: CodecName, raw: bytes) -> None:
    """A surrogate encoded in UTF-8 (CESU-8), an overlong form, a stray byte."""
    message = b'{"id":1,"name":"a' + raw + b'","tags":[],"metrics":[]}'
    refused(key, "small", message)


@pytest.mark.parametrize("key", JSON_CODECS)
def test_a_valid_message_still_decodes(key: CodecName) -> None:
    for message in valid(key, "medium"):
        codec(key, "medium").decode(message)
