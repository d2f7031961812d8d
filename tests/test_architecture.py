"""The floor plan, enforced: imports run only down the layers and only through ``__all__``.

Layers, bottom to top (the README's architecture section draws the same picture), each one
folder at the repository root (``orthotune.X`` is ``X/``):
core -> models -> training -> store -> search -> spaces -> reports -> cli.
A module may import its own package's private modules; from any other package it may import
only names that package lists in ``__all__``, and only from a layer at or below its own.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: The layer folders, bottom to top; pyproject maps the root to ``orthotune`` (one rule).
FOLDERS = ["core", "models", "training", "store", "search", "spaces", "reports", "cli"]
LAYERS = [f"orthotune.{folder}" for folder in FOLDERS]


def module_name(path: Path) -> str:
    parts = ["orthotune", *path.relative_to(ROOT).with_suffix("").parts]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_of(module: str) -> str:
    """The layer package a module belongs to (``orthotune`` itself for the root)."""
    return max((layer for layer in LAYERS if module == layer or module.startswith(layer + ".")),
               key=len, default="orthotune")


def layer_index(module: str) -> int:
    package = package_of(module)
    return LAYERS.index(package) if package in LAYERS else -1


def source_files() -> list[Path]:
    return [ROOT / "__init__.py", *sorted(p for folder in FOLDERS for p in (ROOT / folder).rglob("*.py"))]


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


def test_every_layer_package_is_found():
    modules = {module_name(p) for p in source_files()}
    assert set(LAYERS) <= modules


def test_imports_run_only_down_the_layers_and_through_all():
    problems = [v for p in source_files()
                for v in violations(p.read_text(), module_name(p), str(p.relative_to(ROOT)))]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("folder", ["tests", "bench"])
def test_tests_and_benchmarks_use_only_public_faces(folder):
    problems = []
    for path in sorted((ROOT / folder).rglob("*.py")):
        for target, _, line in imports(path.read_text()):
            if any(part.startswith("_") for part in target.split(".")):
                problems.append(f"{path.relative_to(ROOT)}:{line}: imports private {target}")
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
