"""README's table of what bounds decode work is `codec.work_bounds`' (one place)."""

from __future__ import annotations

from pathlib import Path

from codec import CODECS
from codec.work_bounds import WORK_BOUNDS, table

README = Path(__file__).resolve().parents[2] / "README.md"


class TestWorkBounds:
    """Every real codec has its bound, and README prints the same table."""

    def test_readme_prints_the_table(self) -> None:
        assert table() in README.read_text()

    def test_every_codec_has_a_bound(self) -> None:
        named = {c.strip("` ") for codecs, _ in WORK_BOUNDS for c in codecs.split(",")}
        assert set(CODECS) - {"auto"} <= named
