"""A search with a user's treatment (issue 50): a treatment that raises fails its trials, which are
stored as failed with its reason, and the search goes on with the other cells."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from orthotune.store import Store

pytestmark = pytest.mark.slow  # a real Ray, 4 short trainings on Texas

TREATMENTS = Path(__file__).resolve().parents[1] / "models"  # where treatments_for_tests lives
SPACE = {
    "name": "treated",
    "datasets": ["texas"],
    "repeats": [0],
    "backbones": ["gat", "sgc"],
    "depths": [2],
    "original": True,
    "train": {"epochs": 4, "patience": 4, "hidden": 8, "heads": 2, "drop_edge": [0.0, 0.3],
              "treatment": "treatments_for_tests:raising_for_gat"},
    "asha": {"grace_period": 2, "reduction_factor": 2},
    "samples": 2,
}


def test_a_raising_treatment_is_a_failed_trial_with_its_reason_and_the_search_goes_on(tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump(SPACE))
    store = tmp_path / "store"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(TREATMENTS), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-m", "orthotune.cli", "launch", "--space", str(space), "--store",
                           str(store), "--name", "treated", "--concurrency", "2", "--seed", "0", "--progress", "off"],
                          env=env, text=True, capture_output=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    trials = Store.open(str(store)).read("trials").to_pandas()
    gat, sgc = trials[trials["backbone"] == "gat"], trials[trials["backbone"] == "sgc"]
    assert len(gat) == len(sgc) == 2
    assert set(gat["status"]) == {"failed"}
    assert all("treatment 'treatments_for_tests:raising_for_gat' failed: RuntimeError: this treatment refuses GAT"
               in reason for reason in gat["reason"])
    assert set(sgc["status"]) <= {"completed", "stopped"} and sgc["val_acc"].between(0, 1).all()
    assert set(trials["treatment"]) == {"treatments_for_tests:raising_for_gat"}
