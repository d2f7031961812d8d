"""Report formats (md, csv, latex, html), one registry entry each.

md and latex written to a file put the figures beside it as ``STEM-NAME.png`` and link
them; html is one self-contained file with the figures embedded as data URIs; csv is the
per-pair table only (one row per setting, dataset, backbone and depth, full precision).
Printed to stdout (no ``-o``), md and latex carry no figures and say so.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from orthotune.core import ARMS, OBJECTIVE, REFERENCE, SETTINGS, OrthotuneError, Registry, cell_label
from orthotune.reports._curve import SETTLED_RULE
from orthotune.reports._load import ARM, COLUMNS, LEAD, ROWS, VARIANT
from orthotune.reports._report import Report
from orthotune.reports._tables import IMPORTANCE_SEED, IMPORTANCE_TRIALS
from orthotune.reports._verdict import FEW_TRIALS, reference_place

if TYPE_CHECKING:
    from orthotune.reports._plots import Figure

#: The paper tables' one column coordinate (depth): a column pair (the arms) per value.
(COLUMN,) = COLUMNS

#: ``{figure name: link}`` for figures written beside the report; ``None`` when there are none.
Links = dict[str, str] | None


@dataclass(frozen=True)
class Format:
    suffix: str
    render: Callable[[Report, Links], str]
    figures_beside: bool  # with -o, write the PNGs next to the file and link them
    figures_embedded: bool = False  # the figures are part of the text itself

    def wants_figures(self, out: str | Path | None) -> bool:
        """Whether rendering to ``out`` (``None``: stdout) shows figures (so they are worth drawing)."""
        return self.figures_embedded or (self.figures_beside and out is not None)


FORMATS: Registry[Format] = Registry("report format")


def format_of(out: str | Path | None) -> str:
    """The format a file's suffix names (``report.html``: html, ``.tex``: latex); md for
    stdout (``None``) and for any other suffix."""
    suffix = Path(out).suffix.lower() if out is not None else ""
    return next((name for name in FORMATS if FORMATS.get(name).suffix == suffix), "md")


def write_report(report: Report, name: str, out: str | Path | None = None) -> str | None:
    """Render ``report`` in format ``name``; return the text, or write it (and figures) to ``out``."""
    fmt = FORMATS.get(name)
    if out is None:
        return fmt.render(report, None)
    path = Path(out)
    if path.is_dir():
        raise OrthotuneError(f"-o {str(out)!r} is a folder; give a file name such as report{fmt.suffix}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        links: Links = None
        if fmt.figures_beside:
            links = {}
            for figure in report.figures:
                image = path.with_name(f"{path.stem}-{figure.name}.png")
                image.write_bytes(figure.png)
                links[figure.name] = image.name
        path.write_text(fmt.render(report, links), encoding="utf-8")
    except OSError as error:
        raise OrthotuneError(f"cannot write the report to {str(out)!r}: {error.strerror or error}") from None
    return None


# -- shared pieces -------------------------------------------------------------------------

def _pct(value: object) -> str:
    return f"{100 * float(value):.2f}" if _finite(value) else "—"


def _finite(value: object) -> bool:
    try:
        return value is not None and math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


def _acc(row: pd.Series, prefix: str, pm: str = " ± ") -> str | None:
    mean, std = row[f"{prefix}_test_acc"], row[f"{prefix}_test_acc_std"]
    return f"{_pct(mean)}{pm}{_pct(std)}" if _finite(mean) else None


def _p(value: object) -> str:
    return f"{float(value):.3g}" if _finite(value) else "—"


def _signed(value: object) -> str:
    return f"{100 * float(value):+.2f}" if _finite(value) else "—"


def _plain(value: object, digits: str = ".3g") -> str:
    return format(float(value), digits) if _finite(value) else "—"


def number(value: object) -> str:
    """A value as its decimal (0.7, not 0.7000000000000001; 5, not 5.0); missing as —."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value)).lower()
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.12g}"
    return str(value)


def paper_grid(report: Report, setting: str, variant: str | None = None,
               ) -> tuple[list[int], list[tuple[tuple[str, ...], list[tuple[str | None, bool]]]]]:
    """The paper-style table of one setting (and variant): its depths, and per row (the row
    coordinates' values: dataset, backbone) the cells in depth x arm order as ``(text or None,
    better)``."""
    rows = report.summary[report.summary["setting"] == setting]
    if variant is not None:
        rows = rows[rows[VARIANT] == variant]
    depths = sorted(int(d) for d in rows[COLUMN].unique())
    out = []
    for names, group in rows.groupby(list(ROWS), sort=True):
        by_depth = {int(r[COLUMN]): r for _, r in group.iterrows()}
        cells = []
        for depth in depths:
            row = by_depth.get(depth)
            for arm in ARMS:
                if row is None:
                    cells.append((None, False))
                else:
                    cells.append((_acc(row, arm.prefix), row["better"] == arm.name))
        out.append((tuple(names), cells))
    return depths, out


