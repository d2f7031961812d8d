"""Report formats: md with plots beside it, csv, latex, and a self-contained html that a real
headless browser renders (every figure decodes, the page logs nothing)."""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from report_stores import hand_row, hand_store
from required import skip_or_fail

from orthotune.core import ConfigError
from orthotune.reports import FORMATS, build_report, write_report

FIGURE_KINDS = ("accuracy-depth", "msig-depth", "grad-norms", "effect-of-T", "history")


@pytest.fixture(scope="module")
def real_report(real_store):
    return build_report(real_store)


@pytest.mark.slow
def test_formats_registry_rejects_unknown_names(real_report):
    assert FORMATS.names() == ["md", "csv", "latex", "html"]
    with pytest.raises(ConfigError, match="unknown report format 'pdf'; valid: md, csv, latex, html"):
        write_report(real_report, "pdf")


@pytest.mark.slow
def test_real_report_has_every_figure_and_the_paper_table(real_report):
    names = [f.name for f in real_report.figures]
    assert names == [f"{kind}-texas-full" for kind in FIGURE_KINDS]
    assert all(f.png.startswith(b"\x89PNG") for f in real_report.figures)
    assert list(real_report.summary["depth"]) == [2, 4]
    assert real_report.summary["n_pairs"].tolist() == [3, 3]  # Geom-GCN splits 0-2 matched
    assert real_report.missing.empty


def test_markdown_file_links_plots_written_beside_it(real_report, tmp_path):
    out = tmp_path / "out" / "report.md"
    write_report(real_report, "md", out)
    text = out.read_text()
    assert "| texas | gcn |" in text and "## Paired comparison" in text
    links = re.findall(r"!\[[^]]*\]\(([^)]+)\)", text)
    assert len(links) == len(FIGURE_KINDS)
    for link in links:
        assert (out.parent / link).read_bytes().startswith(b"\x89PNG")


def test_markdown_marks_the_better_of_each_pair(tmp_path):
    store = hand_store(tmp_path / "s", [hand_row("o", test=[0.60, 0.62]), hand_row("x", test=[0.70, 0.74], ortho=True)])
    text = write_report(build_report(store, plots=False), "md")
    assert "| cora | gcn | 61.00 ± 1.41 | **72.00 ± 2.83** |" in text  # sample std (ddof = 1)


def test_csv_holds_full_precision_numbers(real_report):
    frame = pd.read_csv(io.StringIO(write_report(real_report, "csv")))
    assert len(frame) == 2
    assert frame["ortho_test_acc"].tolist() == pytest.approx(real_report.summary["ortho_test_acc"].tolist(), abs=0)
    assert frame["p"].tolist() == pytest.approx(real_report.summary["p"].tolist(), abs=0)


def test_latex_table_and_figures(real_report, tmp_path):
    out = tmp_path / "report.tex"
    write_report(real_report, "latex", out)
    text = out.read_text()
    assert text.count("\\begin{tabular}") == 3 and "\\multicolumn{2}{c}{depth 4}" in text
    assert text.count("\\includegraphics") == len(FIGURE_KINDS)
    assert "ttest\\_rel" in text  # underscores escaped


@pytest.mark.slow
def test_store_with_missing_cells_reports_them_in_every_format(tmp_path):
    store = hand_store(tmp_path / "s", [
        hand_row("o2"), hand_row("x2", ortho=True), hand_row("o4", depth=4),
        hand_row("f4", depth=4, ortho=True, status="failed", reason="non-finite loss at epoch 1"),
    ])
    report = build_report(store)
    for name in ("md", "csv", "latex", "html"):
        write_report(report, name, tmp_path / f"r.{name}")
    md = (tmp_path / "r.md").read_text()
    assert "| full | cora | gcn | 4 | v1 | Ortho-GConv | all 1 trials failed (e.g. non-finite loss at epoch 1) |" in md
    assert "| cora | gcn | 70.00 ± 0.00 | 70.00 ± 0.00 | 70.00 ± 0.00 | — |" in md


