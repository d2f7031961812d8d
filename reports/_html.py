"""The report in HTML: one self-contained page, the figures embedded as data URIs, wide
tables wrapped to the page."""

from __future__ import annotations

import base64
import html

from orthotune.reports import _text
from orthotune.reports._arms import arms_table, table_note
from orthotune.reports._report import Report
from orthotune.reports._text import Links

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 72em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; max-width: 100%; }
table.wide { font-size: 0.75em; width: 100%; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
table.wide th, table.wide td { padding: 0.2em 0.3em; }
table.wide td { overflow-wrap: break-word; } table.widest th { overflow-wrap: anywhere; }
th { background: #f3f3f3; } td.name { text-align: left; }
b { color: #000; } figure { margin: 1.5em 0; } figure img { max-width: 100%; }
figcaption, p.note { color: #555; font-size: 0.9em; }
p.warning { background: #fff4e0; border-left: 4px solid #e69500; padding: 0.4em 0.8em; }
ul.verdicts li { margin: 0.2em 0; }
"""
# Lets a reader's browser, or the headless test, see that every figure decoded.
_SCRIPT = """
window.addEventListener('load', function () {
  var images = Array.prototype.slice.call(document.images);
  var loaded = images.filter(function (i) { return i.complete && i.naturalWidth > 0; });
  document.body.setAttribute('data-images', String(images.length));
  document.body.setAttribute('data-images-loaded', String(loaded.length));
  document.body.setAttribute('data-page-width', String(document.documentElement.scrollWidth));
});
"""


#: Tables with more columns than this wrap their cells to the page's width (72em, about
#: 1150 px) in a smaller font instead of running off a 1400 px page; their headers wrap at
#: spaces and underscores only.
WIDE_COLUMNS = 10
#: Beyond this many columns (the winners' hyperparameters) headers may also break inside a
#: word: whole words would not fit the page.
WIDEST_COLUMNS = 20


def _breakable(name: str) -> str:
    """A header that may wrap after each underscore (``weight_decay_`` / ``output``) and at
    spaces, never inside a word: breaking anywhere made ``setting`` read ``setti`` / ``ng``."""
    return html.escape(name).replace("_", "_<wbr>")


def _html_table(header: list[str], rows: list[list[str]], classes: str = "") -> str:
    if len(header) > WIDE_COLUMNS:
        classes = f"{classes} wide".strip()
    if len(header) > WIDEST_COLUMNS:
        classes = f"{classes} widest"
    head = "".join(f"<th>{_breakable(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(rows_cell for rows_cell in row) + "</tr>" for row in rows)
    return f'<table class="{classes}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _td(text: str, name: bool = False, bold: bool = False) -> str:
    inner = f"<b>{html.escape(text)}</b>" if bold else html.escape(text)
    return f'<td class="name">{inner}</td>' if name else f"<td>{inner}</td>"


def _numeric(text: str) -> bool:
    try:
        float(text.split(" ")[0].replace("−", "-"))
    except ValueError:
        return False
    return True


def _html_summary(report: Report) -> list[str]:
    """The verdict lines and the warnings on what they mean, first on the page."""
    parts = []
    if report.verdicts.lines:
        items = "".join(f"<li>{html.escape(line)}</li>" for line in report.verdicts.lines)
        parts += ["<h2>Summary</h2>", f'<ul class="verdicts">{items}</ul>']
    return parts + [f'<p class="warning"><b>Warning:</b> {html.escape(w)}</p>' for w in report.verdicts.warnings]


def _html_accuracy(report: Report, setting: str, variant: str | None, title: str) -> list[str]:
    depths, rows = _text.paper_grid(report, setting, variant)
    body = [[_td(n, True) for n in names] + [_td(t or "—", bold=better) for t, better in cells]
            for names, cells in rows]
    return [f"<h2>{html.escape(title)}</h2>", _html_table(_text.paper_header(depths), body, "paper")]


#: The table's marks (``_arms.MARKS``) in HTML.
MARKS_HTML = {"better": "▲", "worse": "▼", "not different": "=", "no test": "?"}


def _html_methods(report: Report) -> list[str]:
    """The comparisons' verdict lines and the paper's table of the named arms."""
    parts = []
    if report.verdicts.comparisons:
        items = "".join(f"<li>{html.escape(line)}</li>" for line in report.verdicts.comparisons)
        parts += ["<h2>Comparisons</h2>", f'<ul class="verdicts">{items}</ul>']
    for title, datasets, rows in arms_table(report.arms):
        body = [[_td(name, True), *(_td(t + (f" {MARKS_HTML[m]}" if m else ""), bold=best) for t, best, m in cells)]
                for name, cells in rows]
        heading = f"Methods against {report.arms.target or 'their baselines'}: {title}"
        parts += [f"<h2>{html.escape(heading)}</h2>",
                  _html_table(["method", *datasets], body, "paper"),
                  f'<p class="note">{html.escape(table_note(report.arms, MARKS_HTML))}</p>']
    return parts


def _html_pairs(report: Report) -> list[str]:
    rows = [[_td(c, i < _text.PAIR_NAMES or i in _text.PAIR_WORDS) for i, c in enumerate(row)]
            for row in _text.pair_rows(report)]
    return [f'<p class="note">{html.escape(_text.ACC_NOTE)}</p>', "<h2>Paired comparison: Ortho-GConv − original</h2>",
            _html_table(_text.PAIR_HEADER, rows, "paired"),
            f'<p class="note">{html.escape(_text.pair_note(report))}</p>']


def _html_extra(title: str, header: list[str], rows: list[list[str]], note: str) -> list[str]:
    body = [[_td(c, not _numeric(c)) for c in row] for row in rows]
    return [f"<h2>{html.escape(title)}</h2>", _html_table(header, body), f'<p class="note">{html.escape(note)}</p>']


def _html_missing(report: Report) -> list[str]:
    missing = [[_td(c, True) for c in row] for row in _text.missing_rows(report)]
    return ["<h2>Missing cells</h2>",
            _html_table(_text.MISSING_HEADER, missing, "missing") if missing else "<p>None.</p>"]


def _html_figures(report: Report) -> list[str]:
    """The plots, embedded as data URIs (the page is one self-contained file)."""
    parts = ["<h2>Plots</h2>"] + ([] if report.figures else [f"<p>{html.escape(_text.no_plots(report))}</p>"])
    for figure in report.figures:
        data = base64.b64encode(figure.png).decode("ascii")
        parts.append(f'<figure id="{html.escape(figure.name)}"><img alt="{html.escape(figure.title)}" '
                     f'src="data:image/png;base64,{data}"><figcaption>{html.escape(figure.title)}. '
                     f"{html.escape(figure.caption)}</figcaption></figure>")
    return parts


def render_html(report: Report, links: Links) -> str:
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             "<title>orthotune report</title>", f"<style>{_CSS}</style>",
             f"<script>{_SCRIPT}</script></head><body>", "<h1>orthotune report</h1>",
             *(f"<p>{html.escape(line)}</p>" for line in _text.heading(report)), *_html_summary(report)]
    if report.summary.empty and report.arms.empty:
        parts.append("<p>No trials match: nothing to report.</p>")
    parts += _html_methods(report)
    for setting, variant, title in _text.sections(report):
        parts += _html_accuracy(report, setting, variant, title)
    if not report.summary.empty:
        parts += _html_pairs(report)
    for extra in _text.extra_tables(report):
        parts += _html_extra(*extra)
    parts += [*_html_missing(report), *_html_figures(report), "</body></html>"]
    return "\n".join(parts)
