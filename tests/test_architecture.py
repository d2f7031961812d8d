"""The floor plan, enforced: imports run only down the layers, only through ``__all__``, and
no files import each other in a circle.

Layers, bottom to top, as ``orthotune.LAYERS`` lists them (the manual's architecture page is
built from the same constant), each one folder at the repository root (``orthotune.X`` is ``X/``).
A module may import its own package's private modules; from any other package it may import
only names that package lists in ``__all__``, and only from a layer at or below its own.
Benchmarks, too, import only through ``__all__``; tests may import private modules (as
Optuna's do), and from a package's face only the names it lists. Imports inside functions
count like the others: a lazy import is still an arrow.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from orthotune import LAYERS as FOLDERS

ROOT = Path(__file__).resolve().parents[1]
LAYERS = [f"orthotune.{folder}" for folder in FOLDERS]


def source_files() -> list[Path]:
    return [ROOT / "__init__.py", *sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py"))]


def module_name(path: Path) -> str:
    parts = ["orthotune", *path.relative_to(ROOT).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p) for p in source_files()}


def package_of(module: str) -> str:
    """The layer package a module belongs to (``orthotune`` itself for the root)."""
    return max((layer for layer in LAYERS if module == layer or module.startswith(layer + ".")),
               key=len, default="orthotune")


def layer_index(module: str) -> int:
    package = package_of(module)
    return LAYERS.index(package) if package in LAYERS else -1


def imports(source: str) -> list[tuple[str, tuple[str, ...], int]]:
    """``(module, names, line)`` of every orthotune import in the source, nested ones included."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] == "orthotune":
                found.append((node.module, tuple(a.name for a in node.names), node.lineno))
        elif isinstance(node, ast.Import):
            found += [(a.name, (), node.lineno) for a in node.names if a.name.split(".")[0] == "orthotune"]
    return found


def defined_names(package: str) -> set[str]:
    """The functions, classes and variables a package's ``__init__`` defines itself."""
    init = next(p for p in source_files() if module_name(p) == package and p.name == "__init__.py")
    found = set()
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, ast.Assign):
            found |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return found - {"__all__"}


def public_names(package: str) -> set[str]:
    init = next(p for p in source_files() if module_name(p) == package and p.name == "__init__.py")
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    return set()


def violations(source: str, module: str, label: str) -> list[str]:
    problems = []
    own = package_of(module)
    for target, names, line in imports(source):
        where = f"{label}:{line}"
        target_package = package_of(target)
        if target_package != own and layer_index(target) > layer_index(module) >= 0:
            problems.append(f"{where}: {module} imports {target}, a layer above it")
        private = [p for p in target.split(".") if p.startswith("_")]
        if private and target_package != own:
            problems.append(f"{where}: {module} reaches into private {target}")
        if target == target_package and target_package != own and target_package in LAYERS:
            hidden = sorted(n for n in names if n not in public_names(target_package))
            if hidden:
                problems.append(f"{where}: {module} imports {hidden} not in {target}.__all__")
    return problems


