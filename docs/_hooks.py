"""MkDocs hooks: the parts of the manual that are read from the code at every build.

A page asks for a part with a line ``<!-- generated: NAME -->``; the build replaces it with
``GENERATED[NAME]()``, so the CLI reference follows the argparse parsers (a new subcommand or
option appears by itself) and the architecture page's layers follow ``orthotune.LAYERS`` and
the tree. Nothing generated is committed. An unknown part fails the build.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import os
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from mkdocs.exceptions import PluginError

#: The package's folder, whose layer folders the architecture page reads: the checkout in an
#: editable install (a copy of docs/ built elsewhere reads the same tree).
ROOT = Path(importlib.util.find_spec("orthotune").origin).parent
MARKER = re.compile(r"^<!-- generated: ([\w-]+) -->$", re.MULTILINE)


def on_page_markdown(markdown: str, page, config, files) -> str:  # MkDocs' hook: (config, files) unused
    def part(found: re.Match) -> str:
        name = found.group(1)
        if name not in GENERATED:
            raise PluginError(f"{page.file.src_uri}: unknown generated part {name!r}; known: {sorted(GENERATED)}")
        return GENERATED[name]()

    return MARKER.sub(part, markdown)


# -- the CLI ---------------------------------------------------------------------------------

def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """A parser's subcommands by name (none for a parser without them)."""
    found = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(found[0].choices) if found else {}


@contextmanager
def without_user_settings() -> Iterator[None]:
    """No ``ORTHOTUNE_*`` variables while the parsers are built: their defaults (``--store``'s
    reads ``$ORTHOTUNE_STORE``) show what a fresh shell gets, not the builder's settings."""
    saved = {key: os.environ.pop(key) for key in list(os.environ) if key.startswith("ORTHOTUNE_")}
    try:
        yield
    finally:
        os.environ.update(saved)