def paper_header(depths: list[int]) -> list[str]:
    """The paper table's header: the row coordinates, then ``depth D ARM`` per column."""
    return [*ROWS] + [f"{cell_label(COLUMN, d)} {arm.name}" for d in depths for arm in ARMS]


def setting_title(setting: str) -> str:
    """How the report titles ``setting`` (its name, for a setting this version does not know)."""
    return SETTINGS.get(setting).title if setting in SETTINGS.names() else setting


def settings(report: Report) -> list[str]:
    return sorted(report.summary["setting"].unique())


def sections(report: Report) -> list[tuple[str, str | None, str]]:
    """The paper tables: ``(setting, variant or None, title)``, one per setting and variant."""
    variants = sorted(report.summary[VARIANT].dropna().unique())
    out = []
    for setting in settings(report):
        title = f"Test accuracy (%, mean ± std with ddof = 1), {setting_title(setting)}"
        if len(variants) <= 1:
            out.append((setting, None, title))
            continue
        mine = report.summary[report.summary["setting"] == setting]
        out += [(setting, v, f"{title}, variant {v}") for v in sorted(mine[VARIANT].dropna().unique())]
    return out


def _heading(report: Report) -> list[str]:
    failed = f" ({report.failed} failed)" if report.failed else ""
    return [
        f"Store: {report.store}",
        f"Searches: {', '.join(report.searches) or 'none'}; trials: {report.trials}{failed}; "
        f"filters: {report.filters.describe()}; generated {report.generated_at:%Y-%m-%d %H:%M} UTC.",
        f"Selection per cell (dataset, setting, backbone, depth, arm, variant switches): {report.selection_rule}",
    ]


def _pair_rows(report: Report) -> list[list[str]]:
    return [
        [*_lead(r), r[VARIANT], r["repeat_kind"],
         number(r["n_pairs"]), _signed(r["diff_mean"]), _signed(r["diff_std"]).lstrip("+"), _ci(r),
         _plain(r["t"]), _p(r["p"]), _p(r["p_holm"]), _acc(r, REFERENCE.prefix) or "—", reference_place(r),
         r["verdict"], r.get("settled") or "", r["note"] or ""]
        for _, r in report.summary.iterrows()
    ]


def _ci(row: pd.Series) -> str:
    """The 95% confidence interval of the mean difference, in points."""
    if not (_finite(row["ci_low"]) and _finite(row["ci_high"])):
        return "—"
    return f"[{_signed(row['ci_low'])}, {_signed(row['ci_high'])}]"


def _lead(row: pd.Series) -> list[str]:
    """A row's leading columns: its place in the report's order (setting, dataset, backbone, depth)."""
    return [number(row[c]) for c in LEAD]


PAIR_HEADER = [*LEAD, VARIANT, "repeat", "pairs", "Δ mean (pts)",
               "Δ std (pts, ddof 1)", "Δ 95% CI (pts)", "t", "p", "p (Holm)", "structure-agnostic (test %)",
               "arms vs structure-agnostic", "verdict", "tuning curve", "note"]
#: Leading columns of each table that hold names (left-aligned in html).
PAIR_NAMES = len(LEAD) + 2
#: The pair table's columns of words (left-aligned in html): the arms against the
#: structure-agnostic baseline, the verdict, the tuning curve, the note.
_PAIR_WORDS = {PAIR_HEADER.index(c) for c in ("verdict", "tuning curve", "arms vs structure-agnostic", "note")}
ACC_NOTE = ("Test accuracy (%) of each cell's validation-selected config: mean ± std (sample std, ddof = 1) over its "
            "repeats. Bold: the better of the pair (higher mean test accuracy; a label, not a selection). "
            "—: no winner (see Missing cells).")


