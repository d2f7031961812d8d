"""A real search over PyG's GAT and a user's factory (issue 27, items 2, 3 and 5): both arms
of each cell searched on a local Ray, stored, and answered by ``best`` and ``report`` with the
names the user gave."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from orthotune.store import Store

pytestmark = pytest.mark.slow  # a real Ray, 8 short trainings on Cora

FACTORY = "factories_for_tests:small_gcn"
FACTORIES = Path(__file__).resolve().parents[1] / "models"  # where factories_for_tests lives
SPACE = {
    "name": "modules",
    "datasets": ["cora"],
    "repeats": [0],
    "backbones": ["gat", FACTORY],
    "depths": [2],
    "original": True,
    "ortho": {"T": [2, 4]},
    "train": {"epochs": 4, "patience": 4, "hidden": 16, "heads": [2, 4]},
    "asha": {"grace_period": 2, "reduction_factor": 2},
    "samples": 2,
}


def orthotune(*args: str) -> str:
    # the workers import the factory as the driver does: from the Python path it is given
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(FACTORIES), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-m", "orthotune.cli", *args], env=env, text=True,
                          capture_output=True, timeout=480)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_search_best_and_report_over_gat_and_a_factory(tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump(SPACE))
    store = tmp_path / "store"
    out = orthotune("launch", "--space", str(space), "--store", str(store), "--name", "modules",
                    "--concurrency", "2", "--seed", "0", "--progress", "off")
    trials = Store.open(str(store)).read("trials").to_pandas()
    assert len(trials) == 8 and set(trials["status"]) <= {"completed", "stopped"}, out
    assert sorted(set(zip(trials["backbone"], trials["ortho"]))) == sorted(
        (b, o) for b in ("gat", FACTORY) for o in (False, True))
    assert set(trials.loc[trials["backbone"] == "gat", "heads"]) <= {2, 4}
    assert trials["val_acc"].between(0, 1).all() and trials["test_acc"].between(0, 1).all()

    best = json.loads(orthotune("best", "--store", str(store), "--json"))["configs"]
    assert sorted((c["backbone"], c["ortho"]) for c in best) == sorted(
        (b, o) for b in ("gat", FACTORY) for o in (False, True))
    table = orthotune("best", "--store", str(store), "--backbone", FACTORY)
    assert "verdict per pair" in table and f"cora full {FACTORY} depth 2" in table

    report = tmp_path / "report.md"
    orthotune("report", "--store", str(store), "--format", "md", "-o", str(report))
    text = report.read_text()
    assert FACTORY in text and "gat" in text