def commands() -> list[tuple[str, argparse.ArgumentParser]]:
    """Every command as ``("orthotune train", parser)``, nested ones (``orthotune store check``)
    after their parent. Each is built as the CLI builds it: ``build_parser(name)`` adds only
    that subcommand's options."""
    from orthotune.cli import build_parser

    def walk(prog: str, parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
        yield prog, parser
        for name, sub in subparsers(parser).items():
            yield from walk(f"{prog} {name}", sub)

    with without_user_settings():
        return [found for name in subparsers(build_parser())
                for found in walk(f"orthotune {name}", subparsers(build_parser(name))[name])]


def invocation(action: argparse.Action) -> str:
    """How an argument is written: ``--depth DEPTH``, ``--ortho, --no-ortho``, ``JOB``."""
    if action.metavar is not None:
        value = action.metavar if isinstance(action.metavar, str) else " ".join(action.metavar)
    elif action.choices is not None:
        value = "{" + ",".join(str(c) for c in action.choices) + "}"
    else:
        value = action.dest.upper()
    if not action.option_strings:
        return value
    if action.nargs == 0:
        return ", ".join(action.option_strings)
    shown = {None: value, "?": f"[{value}]", "*": f"[{value} ...]", "+": f"{value} [{value} ...]",
             argparse.REMAINDER: "..."}.get(action.nargs, " ".join([value] * action.nargs)
                                            if isinstance(action.nargs, int) else value)
    return ", ".join(f"{option} {shown}" for option in action.option_strings)


def help_text(action: argparse.Action, prog: str) -> str:
    """The help as ``--help`` prints it (``%(default)s`` and the like filled in)."""
    if not action.help:
        return ""
    params = {**vars(action), "prog": prog}
    if params.get("choices") is not None:
        params["choices"] = ", ".join(str(c) for c in params["choices"])
    return action.help % params


def default_text(action: argparse.Action, help_shown: str) -> str:
    """`` (default: x)`` where the parser holds a default that says something (not None, not a
    flag's False) and the help does not state it already."""
    if action.default in (None, argparse.SUPPRESS) or action.nargs == 0 and action.default is False:
        return ""
    if "default" in help_shown.lower():
        return ""
    shown = " ".join(map(str, action.default)) if isinstance(action.default, (list, tuple)) else str(action.default)
    return f" (default: `{shown}`)"


def prose(text: str) -> str:
    """Plain text (a docstring, a help) as Markdown: outside its `code spans`, ``<path>`` stays
    text instead of becoming an HTML tag, and ``*`` stays a star."""
    text = re.sub(r":\w+:(`[^`]+`)", r"\1", text.strip())  # reST roles (:func:`name`) as plain code
    parts = re.split(r"(`+[^`]*`+)", text)
    return "".join(part if part.startswith("`") else
                   part.replace("<", "&lt;").replace(">", "&gt;").replace("*", "\\*") for part in parts)


def cell(text: str) -> str:
    """Text for one Markdown table cell: one line of prose, its pipes escaped."""
    return prose(" ".join(text.split())).replace("|", "\\|")


def code(text: str) -> str:
    """Text as a code span in a table cell (Python-Markdown's tables leave pipes in code spans alone)."""
    return f"`{' '.join(text.split())}`" if text else ""


def options_table(actions: Sequence[argparse.Action], prog: str) -> list[str]:
    rows = ["| argument | what it does |", "|---|---|"]
    for action in actions:
        text = help_text(action, prog)
        rows.append(f"| {code(invocation(action))} | {cell(text)}{default_text(action, text)} |")
    return rows


def usage(parser: argparse.ArgumentParser) -> str:
    return " ".join(parser.format_usage().split()).removeprefix("usage: ")


def command_reference(prog: str, parser: argparse.ArgumentParser) -> list[str]:
    lines = [f"### `{prog}`", "", prose(parser.description or ""), "", "```text", usage(parser), "```", ""]
    for group in parser._action_groups:
        shown = [a for a in group._group_actions
                 if a.help != argparse.SUPPRESS and not isinstance(a, (argparse._HelpAction,
                                                                       argparse._SubParsersAction))]
        if shown:
            lines += [f"**{group.title}**", "", *options_table(shown, prog), ""]
    nested = subparsers(parser)
    if nested:
        lines += ["Actions: " + ", ".join(f"`{prog} {name}`" for name in nested) + " (below).", ""]
    return lines


def cli_summary() -> str:
    """One row per command: its name and the first paragraph of its description."""
    rows = ["| command | what it does |", "|---|---|"]
    for prog, parser in commands():
        if not subparsers(parser):
            summary = (parser.description or "").strip().split("\n\n")[0]
            rows.append(f"| [`{prog.removeprefix('orthotune ')}`](#{anchor(prog)}) | {cell(summary)} |")
    return "\n".join(rows)


def anchor(prog: str) -> str:
    """The heading id MkDocs' toc extension gives ``### `orthotune store check```."""
    return prog.replace(" ", "-")


def cli_reference() -> str:
    return "\n".join(line for prog, parser in commands() for line in command_reference(prog, parser))


# -- the layers ------------------------------------------------------------------------------

def python_lines(folder: Path) -> int:
    """Lines of the folder's Python files, its subfolders' included."""
    return sum(len(p.read_text(encoding="utf-8").splitlines()) for p in folder.rglob("*.py"))


def package_summary(folder: Path) -> str:
    """The first paragraph of the package's docstring: what the layer holds, in its own words."""
    doc = ast.get_docstring(ast.parse((folder / "__init__.py").read_text(encoding="utf-8"))) or ""
    return " ".join(doc.split("\n\n")[0].split())


def imported_layers(folder: Path, layers: Sequence[str]) -> list[str]:
    """The other layers the folder's modules import (imports inside functions included), in
    the layers' order."""
    found = set()
    for path in folder.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue
            found |= {name.split(".")[1] for name in names if name.startswith("orthotune.") and "." in name}
    return [layer for layer in layers if layer in found and layer != folder.name]


def layers_table(root: Path = ROOT, layers: Sequence[str] | None = None) -> str:
    """The layers top down (each imports only from the rows below it), with their lines of
    Python, the layers they import and what they hold."""
    if layers is None:
        from orthotune import LAYERS as layers
    rows = ["| folder | package | lines | imports | what it holds |", "|---|---|---:|---|---|"]
    for folder in reversed(layers):
        path = root / folder
        rows.append(f"| `{folder}/` | `orthotune.{folder}` | {python_lines(path)} | "
                    f"{', '.join(imported_layers(path, layers)) or '(none)'} | {cell(package_summary(path))} |")
    return "\n".join(rows)


GENERATED: dict[str, Callable[[], str]] = {
    "cli-summary": cli_summary,
    "cli-reference": cli_reference,
    "layers": layers_table,
}
