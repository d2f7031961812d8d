"""The report in Markdown: the verdicts first, a table per paper grid and per table of
``_text``, the figures linked beside the file."""

from __future__ import annotations

from orthotune.reports import _text
from orthotune.reports._arms import arms_table, table_note
from orthotune.reports._report import Report
from orthotune.reports._text import Links


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return [line(header), "|" + "---|" * len(header), *(line(r) for r in rows)]


#: The table's marks (``_arms.MARKS``) in Markdown.
MARKS_MD = {"better": "▲", "worse": "▼", "not different": "=", "no test": "?"}


def _md_cell(text: str, best: bool, mark: str) -> str:
    shown = f"**{text}**" if best else text
    return f"{shown} {MARKS_MD[mark]}" if mark else shown


def render_md(report: Report, links: Links) -> str:
    out = ["# orthotune report", "", *(f"{line}  " for line in _text.heading(report)), ""]
    out += ["## Summary", "", *(f"- {line}" for line in report.verdicts.lines), ""] if report.verdicts.lines else []
    out += [*(f"> **Warning:** {w}  " for w in report.verdicts.warnings), ""] if report.verdicts.warnings else []
    out += ["## Comparisons", "", *(f"- {line}" for line in report.verdicts.comparisons), ""] \
        if report.verdicts.comparisons else []
    if report.summary.empty and report.arms.empty:
        out += ["No trials match: nothing to report.", ""]
    for title, datasets, rows in arms_table(report.arms):
        body = [[name, *(_md_cell(text, best, mark) for text, best, mark in cells)] for name, cells in rows]
        out += [f"## Methods against {report.arms.target or 'their baselines'}: {title}", "",
                *_md_table(["method", *datasets], body), "", table_note(report.arms, MARKS_MD), ""]
    for setting, variant, title in _text.sections(report):
        depths, rows = _text.paper_grid(report, setting, variant)
        body = [[*names] + [(f"**{t}**" if better else t) if t else "—" for t, better in cells]
                for names, cells in rows]
        out += [f"## {title}", "", *_md_table(_text.paper_header(depths), body), ""]
    if not report.summary.empty:
        out += [_text.ACC_NOTE, "", "## Paired comparison: Ortho-GConv − original", "",
                *_md_table(_text.PAIR_HEADER, _text.pair_rows(report)), "", _text.pair_note(report), ""]
    for title, header, rows, note in _text.extra_tables(report):
        out += [f"## {title}", "", *_md_table(header, rows), "", note, ""]
    out += ["## Missing cells", ""]
    out += [*_md_table(_text.MISSING_HEADER, _text.missing_rows(report)), ""] if len(report.missing) else ["None.", ""]
    out += ["## Plots", ""]
    if not report.figures:
        out += [_text.no_plots(report), ""]
    elif links is None:
        out += [f"{len(report.figures)} figures; write the report to a file (`-o report.md`) to get them.", ""]
    else:
        for figure in report.figures:
            out += [f"### {figure.title}", "", f"![{figure.title}]({links[figure.name]})", "", figure.caption, ""]
    return "\n".join(out)