def _pair_note(report: Report) -> str:
    return (f"Δ = Ortho-GConv − original test accuracy, matched repeat by repeat ({_repeat_nouns()}), in "
            f"percentage points (Δ std: sample std of the per-repeat "
            f"differences, ddof = 1; 95% CI: Student's t on the mean difference); {report.test_name}. "
            f"p is each pair's own; p (Holm) is adjusted over all the report's pairs (Holm's step-down, one "
            f"family). Verdict: significant when the Holm-adjusted p < {report.alpha:g}; 'reversed' when "
            f"Ortho-GConv is worse. "
            f"Few repeats make p-values coarse: read them with the number of pairs. The original arm pairs "
            f"with each Ortho-GConv variant sharing its variant label and common switches. Tuning curve: the "
            f"gain of the winners among each arm's first k trials, k = 1..n (figures below). {SETTLED_RULE} "
            f"Structure-agnostic: the validation-best model of the pair's dataset, setting and split rule that "
            f"never reads an edge (an MLP on the node features; graph tasks: node features summed per graph, "
            f"then an MLP), test accuracy mean ± std over its repeats; an arm is below or above it when its mean "
            f"test accuracy lies outside the baseline's 95% CI (Student's t over its repeats).")


def _repeat_nouns() -> str:
    """``split for full, seed for semi/official, ...``: each setting's repeat."""
    by_noun: dict[str, list[str]] = {}
    for name in SETTINGS:
        by_noun.setdefault(SETTINGS.get(name).repeat, []).append(name)
    return ", ".join(f"{noun} for {'/'.join(names)}" for noun, names in by_noun.items())


def _missing_rows(report: Report) -> list[list[str]]:
    return [[*_lead(r), r[VARIANT], r[ARM], r["reason"]] for _, r in report.missing.iterrows()]


MISSING_HEADER = [*LEAD, VARIANT, ARM, "why"]


def _winner_columns(report: Report) -> list[str]:
    """The winners table's columns: hyperparameters that some winner has (the original arm has no T)."""
    frame = report.hyperparameters
    return [c for c in frame.columns if c not in ("search", "trial_id") and frame[c].notna().any()]


def _winner_rows(report: Report) -> tuple[list[str], list[list[str]]]:
    columns = _winner_columns(report)
    rows = [[_pct(r[c]) if c in (OBJECTIVE, "test_acc") else number(r[c]) for c in columns]
            for _, r in report.hyperparameters.iterrows()]
    return columns, rows


WINNERS_NOTE = ("Every hyperparameter of each cell's winner; selection: the validation metric that picks "
                "each repeat's epoch (test is read there); status 'stopped': cut by ASHA (it competed on the "
                "validation accuracy it had reached); epochs: trained (most over the repeats); best_epoch: "
                "the selected epoch; val_acc/test_acc: mean over the repeats (%).")


def _ablation_rows(report: Report) -> list[list[str]]:
    return [[*_lead(r), r[VARIANT], r["reference"],
             _acc_pm(r), _signed(r["diff_mean"]), _ci(r), number(r["n_pairs"]), _p(r["p"]), _p(r["p_holm"]),
             r["verdict"]]
            for _, r in report.ablation.iterrows()]


ABLATION_HEADER = [*LEAD, VARIANT, "reference", "test acc (%, std ddof 1)",
                   "Δ vs reference (pts)", "Δ 95% CI (pts)", "pairs", "p", "p (Holm)", "verdict"]
ABLATION_NOTE = ("Ortho-GConv variants of the same cell, each the validation-selected winner of its own "
                 "search; Δ = variant − reference, matched repeat by repeat (paired t-test); p (Holm): "
                 "adjusted over this table's comparisons; verdict: the variant better or worse than the "
                 "reference, significant when the Holm-adjusted p < 0.05 (a significant "
                 "'worse' means the removed component helps).")


def _acc_pm(row: pd.Series) -> str:
    return f"{_pct(row['test_acc'])} ± {_pct(row['test_acc_std'])}"


def _importance_rows(report: Report) -> list[list[str]]:
    return [[*_lead(r), r[ARM], r[VARIANT], _fitted(r["fitted"], r["trials"]),
             ("few trials, indicative only: " if r["few"] else "") + r["importance"]]
            for _, r in report.importance.iterrows()]


def _fitted(fitted: int, trials: int) -> str:
    return number(trials) if fitted == trials else f"{number(fitted)} of {number(trials)}"


def _importance_note(report: Report) -> str:
    """:data:`IMPORTANCE_NOTE`, and where a cell held more trials than the forest is fitted on,
    how its sample was drawn."""
    if not (report.importance["fitted"] < report.importance["trials"]).any():
        return IMPORTANCE_NOTE
    return (f"{IMPORTANCE_NOTE} A cell of more than {number(IMPORTANCE_TRIALS)} trials has its forest fitted "
            f"on {number(IMPORTANCE_TRIALS)} of them drawn at random (seed {IMPORTANCE_SEED}) from that canonical "
            "order (trials: fitted of all).")


