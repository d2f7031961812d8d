"""The report in Markdown: the verdicts first, a table per paper grid and per table of
``_text``, the figures linked beside the file."""

from __future__ import annotations

from orthotune.reports import _text
from orthotune.reports._report import Report
from orthotune.reports._text import Links


def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return [line(header), "|" + "---|" * len(header), *(line(r) for r in rows)]


def render_md(report: Report, links: Links) -> str:
    out = ["# orthotune report", "", *(f"{line}  " for line in _text.heading(report)), ""]
    out += ["## Summary", "", *(f"- {line}" for line in report.verdicts.lines), ""] if report.verdicts.lines else []
    out += [*(f"> **Warning:** {w}  " for w in report.verdicts.warnings), ""] if report.verdicts.warnings else []
    if report.summary.empty:
        out += ["No trials match: nothing to report.", ""]
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
