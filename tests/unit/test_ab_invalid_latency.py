"""The A/B report names the cases whose worker left invalid latencies out."""

from __future__ import annotations

import io

from abrunner.lab.case_figures import E2E_INVALID, figures
from abrunner.lab.worker_probe import Snapshot, parse
from abrunner.plan import Case, Profile
from abrunner.report import tables as abreport, terminal
from tests.unit.test_ab_report import RESULTS, report, result


def test_shown_only_when_non_zero() -> None:
    assert "Invalid latencies" not in abreport.markdown(report())
    skewed = [*RESULTS, result("protobuf", 10.0, repeat=1, e2e_invalid=1234)]
    md = abreport.markdown(report(skewed))
    assert "**Invalid latencies**" in md
    assert "`protobuf` on `medium` (repeat 1): 1,234" in md
    out = io.StringIO()
    terminal.print_tables(report(skewed), out)
    assert "`protobuf` on `medium` (repeat 1): 1,234" in out.getvalue()


def _snapshot(at: float, invalid: float | None) -> Snapshot:
    text = 'worker_messages_total{codec="protobuf",outcome="ok"} 10\n'
    if invalid is not None:
        text += f'{E2E_INVALID}{{codec="protobuf",reason="negative"}} {invalid}\n'
    return Snapshot(at=at, cpu_s=at, rss=1, metrics=parse(text))


def test_figure_is_the_window_delta() -> None:
    case = Case("protobuf", Profile("medium"), 0)
    got = figures(case, _snapshot(0, 5), _snapshot(1, 5), _snapshot(2, 12), [], [])
    assert got.e2e_invalid == 7
    old = figures(
        case, _snapshot(0, None), _snapshot(1, None), _snapshot(2, None), [], []
    )
    assert old.e2e_invalid is None
