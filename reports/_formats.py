"""The lay-out stage: the report's formats (md, csv, latex, html), one registry entry each,
and :func:`write_report`, which renders a built report in one of them.

md and latex written to a file put the figures beside it as ``STEM-NAME.png`` and link
them; html is one self-contained file with the figures embedded as data URIs; csv is the
per-pair table only (one row per setting, dataset, backbone and depth, full precision).
Printed to stdout (no ``-o``), md and latex carry no figures and say so. Each format's markup
is a module of its own (``_markdown``, ``_latex``, ``_html``); the text they mark up is
``_text``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from orthotune.core import OrthotuneError, Registry
from orthotune.reports._html import render_html
from orthotune.reports._latex import render_latex
from orthotune.reports._markdown import render_md
from orthotune.reports._report import Report
from orthotune.reports._text import Links


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


def render_csv(report: Report, links: Links) -> str:
    """The per-pair table, every column at full precision."""
    return report.summary.to_csv(index=False)


FORMATS.add("md", Format(".md", render_md, figures_beside=True))
FORMATS.add("csv", Format(".csv", render_csv, figures_beside=False))
FORMATS.add("latex", Format(".tex", render_latex, figures_beside=True))
FORMATS.add("html", Format(".html", render_html, figures_beside=False, figures_embedded=True))
