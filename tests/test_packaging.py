"""What gets installed lives under ``orthotune.``: build the wheel, install it into a fresh
venv outside the checkout, import ``orthotune.models``, and find no top-level ``models``."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from orthotune import LAYERS

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # --no-build-isolation: the test venv's setuptools builds it (no download)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(out), str(ROOT)], check=True, capture_output=True, cwd=out)
    return next(out.glob("orthotune-*.whl"))


@pytest.mark.slow
def test_wheel_holds_only_the_orthotune_namespace(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names if not n.split("/")[0].endswith((".dist-info", ".data"))}
    assert tops == {"orthotune"}, tops
    for package in LAYERS:
        assert f"orthotune/{package}/__init__.py" in names, package
    assert "orthotune/spaces/presets/quick.yaml" in names
    # the package's folder is the repository root: only its layers ship, never tests or benches
    assert not [n for n in names if n.startswith(("orthotune/tests/", "orthotune/bench/"))]


def test_pyproject_packages_are_the_layers():
    """pyproject lists the packages setuptools installs (it cannot read them from
    ``orthotune.LAYERS``): the same layers, as a set, besides the root and the presets' data."""
    import tomllib

    packages = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    assert set(packages) == {"orthotune", "orthotune.spaces.presets", *(f"orthotune.{layer}" for layer in LAYERS)}


@pytest.mark.slow
def test_installed_wheel_imports_outside_the_checkout(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    site = Path(subprocess.check_output(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True).strip())
    # the dependencies (torch, PyG, Ray, ...) come from the test environment through a .pth
    # file; orthotune itself only from the wheel, unpacked into the fresh venv
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    zipfile.ZipFile(wheel).extractall(site)
    code = ("import importlib.util, orthotune, orthotune.models, orthotune.cli;"
            "print(orthotune.models.__file__);"
            f"print([m for m in {LAYERS!r} "
            "if importlib.util.find_spec(m)])")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    models_file, top_level = out.stdout.strip().splitlines()
    assert models_file.startswith(str(site)), models_file
    assert top_level == "[]", f"top-level packages installed: {top_level}"
    assert not any((site / name).exists() for name in ("core", "models", "search", "tests", "bench"))
