"""The manual and the README: the site builds with ``mkdocs build --strict``, a broken link or
anchor or a page left out of the nav fails that build, the generated parts follow the code,
and the README stays a short front door whose links and picture exist."""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

from orthotune import LAYERS

ROOT = Path(__file__).resolve().parents[1]
MKDOCS = [sys.executable, "-m", "mkdocs", "build", "--strict"]


def load_hooks() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "_hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(folder: Path, site: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*MKDOCS, "--site-dir", str(site)], cwd=folder, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = build(ROOT, out)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def page_text(site: Path, page: str) -> str:
    return (site / page / "index.html").read_text(encoding="utf-8")


@pytest.mark.slow
def test_the_manual_builds_strictly_with_every_page_and_the_picture(site):
    assert (site / "index.html").is_file()
    assert (site / "img" / "verdict.png").is_file()
    for page in sorted(p.stem for p in (ROOT / "docs").glob("*.md") if p.stem != "index"):
        assert (site / page / "index.html").is_file(), page
    # the hook and the screenshot script are tools, not pages
    assert not list(site.rglob("_*.py")) and not list(site.rglob("__pycache__"))


@pytest.mark.slow
def test_the_cli_reference_holds_every_command_and_option(site):
    from orthotune.cli import build_parser

    def commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
        return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices

    text = page_text(site, "cli")
    names = list(commands(build_parser()))
    assert {"train", "launch", "status", "best", "report", "logs", "store"} <= set(names)
    for name in names:
        assert f'id="orthotune-{name}"' in text, name
        for action in commands(build_parser(name))[name]._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert option in text, (name, option)
    assert 'id="orthotune-store-check"' in text and "--quarantine" in text


def test_a_new_subcommand_appears_in_the_reference_by_itself(monkeypatch):
    """The reference walks the parsers: a command registered in the CLI is documented with its
    options, nothing to add by hand."""
    import orthotune.cli as cli

    fake = types.ModuleType("orthotune.cli.frobnicate")
    fake.__doc__ = "Frobnicate a store: a command the docs were never told about."
    fake.add_arguments = lambda parser: parser.add_argument("--widgets", type=int, default=3, help="how many")
    monkeypatch.setitem(cli.SUBCOMMANDS, "frobnicate", fake)
    hooks = load_hooks()
    reference, summary = hooks.cli_reference(), hooks.cli_summary()
    assert "### `orthotune frobnicate`" in reference
    assert "| `--widgets WIDGETS` | how many (default: `3`) |" in reference
    assert "[`frobnicate`](#orthotune-frobnicate) | Frobnicate a store" in summary


def test_the_architecture_page_lists_the_layers_top_down(site):
    text = page_text(site, "architecture")
    drawn = re.findall(r"<td><code>(\w+)/</code></td>", text)
    assert drawn == list(LAYERS)[::-1]


def test_the_layers_table_reads_the_tree(tmp_path):
    """Line counts, imports and descriptions come from the folders, in the order given."""
    (tmp_path / "low").mkdir()
    (tmp_path / "low" / "__init__.py").write_text('"""The low layer.\n\nMore words."""\n')
    (tmp_path / "high" / "sub").mkdir(parents=True)
    (tmp_path / "high" / "__init__.py").write_text('"""The high layer."""\nfrom orthotune.low import x\n')
    (tmp_path / "high" / "sub" / "deep.py").write_text("def f():\n    import orthotune.high._y\n    return 1\n")
    table = load_hooks().layers_table(tmp_path, ("low", "high")).splitlines()
    assert table[2] == "| `high/` | `orthotune.high` | 5 | low | The high layer. |"
    assert table[3] == "| `low/` | `orthotune.low` | 3 | (none) | The low layer. |"


def test_an_unknown_generated_part_fails_the_page():
    from mkdocs.exceptions import PluginError

    page = types.SimpleNamespace(file=types.SimpleNamespace(src_uri="x.md"))
    with pytest.raises(PluginError, match="unknown generated part 'nope'"):
        load_hooks().on_page_markdown("<!-- generated: nope -->\n", page, None, None)


@pytest.mark.slow
def test_a_broken_link_a_missing_anchor_or_a_page_outside_the_nav_fails_the_build(tmp_path):
    """Strict mode is what catches them: the same manual with one broken link, one link to a
    heading that does not exist and one page missing from the nav does not build."""
    copy = tmp_path / "copy"
    copy.mkdir()
    shutil.copy(ROOT / "mkdocs.yml", copy)
    shutil.copy(ROOT / "README.md", copy)
    shutil.copytree(ROOT / "docs", copy / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    store = copy / "docs" / "store.md"
    store.write_text(store.read_text() + "\n[gone](no-such-page.md) and [nowhere](reports.md#no-such-heading)\n")
    (copy / "docs" / "stray.md").write_text("# A page no nav lists\n")
    done = build(copy, tmp_path / "site")
    assert done.returncode != 0
    assert "no-such-page.md" in done.stderr
    assert "no-such-heading" in done.stderr
    assert "stray.md" in done.stderr
    assert "Aborted with 3 warnings in strict mode" in done.stdout


# -- the README -------------------------------------------------------------------------------

README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_readme_is_a_short_front_door_with_its_picture():
    assert len(README.splitlines()) <= 250
    picture = ROOT / "docs" / "img" / "verdict.png"
    assert "](docs/img/verdict.png)" in README
    assert picture.read_bytes().startswith(b"\x89PNG") and picture.stat().st_size < 200 * 1024


def test_the_readme_shows_exactly_two_commands():
    section = README[README.index("## Two commands"):README.index("\n## ", README.index("## Two commands") + 1)]
    block = section.split("```bash\n")[1].split("```")[0]
    assert [line.split()[:2] for line in block.splitlines()] == [["make", "demo"], ["make", "test"]]


def test_the_readmes_links_point_at_files_that_exist():
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README)
    assert links
    missing = [link for link in links if "://" not in link and not (ROOT / link).exists()]
    assert not missing, missing