def test_empty_selection_still_gives_a_report(tmp_path):
    store = hand_store(tmp_path / "s", [hand_row("f", status="failed", reason="non-finite loss at epoch 1")])
    text = write_report(build_report(store), "md")
    assert "all 1 trials failed" in text and "No plots: no cell has a winner." in text


# -- the browser ------------------------------------------------------------------------------

#: Browsers the check can drive headless, in the order it looks for them on PATH.
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
#: The page width the report must fit (issue 25: a 1400 px window).
PAGE_PX = 1400


def find_browser() -> str:
    """``$ORTHOTUNE_BROWSER`` or the first of :data:`BROWSERS` on PATH; without one the test is
    skipped in one line, or fails where ``$ORTHOTUNE_REQUIRE_BROWSER`` is set (CI)."""
    named = os.environ.get("ORTHOTUNE_BROWSER")
    browser = shutil.which(named) if named else next(filter(None, map(shutil.which, BROWSERS)), None)
    if browser is None:
        skip_or_fail(f"no headless browser: {named or ', '.join(BROWSERS)} not on PATH (set ORTHOTUNE_BROWSER)",
                     "ORTHOTUNE_REQUIRE_BROWSER")
    return browser


def render_in_browser(page: Path, tmp_path: Path) -> tuple[str, list[str]]:
    """The DOM after load and the console lines, from a chromium-family browser, headless."""
    browser = find_browser()
    proc = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
         "--enable-logging=stderr", "--v=0", "--virtual-time-budget=10000", f"--window-size={PAGE_PX},900",
         "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, [line for line in proc.stderr.splitlines() if ":CONSOLE" in line]


def loaded_images(dom: str) -> tuple[int, int]:
    body = re.search(r'<body data-images="(\d+)" data-images-loaded="(\d+)"', dom)
    assert body, "the page's load script did not run"
    return int(body.group(1)), int(body.group(2))


@pytest.mark.slow
def test_html_report_renders_offline_in_a_real_browser(real_report, tmp_path):
    page = tmp_path / "report.html"
    write_report(real_report, "html", page)
    assert list(tmp_path.iterdir()) == [page]  # one self-contained file
    source = page.read_text()
    assert not re.search(r'(src|href)="(?!data:)', source), "the report refers to an outside resource"
    dom, console = render_in_browser(page, tmp_path)
    assert console == []
    assert loaded_images(dom) == (len(FIGURE_KINDS), len(FIGURE_KINDS))
    assert '<table class="paper">' in dom and '<td class="name">texas</td>' in dom
    width = re.search(r'data-page-width="(\d+)"', dom)
    assert width and int(width.group(1)) <= PAGE_PX, "a table runs off a 1400 px page"
    for figure in real_report.figures:
        assert f'<figure id="{figure.name}">' in dom


@pytest.mark.slow
def test_browser_check_catches_a_broken_image_and_console_errors(real_report, tmp_path):
    page = tmp_path / "broken.html"
    write_report(real_report, "html", page)
    source = page.read_text()
    source = source.replace("data:image/png;base64,iVBOR", "data:image/png;base64,AAAAA", 1)
    page.write_text(source.replace("</body>", "<script>console.error('boom')</script></body>"))
    dom, console = render_in_browser(page, tmp_path)
    assert loaded_images(dom) == (len(FIGURE_KINDS), len(FIGURE_KINDS) - 1)
    assert any("boom" in line for line in console)


def test_wide_tables_wrap_headers_between_words_and_only_the_widest_inside_them():
    from orthotune.reports._html import WIDE_COLUMNS, WIDEST_COLUMNS, _html_table

    def table(columns: int) -> str:
        return _html_table(["setting", "weight_decay_output", *(f"c{i}" for i in range(columns - 2))], [])

    wide, widest = table(WIDE_COLUMNS + 5), table(WIDEST_COLUMNS + 1)
    assert '<table class="wide">' in wide  # the paired table: "setting" stays one word
    assert "<th>weight_<wbr>decay_<wbr>output</th>" in wide
    assert '<table class="wide widest">' in widest and '<table class="">' in table(WIDE_COLUMNS)
