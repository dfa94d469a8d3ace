"""The docs' table of what bounds decode work is `codec.work_bounds`' (one place)."""

from __future__ import annotations

from pathlib import Path

from codec import CODECS
from codec.work_bounds import WORK_BOUNDS, table

CODECS_PAGE = Path(__file__).resolve().parents[2] / "docs" / "explanation" / "codecs.md"


class TestWorkBounds:
    """Every real codec has its bound, and the codecs page prints the same table."""

    def test_the_codecs_page_prints_the_table(self) -> None:
        assert table() in CODECS_PAGE.read_text()

    def test_every_codec_has_a_bound(self) -> None:
        named = {c.strip("` ") for codecs, _ in WORK_BOUNDS for c in codecs.split(",")}
        assert set(CODECS) - {"auto"} <= named
