"""The report on the terminal: the answer first, then the tables and the notes."""

from __future__ import annotations

from typing import TextIO

from rich.console import Console
from rich.markdown import Markdown
from rich.table import Table

from abrunner.report import answer, decisions, decode_share, notes, rejections
from abrunner.report.framing import section as framing_section
from abrunner.report.tables import markdown_table, tables
from abrunner.results import Report


def print_tables(report: Report, out: TextIO) -> None:
    """The report's tables and warnings on `out`.

    A terminal gets rich tables; anything else (a pipe, a file) gets report.md's
    Markdown tables, one line per row whatever the width. Each codec's rejections
    list its `rejections.SHOWN` most frequent reasons and say that report.md
    lists the others.
    """
    cut = rejections.Cut(rejections.SHOWN, str(report.plan.out_dir / "report.md"))
    said = [x for x in answer.section(report) if not x.startswith("![")]
    before = [
        notes.interrupted(report),
        "\n".join(said).strip() or None,
        notes.left_out(report.plan),
        notes.repeat_warning(report.plan),
        notes.baseline_behind(report),
    ]
    after = [
        framing_section(report),
        decisions.section(report),
        decode_share.note(report),
        rejections.sections(report.results, list(report.summary), cut),
        notes.decode_differs(report.summary),
        notes.invalid_latencies(report),
    ]
    texts = [t for t in before if t], [t for t in after if t]
    if not out.isatty():
        lines = [f"{text}\n" for text in texts[0]]
        for profile, headers, body in tables(report):
            heading = report.plan.heading(profile)
            lines += [f"## {heading}", "", *markdown_table(headers, body), ""]
        lines += [f"{text}\n" for text in texts[1]]
        out.write("\n".join(lines))
        return
    console = Console(file=out)
    for text in texts[0]:
        console.print(Markdown(text))
    for profile, headers, body in tables(report):
        view = Table(title=report.plan.heading(profile).replace("`", ""))
        for i, header in enumerate(headers):  # the codec column stays whole
            view.add_column(header, overflow="fold", no_wrap=i == 0)
        for cells in body:
            view.add_row(*cells)
        console.print(view)
    for text in texts[1]:
        console.print(Markdown(text))