IMPORTANCE_HEADER = [*LEAD, ARM, VARIANT, "trials", "importance"]
IMPORTANCE_NOTE = ("Optuna's fANOVA importance (optuna.importance, 32 trees, seed 0) of each searched "
                   "hyperparameter for the objective over the cell's trials, given in a canonical order "
                   "(the same trials give the same shares); shares sum to 1. Cells with fewer than 3 trials, "
                   f"nothing searched or a constant objective are left out; below {FEW_TRIALS} trials the "
                   "shares are marked indicative: the forest splits the variance of a handful of points, most "
                   "of them TPE's random start-up proposals.")


def _extra_tables(report: Report) -> list[tuple[str, list[str], list[list[str]], str]]:
    """The tables after the paired comparison: ``(title, header, rows, note)``, non-empty only."""
    out = []
    columns, rows = _winner_rows(report)
    if rows:
        out.append(("Winners: hyperparameters", columns, rows, WINNERS_NOTE))
    if len(report.ablation):
        out.append(("Ablations", ABLATION_HEADER, _ablation_rows(report), ABLATION_NOTE))
    if len(report.importance):
        out.append(("Hyperparameter importance", IMPORTANCE_HEADER, _importance_rows(report), _importance_note(report)))
    return out


def _no_plots(report: Report) -> str:
    return "No plots: no cell has a winner." if report.winners.empty else "No plots: not drawn for this report."


# -- markdown ------------------------------------------------------------------------------

def _md_table(header: list[str], rows: list[list[str]]) -> list[str]:
    def line(cells: list[str]) -> str:
        return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

    return [line(header), "|" + "---|" * len(header), *(line(r) for r in rows)]


def render_md(report: Report, links: Links) -> str:
    out = ["# orthotune report", "", *(f"{line}  " for line in _heading(report)), ""]
    out += ["## Summary", "", *(f"- {line}" for line in report.verdicts.lines), ""] if report.verdicts.lines else []
    out += [*(f"> **Warning:** {w}  " for w in report.verdicts.warnings), ""] if report.verdicts.warnings else []
    if report.summary.empty:
        out += ["No trials match: nothing to report.", ""]
    for setting, variant, title in sections(report):
        depths, rows = paper_grid(report, setting, variant)
        body = [[*names] + [(f"**{t}**" if better else t) if t else "—" for t, better in cells]
                for names, cells in rows]
        out += [f"## {title}", "", *_md_table(paper_header(depths), body), ""]
    if not report.summary.empty:
        out += [ACC_NOTE, "", "## Paired comparison: Ortho-GConv − original", "",
                *_md_table(PAIR_HEADER, _pair_rows(report)), "", _pair_note(report), ""]
    for title, header, rows, note in _extra_tables(report):
        out += [f"## {title}", "", *_md_table(header, rows), "", note, ""]
    out += ["## Missing cells", ""]
    out += [*_md_table(MISSING_HEADER, _missing_rows(report)), ""] if len(report.missing) else ["None.", ""]
    out += ["## Plots", ""]
    if not report.figures:
        out += [_no_plots(report), ""]
    elif links is None:
        out += [f"{len(report.figures)} figures; write the report to a file (`-o report.md`) to get them.", ""]
    else:
        for figure in report.figures:
            out += [f"### {figure.title}", "", f"![{figure.title}]({links[figure.name]})", "", figure.caption, ""]
    return "\n".join(out)


# -- csv -----------------------------------------------------------------------------------

def render_csv(report: Report, links: Links) -> str:
    return report.summary.to_csv(index=False)


# -- latex ---------------------------------------------------------------------------------

_TEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
        "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}",
        "−": "$-$", "Δ": r"$\Delta$", "—": "--", "±": r"$\pm$"}


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
    depths, rows = paper_grid(report, setting, variant)
    label = setting_title(setting) + (f", variant {variant}" if variant else "")
    out = ["\\begin{table}[t]", "\\centering", "\\small",
           f"\\caption{{Test accuracy (\\%), {tex(label)}: mean $\\pm$ std (ddof = 1) over "
           f"repeats of the validation-selected config; bold: better of the pair.}}",
           "\\begin{tabular}{" + "l" * len(ROWS) + "c" * len(ARMS) * len(depths) + "}", "\\toprule",
           " " + "& " * len(ROWS) + " & ".join(f"\\multicolumn{{{len(ARMS)}}}{{c}}{{{tex(cell_label(COLUMN, d))}}}"
                                         for d in depths) + " \\\\",
           " & ".join([*ROWS] + [tex(arm.name) for _ in depths for arm in ARMS]) + " \\\\",
           "\\midrule"]
    for names, cells in rows:
        texts = [(f"\\textbf{{{tex(t)}}}" if better else tex(t)) if t else "--" for t, better in cells]
        out.append(" & ".join([*(tex(n) for n in names), *texts]) + " \\\\")
    return out + ["\\bottomrule", "\\end{tabular}", "\\end{table}", ""]


