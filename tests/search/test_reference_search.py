"""The structure-agnostic reference in real searches (issue 36): trained once per dataset and
setting per search (not once per cell), with the arms' budget, and reused by a later search
of the same store with the same budget, never with another (decided on hand-made records
and rows below); `launch` ends with it."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "reports"))  # the shared store builders
from report_stores import hand_row, hand_store  # noqa: E402

from orthotune.search._options import LaunchOptions  # noqa: E402
from orthotune.search._reference import reused_references  # noqa: E402
from orthotune.spaces import parse_space  # noqa: E402
from orthotune.store import Store  # noqa: E402

SPACE = {"datasets": ["texas"], "repeats": [0, 1], "backbones": ["gcn"], "depths": [2, 3], "original": True,
         "ortho": {"T": [1, 2], "lam": 1.0e-4},
         "train": {"lr": [0.05, 0.01, 0.005], "hidden": 16, "epochs": 6, "patience": 6},
         "asha": {"grace_period": 3, "reduction_factor": 2}, "samples": 2, "reference": True}


def launch(store, name, space_file, *extra):
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run([sys.executable, "-m", "orthotune.cli", "launch", "--space", str(space_file), "--store",
                           str(store), "--name", name, "--progress", "off", "--concurrency", "2", *extra],
                          env=env, text=True, capture_output=True, timeout=420)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def trained(store) -> Counter:
    """Trials per (search, backbone) in the store: what each search trained."""
    return Counter((row["search"], row["backbone"]) for row in Store.open(str(store)).read("trials").to_pylist())


@pytest.fixture(scope="module")
def space_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("space") / "ref.yaml"
    path.write_text(yaml.safe_dump(SPACE))
    return path


@pytest.mark.slow  # two searches on a real local Ray
def test_trained_once_per_dataset_per_search_and_reused_by_the_next(tmp_path, space_file):
    store = tmp_path / "store"
    first = launch(store, "first", space_file)
    counts = trained(store)
    # 2 depths x 2 arms, 2 trials each; the reference once for Texas, with the arms' 2 trials
    assert counts == {("first", "gcn"): 8, ("first", "mlp"): 2}
    rows = [r for r in Store.open(str(store)).read("trials").to_pylist() if r["backbone"] == "mlp"]
    assert all(r["ortho"] is False and r["depth"] == 2 and r["splits"] == [0, 1] for r in rows)
    assert {r["max_epochs"] for r in rows} == {6} and {r["lr"] for r in rows} <= {0.05, 0.01, 0.005}
    assert "structure-agnostic baseline" in first.split("verdict per pair")[1]

    second = launch(store, "second", space_file, "--seed", "1")  # another seed: the same budget
    counts = trained(store)
    assert counts[("second", "gcn")] == 8 and counts[("second", "mlp")] == 0  # reused, not trained
    assert Store.open(str(store)).search_meta("second")["references"] == {"texas/mlp/2/reference": "first"}
    assert "structure-agnostic baseline" in second.split("verdict per pair")[1]


# -- the reuse decision, on hand-made records and rows ---------------------------------------

def _options(store, name="new", **change) -> LaunchOptions:
    return LaunchOptions(store=str(store), name=name, space=parse_space({**SPACE, **change.pop("space", {})}),
                         **change)


def _earlier(tmp_path, trials: int, **change):
    """A store holding search ``earlier``: its record (SPACE with ``change``) and ``trials``
    reference rows on Texas."""
    rows = [hand_row(f"r{i}", search="earlier", dataset="texas", backbone="mlp", splits=[0, 1],
                     variant="default", selection="val_acc") for i in range(trials)]
    store = hand_store(tmp_path / "s", rows)
    options = _options(store, "earlier", **change)
    store.save_search_meta("earlier", {"options": options.to_meta(), "created_at": "2026-01-01T00:00:00"})
    return store


def test_reused_with_the_same_budget_whatever_the_seed(tmp_path):
    store = _earlier(tmp_path, trials=2, seed=7)
    assert reused_references(store, _options(store)) == {"texas/mlp/2/reference": "earlier"}


@pytest.mark.parametrize("change", [
    dict(samples=3),  # more trials
    dict(space={"repeats": [0, 1, 2]}),  # other repeats
    dict(space={"setting": "full", "repeats": [0, 2]}),  # other splits
    dict(space={"train": {**SPACE["train"], "lr": [0.05, 0.01]}}),  # another searched range
    dict(space={"train": {**SPACE["train"], "epochs": 8}}),  # other epochs
    dict(space={"asha": {"grace_period": 2, "reduction_factor": 2}}),  # another ASHA
    dict(scheduler="fifo"),
    dict(space={"reference": False}),  # it never searched the reference
])
@pytest.mark.slow
def test_another_budget_is_never_reused(tmp_path, change):
    store = _earlier(tmp_path, trials=3, **change)
    assert reused_references(store, _options(store)) == {}


def test_an_unfinished_reference_cell_is_not_reused(tmp_path):
    store = _earlier(tmp_path, trials=1)  # 1 of the 2 trials its budget plans
    assert reused_references(store, _options(store)) == {}


def test_training_values_the_reference_does_not_read_leave_its_budget_alone(tmp_path):
    store = _earlier(tmp_path, trials=2, space={"train": {**SPACE["train"], "layout": "standard"}})
    assert reused_references(store, _options(store)) == {"texas/mlp/2/reference": "earlier"}


def test_the_setting_said_or_left_to_the_dataset_is_one_budget(tmp_path):
    store = _earlier(tmp_path, trials=2, space={"setting": "full"})
    assert reused_references(store, _options(store)) == {"texas/mlp/2/reference": "earlier"}