def arrows(sources: dict[str, str]) -> dict[str, set[str]]:
    """File -> the files it imports, for ``{module: source}``: ``from P import name`` points at
    the module ``P.name`` where there is one (a submodule), else at ``P`` (its ``__init__``)."""
    graph: dict[str, set[str]] = {module: set() for module in sources}
    for module, source in sources.items():
        for target, names, _ in imports(source):
            found = {f"{target}.{name}" for name in names if f"{target}.{name}" in sources}
            if target in sources and len(found) < max(1, len(names)):
                found.add(target)
            graph[module] |= found - {module}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one file (Tarjan's algorithm)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        order[node] = low[node] = len(order)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in order:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], order[nxt])
        if low[node] == order[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in order:
            visit(node)
    return found


def test_every_layer_package_is_found():
    modules = {module_name(p) for p in source_files()}
    assert set(LAYERS) <= modules


@pytest.mark.slow
def test_imports_run_only_down_the_layers_and_through_all():
    problems = [v for p in source_files()
                for v in violations(p.read_text(), module_name(p), str(p.relative_to(ROOT)))]
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_no_files_import_each_other_in_a_circle():
    found = circles(arrows({module_name(p): p.read_text() for p in source_files()}))
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_layers_are_every_folder_with_a_package():
    """``LAYERS`` names every root folder that holds a Python package, and only those: a new
    layer folder missing from it would escape this file's checks."""
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests", "bench", "docs"}
    assert set(FOLDERS) == packages
    assert len(set(FOLDERS)) == len(FOLDERS)


def outside_violations(source: str, label: str, private_allowed: bool) -> list[str]:
    """What a benchmark (``private_allowed`` False) or a test (True: tests may import private
    modules, as Optuna's do) gets wrong: a private module, or a name a package's face does
    not list in ``__all__``."""
    problems = []
    for target, names, line in imports(source):
        if not private_allowed and any(part.startswith("_") for part in target.split(".")):
            problems.append(f"{label}:{line}: imports private {target}")
        if target in LAYERS:
            # a test may take a name from the __init__ that defines it (like a private module)
            own = defined_names(target) if private_allowed else set()
            hidden = sorted(n for n in names if n not in public_names(target) | own
                            and f"{target}.{n}" not in MODULES)
            if hidden:
                problems.append(f"{label}:{line}: imports {hidden} not in {target}.__all__")
    return problems


@pytest.mark.slow
@pytest.mark.parametrize("folder, private_allowed", [("bench", False), ("tests", True)])
def test_benchmarks_use_only_public_faces_and_tests_only_listed_names(folder, private_allowed):
    problems = [v for path in sorted((ROOT / folder).rglob("*.py"))
                for v in outside_violations(path.read_text(), str(path.relative_to(ROOT)), private_allowed)]
    assert not problems, "\n".join(problems)


def test_the_check_catches_upward_private_and_unlisted_imports():
    """The rule itself can fail: a core module importing the CLI, a private module, or a
    name missing from a package's ``__all__``."""
    source = ("from orthotune.cli import main\nfrom orthotune.models._ortho import hybrid_init_\n"
              "from orthotune.models import not_a_public_name\n")
    found = violations(source, "orthotune.core._probe", "probe")
    assert any("a layer above it" in v for v in found), found
    assert any("private" in v for v in found), found
    assert any("not in orthotune.models.__all__" in v for v in found), found


def test_the_check_catches_a_circle_through_an_import_inside_a_function():
    """Two files importing each other, one of them only when a function runs, are a circle;
    without that import they are not."""
    sources = {"orthotune.search._a": "from orthotune.search._b import B\n",
               "orthotune.search._b": "def f():\n    from orthotune.search._a import A\n",
               "orthotune.search._c": "from orthotune.search import _a\n"}
    assert circles(arrows(sources)) == [["orthotune.search._a", "orthotune.search._b"]]
    sources["orthotune.search._b"] = "def f():\n    pass\n"
    assert circles(arrows(sources)) == []


def test_the_check_tells_benchmarks_from_tests():
    """A private module is refused in a benchmark and allowed in a test; an unlisted name
    from a package's face is refused in both."""
    private = "from orthotune.search._cells import CellSearcher\n"
    unlisted = "from orthotune.search import not_a_public_name\n"
    defined_there = "from orthotune.cli import build_parser\n"
    assert outside_violations(private, "bench", private_allowed=False)
    assert not outside_violations(private, "test", private_allowed=True)
    assert outside_violations(unlisted, "test", private_allowed=True)
    assert not outside_violations(defined_there, "test", private_allowed=True)
    assert outside_violations(defined_there, "bench", private_allowed=False)


#: The most lines a module of any layer may have: each file is one thing read top to bottom
#: (the split that took ``search/_launch.py`` from 644 lines to its stages, and every layer's
#: long files after it).
FILE_LINES = 400


def test_no_module_of_any_layer_nor_benchmark_is_over_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in [*source_files(), *sorted((ROOT / "bench").rglob("*.py"))]
            if (n := len(p.read_text().splitlines())) > FILE_LINES}
    assert not long, f"files over {FILE_LINES} lines: {long}"


@pytest.mark.slow
def test_the_cost_planner_sits_between_the_search_and_the_reports():
    """``plan/`` reads the search's options and budget and is read by the reports and the CLI:
    nothing at or below the search imports it (in-function imports included)."""
    assert LAYERS.index("orthotune.search") < LAYERS.index("orthotune.plan") < LAYERS.index("orthotune.reports")
    below = FOLDERS[:FOLDERS.index("plan")]
    found = [f"{p.relative_to(ROOT)}:{line}" for folder in below for p in sorted((ROOT / folder).rglob("*.py"))
             for target, _, line in imports(p.read_text()) if package_of(target) == "orthotune.plan"]
    assert not found, found


@pytest.mark.parametrize("module", ["_estimate.py", "_asha.py"])
def test_the_plan_arithmetic_imports_nothing_of_orthotune(module):
    """The estimate's arithmetic and ASHA's expectation stand alone (as Optuna's ``_gp``
    behind its sampler): they can be read, tested and reused without the search, the
    training or torch."""
    source = (ROOT / "plan" / module).read_text()
    assert imports(source) == []
    heavy = {"torch", "ray", "torch_geometric", "optuna"}
    nodes = list(ast.walk(ast.parse(source)))
    modules = {a.name.split(".")[0] for n in nodes if isinstance(n, ast.Import) for a in n.names}
    modules |= {n.module.split(".")[0] for n in nodes if isinstance(n, ast.ImportFrom) and n.module}
    assert not modules & heavy, modules & heavy


def plan_words(source: str) -> set[str]:
    """The names in ``source`` (variables, attributes, functions, classes, arguments) that
    hold the word "plan" (a dataset loader's "Planetoid" is another word)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.Attribute):
            names = [node.attr]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, (ast.arg, ast.keyword)):
            names = [node.arg or ""]
        else:
            continue
        found |= {name for name in names if "plan" in name.lower().replace("planetoid", "")}
    return found


def test_the_word_plan_means_the_cost_plan_and_stays_in_its_room():
    """Below ``plan/`` no name holds the word: the search's searcher-and-scheduler object is a
    ``Strategy``, its count of configs a budget. A newcomer who greps for "plan" lands on the
    cost planner (and the CLI that prints it)."""
    below = FOLDERS[:FOLDERS.index("plan")]
    found = {str(p.relative_to(ROOT)): sorted(words) for folder in below for p in sorted((ROOT / folder).rglob("*.py"))
             if (words := plan_words(p.read_text()))}
    assert not found, found
    assert plan_words("planned = plan_search(x)\nPlanetoid(root)\n") == {"planned", "plan_search"}


def test_the_space_sits_below_the_search():
    """No module of spaces/ imports search (in-function imports included): ``--resume`` and
    the reports read a stored space without climbing to the search that ran it."""
    found = [f"{p.relative_to(ROOT)}:{line}" for p in sorted((ROOT / "spaces").rglob("*.py"))
             for target, _, line in imports(p.read_text()) if package_of(target) == "orthotune.search"]
    assert LAYERS.index("orthotune.spaces") < LAYERS.index("orthotune.search")
    assert not found, found
