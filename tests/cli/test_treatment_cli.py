"""A treatment named on the command line or in a space (issue 50): an unknown or malformed one is
one line and exit 2 before any work (no Ray, no search record); a real one trains."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from orthotune.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "models"))  # treatments_for_tests
SPACE = "datasets: [cora]\nbackbones: [gat]\ndepths: [2]\noriginal: true\ntrain: {{treatment: '{}'}}\n"
BAD = [
    ("no_such_module_for_tests:pairnorm", "treatment 'no_such_module_for_tests:pairnorm': cannot import"),
    ("treatments_for_tests:absent", "treatments_for_tests has no callable 'absent'"),
    ("pairnorm", "treatment='pairnorm' must be package.module:function"),
]


@pytest.fixture
def ray_starts(monkeypatch) -> list:
    import ray

    calls: list = []
    monkeypatch.setattr(ray, "init", lambda *args, **kwargs: calls.append(args) or pytest.fail("Ray started"))
    return calls


def error_line(capsys, command: str) -> str:
    (line,) = capsys.readouterr().err.splitlines()  # one line: no traceback
    assert line.startswith(f"orthotune {command}: error: "), line
    return line


@pytest.mark.parametrize(("reference", "expected"), BAD)
def test_train_refuses_a_bad_treatment_in_one_line(capsys, reference, expected):
    argv = ["train", "--dataset", "cora", "--backbone", "gat", "--no-ortho", "--treatment", reference]
    assert main(argv) == 2
    assert expected in error_line(capsys, "train")


@pytest.mark.parametrize(("reference", "expected"), BAD)
def test_launch_refuses_a_bad_treatment_in_a_space_before_ray_and_the_store(tmp_path, capsys, ray_starts,
                                                                             reference, expected):
    space = tmp_path / "space.yaml"
    space.write_text(SPACE.format(reference))
    store = tmp_path / "store"
    assert main(["launch", "--space", str(space), "--store", str(store)]) == 2
    assert expected in error_line(capsys, "launch")
    assert not ray_starts and not (store / "searches").exists()


def test_train_applies_a_treatment_that_exists(capsys, data_root):
    argv = ["train", "--dataset", "texas", "--backbone", "gat", "--no-ortho", "--depth", "2", "--hidden", "8",
            "--heads", "2", "--epochs", "2", "--split", "0", "--treatment", "treatments_for_tests:wrapped", "--json"]
    assert main(argv) == 0
    assert '"treatment": "treatments_for_tests:wrapped"' in capsys.readouterr().out
