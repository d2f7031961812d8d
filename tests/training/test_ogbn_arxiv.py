"""ogbn-arxiv through OGB's own loader, on a tiny dataset in OGB's file format."""

import gzip

import numpy as np
import pytest
import torch

from orthotune.core import TrainConfig
from orthotune.training import DataRoot, load_node_data, train_node

NODES, CLASSES = 60, 40


def write_csv(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as handle:
        for row in rows:
            handle.write(",".join(str(v) for v in np.atleast_1d(row)) + "\n")


def make_tiny_arxiv(root):
    rng = np.random.default_rng(0)
    base = root / "ogbn_arxiv"
    edges = rng.integers(0, NODES, size=(150, 2))
    write_csv(base / "raw" / "edge.csv.gz", edges)
    write_csv(base / "raw" / "node-feat.csv.gz", rng.normal(size=(NODES, 128)).round(4))
    write_csv(base / "raw" / "node-label.csv.gz", rng.integers(0, CLASSES, size=NODES))
    write_csv(base / "raw" / "node_year.csv.gz", rng.integers(2000, 2020, size=NODES))
    write_csv(base / "raw" / "num-node-list.csv.gz", [NODES])
    write_csv(base / "raw" / "num-edge-list.csv.gz", [len(edges)])
    order = rng.permutation(NODES)
    for name, part in zip(("train", "valid", "test"), np.split(order, [36, 48])):
        write_csv(base / "split" / "time" / f"{name}.csv.gz", part)
    (base / "RELEASE_v1.txt").write_text("tiny ogbn-arxiv for tests\n")
    return base


def test_official_split_loads_and_trains(tmp_path):
    make_tiny_arxiv(tmp_path / "data")
    before = sorted(p.name for p in (tmp_path / "data").rglob("*"))
    data = load_node_data("ogbn-arxiv", None, DataRoot.resolve(tmp_path / "data"))
    assert data.setting == "official" and data.num_nodes == NODES and data.x.shape[1] == 128
    train, val, test = data.masks([0])
    assert (int(train.sum()), int(val.sum()), int(test.sum())) == (36, 12, 12)
    assert sorted(p.name for p in (tmp_path / "data").rglob("*")) == before  # read-only root
    config = TrainConfig(dataset="ogbn-arxiv", depth=2, hidden=16, epochs=3)
    result = train_node(config, data, torch.device("cpu"))[0]
    assert result.status == "completed" and 0.0 <= result.runs[0].test_acc <= 1.0


@pytest.mark.parametrize("ortho", [False, True])
def test_gcnii_trains_on_the_official_split_with_ogb_evaluator(tmp_path, ortho):
    make_tiny_arxiv(tmp_path / "data")
    data = load_node_data("ogbn-arxiv", None, DataRoot.resolve(tmp_path / "data"))
    config = TrainConfig(dataset="ogbn-arxiv", backbone="gcnii", depth=8, ortho=ortho, hidden=16, epochs=4, patience=10)
    result = train_node(config, data, torch.device("cpu"))[0]
    run = result.runs[0]
    assert result.status == "completed" and run.epochs == 4 and 1 <= run.best_epoch <= 4
    # OGB's Evaluator reads accuracy over the 12 official test nodes: a multiple of 1/12
    assert 0.0 <= run.test_acc <= 1.0 and abs(run.test_acc * 12 - round(run.test_acc * 12)) < 1e-6
    assert len(run.grad_norms) == 8 and all(g >= 0 for g in run.grad_norms)
