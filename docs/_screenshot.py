"""The README's picture: a report's verdicts and paired table, shot in a headless chromium.

    python docs/_screenshot.py runs/verdict/report.html -o docs/img/verdict.png

(`make picture` runs the search of `bench/verdict-full.yaml` and then this on its report.)
The browser renders the report as written; a copy of the page carries one extra script that
reports where the summary and the paired comparison lie, and the shot is cropped to them.
Browser: ``$ORTHOTUNE_BROWSER`` or the first chromium-family browser on PATH (Debian's
``chromium``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
#: Headless, offline and quiet: no network, no profile of the user's, no GPU.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--force-device-scale-factor=1", "--run-all-compositor-stages-before-draw")
#: Sets ``data-crop="left top right bottom"`` on the body: from the summary's heading to the
#: end of the paired comparison table, in CSS pixels of the page.
CROP_SCRIPT = """<script>
window.addEventListener('load', function () {
  var start = Array.prototype.find.call(document.querySelectorAll('h2'),
                                        function (h) { return h.textContent === 'Summary'; });
  var end = document.querySelector('table.paired');
  if (!start || !end) { return; }
  var body = document.body.getBoundingClientRect(), y = window.scrollY;
  var box = [body.left, start.getBoundingClientRect().top + y, body.right, end.getBoundingClientRect().bottom + y];
  document.body.setAttribute('data-crop', box.map(Math.round).join(' '));
});
</script>"""
MARGIN = 16


def browser() -> str:
    named = os.environ.get("ORTHOTUNE_BROWSER")
    found = shutil.which(named) if named else next(filter(None, map(shutil.which, BROWSERS)), None)
    if found is None:
        sys.exit(f"no headless browser: {named or ', '.join(BROWSERS)} not on PATH (set ORTHOTUNE_BROWSER)")
    return found


def run_browser(args: list[str], folder: Path) -> str:
    proc = subprocess.run([browser(), *FLAGS, f"--user-data-dir={folder / 'profile'}", *args],
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        sys.exit(f"the browser failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    return proc.stdout


def shoot(report: Path, out: Path, width: int) -> tuple[int, int]:
    """Write the cropped shot of ``report`` to ``out``; return its size in pixels."""
    from PIL import Image

    html = report.read_text(encoding="utf-8")
    if "</body>" not in html or 'class="paired' not in html:
        sys.exit(f"{report}: not an orthotune html report with a paired comparison")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        page = folder / "report.html"
        page.write_text(html.replace("</body>", CROP_SCRIPT + "</body>", 1), encoding="utf-8")
        dom = run_browser([f"--window-size={width},900", "--virtual-time-budget=10000", "--dump-dom",
                           page.as_uri()], folder)
        found = re.search(r'data-crop="(-?\d+) (-?\d+) (-?\d+) (-?\d+)"', dom)
        if not found:
            sys.exit(f"{report}: the page did not say where its summary and paired table are")
        left, top, right, bottom = map(int, found.groups())
        full = folder / "full.png"
        run_browser([f"--window-size={width},{bottom + MARGIN}", "--virtual-time-budget=10000",
                     f"--screenshot={full}", page.as_uri()], folder)
        with Image.open(full) as image:
            box = (max(left - MARGIN, 0), max(top - MARGIN, 0), min(right + MARGIN, image.width),
                   min(bottom + MARGIN, image.height))
            shot = image.convert("RGB").crop(box)
    out.parent.mkdir(parents=True, exist_ok=True)
    # a 64-colour palette keeps anti-aliased text legible at a fraction of the size
    shot.quantize(colors=64).save(out, optimize=True)
    return shot.size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path, help="an html report (e.g. runs/quick-TIME/report.html)")
    parser.add_argument("-o", "--out", type=Path, default=Path("docs/img/verdict.png"),
                        help="the PNG to write (default: docs/img/verdict.png)")
    parser.add_argument("--width", type=int, default=1400,
                        help="the browser window's width in px (default: 1400, the width the report is made for)")
    args = parser.parse_args()
    size = shoot(args.report, args.out, args.width)
    print(f"{args.out}: {size[0]} x {size[1]} px, {args.out.stat().st_size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
