"""The report in LaTeX: booktabs tables (the paper grids, the paired comparison, the other
tables with their notes as captions), the verdicts and missing cells as comments, the
figures included beside the file."""

from __future__ import annotations

from typing import TYPE_CHECKING

from orthotune.core import ARMS, cell_label
from orthotune.reports import _text
from orthotune.reports._arms import arms_table, table_note
from orthotune.reports._load import ROWS
from orthotune.reports._report import Report
from orthotune.reports._text import Links

if TYPE_CHECKING:
    from orthotune.reports._plots import Figure

_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
        "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
        "−": "$-$", "Δ": r"$\Delta$", "α": r"$\alpha$", "—": "--", "±": r"$\pm$"}


def tex(text: object) -> str:
    return "".join(_TEX.get(c, c) for c in str(text))


def _latex_table(caption: str, header: list[str], rows: list[list[str]], size: str = "\\small") -> list[str]:
    """A booktabs table of left-aligned columns (already escaped caption, raw cells)."""
    return ["\\begin{table}[t]", "\\centering", size, f"\\caption{{{caption}}}",
            "\\begin{tabular}{" + "l" * len(header) + "}", "\\toprule",
            " & ".join(tex(h) for h in header) + " \\\\", "\\midrule",
            *(" & ".join(tex(c) for c in row) + " \\\\" for row in rows),
            "\\bottomrule", "\\end{tabular}", "\\end{table}", ""]


def _latex_accuracy(report: Report, setting: str, variant: str | None) -> list[str]:
    """One paper-style table: a row per dataset and backbone, a column pair per depth."""
    depths, rows = _text.paper_grid(report, setting, variant)
    label = _text.setting_title(setting) + (f", variant {variant}" if variant else "")
    out = ["\\begin{table}[t]", "\\centering", "\\small",
           f"\\caption{{Test accuracy (\\%), {tex(label)}: mean $\\pm$ std (ddof = 1) over "
           f"repeats of the validation-selected config; bold: better of the pair.}}",
           "\\begin{tabular}{" + "l" * len(ROWS) + "c" * len(ARMS) * len(depths) + "}", "\\toprule",
           " " + "& " * len(ROWS) + " & ".join(
               f"\\multicolumn{{{len(ARMS)}}}{{c}}{{{tex(cell_label(_text.COLUMN, d))}}}" for d in depths) + " \\\\",
           " & ".join([*ROWS] + [tex(arm.name) for _ in depths for arm in ARMS]) + " \\\\",
           "\\midrule"]
    for names, cells in rows:
        texts = [(f"\\textbf{{{tex(t)}}}" if better else tex(t)) if t else "--" for t, better in cells]
        out.append(" & ".join([*(tex(n) for n in names), *texts]) + " \\\\")
    return out + ["\\bottomrule", "\\end{tabular}", "\\end{table}", ""]


#: The table's marks (``_arms.MARKS``) in LaTeX.
MARKS_TEX = {"better": "$\\uparrow$", "worse": "$\\downarrow$", "not different": "$=$", "no test": "?"}


def _latex_methods(report: Report, title: str, datasets: list[str], rows: list) -> list[str]:
    """The paper's table of the named arms: a row per method, a column per dataset."""
    # the marks go in as placeholders tex() leaves alone, then become their symbols
    placeholders = {mark: f"MARK{i}X" for i, mark in enumerate(MARKS_TEX)}
    caption = tex(f"Methods against {report.arms.target or 'their baselines'}, {title}. "
                  + table_note(report.arms, placeholders))
    for mark, placeholder in placeholders.items():
        caption = caption.replace(placeholder, MARKS_TEX[mark])
    out = ["\\begin{table}[t]", "\\centering", "\\small", f"\\caption{{{caption}}}",
           "\\begin{tabular}{l" + "c" * len(datasets) + "}", "\\toprule",
           " & ".join(["Method", *(tex(d) for d in datasets)]) + " \\\\", "\\midrule"]
    for name, cells in rows:
        texts = [(f"\\textbf{{{tex(t)}}}" if best else tex(t)) + (f" {MARKS_TEX[m]}" if m else "")
                 for t, best, m in cells]
        out.append(" & ".join([tex(name), *texts]) + " \\\\")
    return out + ["\\bottomrule", "\\end{tabular}", "\\end{table}", ""]


def _latex_figure(figure: Figure, link: str) -> list[str]:
    return ["\\begin{figure}[t]", "\\centering", f"\\includegraphics[width=\\linewidth]{{{link}}}",
            f"\\caption{{{tex(figure.title)}. {tex(figure.caption)}}}", "\\end{figure}", ""]


def render_latex(report: Report, links: Links) -> str:
    out = ["% orthotune report: needs \\usepackage{booktabs} and \\usepackage{graphicx}",
           *(f"% {line}" for line in _text.heading(report)), "",
           *(f"% verdict: {line}" for line in report.verdicts.lines),
           *(f"% warning: {w}" for w in report.verdicts.warnings), ""]
    out += [*(f"% comparison: {line}" for line in report.verdicts.comparisons)]
    for title, datasets, rows in arms_table(report.arms):
        out += _latex_methods(report, title, datasets, rows)
    for setting, variant, _title in _text.sections(report):
        out += _latex_accuracy(report, setting, variant)
    if not report.summary.empty:
        out += _latex_table(tex(_text.pair_note(report)), _text.PAIR_HEADER, _text.pair_rows(report))
    for title, header, rows, note in _text.extra_tables(report):
        out += _latex_table(f"{tex(title)}. {tex(note)}", header, rows, "\\scriptsize")
    if len(report.missing):
        out += ["% Missing cells:", *(f"% {' / '.join(row)}" for row in _text.missing_rows(report)), ""]
    for figure in report.figures if links else []:
        out += _latex_figure(figure, links[figure.name])
    return "\n".join(out)