def _latex_figure(figure: Figure, link: str) -> list[str]:
    return ["\\begin{figure}[t]", "\\centering", f"\\includegraphics[width=\\linewidth]{{{link}}}",
            f"\\caption{{{tex(figure.title)}. {tex(figure.caption)}}}", "\\end{figure}", ""]


def render_latex(report: Report, links: Links) -> str:
    out = ["% orthotune report: needs \\usepackage{booktabs} and \\usepackage{graphicx}",
           *(f"% {line}" for line in _heading(report)), "",
           *(f"% verdict: {line}" for line in report.verdicts.lines),
           *(f"% warning: {w}" for w in report.verdicts.warnings), ""]
    for setting, variant, _title in sections(report):
        out += _latex_accuracy(report, setting, variant)
    if not report.summary.empty:
        out += _latex_table(tex(_pair_note(report)), PAIR_HEADER, _pair_rows(report))
    for title, header, rows, note in _extra_tables(report):
        out += _latex_table(f"{tex(title)}. {tex(note)}", header, rows, "\\scriptsize")
    if len(report.missing):
        out += ["% Missing cells:", *(f"% {' / '.join(row)}" for row in _missing_rows(report)), ""]
    for figure in report.figures if links else []:
        out += _latex_figure(figure, links[figure.name])
    return "\n".join(out)


# -- html ----------------------------------------------------------------------------------

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
    depths, rows = paper_grid(report, setting, variant)
    body = [[_td(n, True) for n in names] + [_td(t or "—", bold=better) for t, better in cells]
            for names, cells in rows]
    return [f"<h2>{html.escape(title)}</h2>", _html_table(paper_header(depths), body, "paper")]


def _html_pairs(report: Report) -> list[str]:
    rows = [[_td(c, i < PAIR_NAMES or i in _PAIR_WORDS) for i, c in enumerate(row)] for row in _pair_rows(report)]
    return [f'<p class="note">{html.escape(ACC_NOTE)}</p>', "<h2>Paired comparison: Ortho-GConv − original</h2>",
            _html_table(PAIR_HEADER, rows, "paired"), f'<p class="note">{html.escape(_pair_note(report))}</p>']


def _html_extra(title: str, header: list[str], rows: list[list[str]], note: str) -> list[str]:
    body = [[_td(c, not _numeric(c)) for c in row] for row in rows]
    return [f"<h2>{html.escape(title)}</h2>", _html_table(header, body), f'<p class="note">{html.escape(note)}</p>']


def _html_missing(report: Report) -> list[str]:
    missing = [[_td(c, True) for c in row] for row in _missing_rows(report)]
    return ["<h2>Missing cells</h2>", _html_table(MISSING_HEADER, missing, "missing") if missing else "<p>None.</p>"]


def _html_figures(report: Report) -> list[str]:
    """The plots, embedded as data URIs (the page is one self-contained file)."""
    parts = ["<h2>Plots</h2>"] + ([] if report.figures else [f"<p>{html.escape(_no_plots(report))}</p>"])
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
             *(f"<p>{html.escape(line)}</p>" for line in _heading(report)), *_html_summary(report)]
    if report.summary.empty:
        parts.append("<p>No trials match: nothing to report.</p>")
    for setting, variant, title in sections(report):
        parts += _html_accuracy(report, setting, variant, title)
    if not report.summary.empty:
        parts += _html_pairs(report)
    for extra in _extra_tables(report):
        parts += _html_extra(*extra)
    parts += [*_html_missing(report), *_html_figures(report), "</body></html>"]
    return "\n".join(parts)


FORMATS.add("md", Format(".md", render_md, figures_beside=True))
FORMATS.add("csv", Format(".csv", render_csv, figures_beside=False))
FORMATS.add("latex", Format(".tex", render_latex, figures_beside=True))
FORMATS.add("html", Format(".html", render_html, figures_beside=False, figures_embedded=True))
