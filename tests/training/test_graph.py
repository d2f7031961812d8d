"""Graph classification on real PROTEINS: saved stratified folds, the trainer, the CLI."""

import json

import pytest
import torch

from orthotune.cli import main
from orthotune.core import DATASETS, ConfigError, TrainConfig
from orthotune.training import run_configs
from orthotune.training._graph import load_graph_data, make_folds, train_graph
from orthotune.training._run import TRAINERS

CPU = torch.device("cpu")
#: Small and quick, but the real protocol otherwise (folds, batches, selection).
QUICK = dict(hidden=16, batch_size=256)


@pytest.fixture(scope="module")
def proteins(data_root):
    return load_graph_data("proteins", None, data_root)


def test_folds_are_stratified_disjoint_and_cover_the_dataset(proteins):
    labels = proteins.dataset.y
    counts = torch.bincount(labels)
    assert len(proteins.folds) == 10 and proteins.num_graphs == 1113
    tests = torch.cat([f.test for f in proteins.folds])
    assert sorted(tests.tolist()) == list(range(1113))  # test folds partition the dataset
    for fold in proteins.folds:
        parts = [set(p.tolist()) for p in (fold.train, fold.val, fold.test)]
        assert not (parts[0] & parts[1] or parts[0] & parts[2] or parts[1] & parts[2])
        assert set.union(*parts) == set(range(1113))
        for part, share in ((fold.test, 0.1), (fold.val, 0.09)):
            per_class = torch.bincount(labels[part], minlength=2)
            assert ((per_class - counts * share).abs() <= 2).all(), (per_class, counts)


def test_folds_are_saved_in_the_cache_and_stable(proteins, data_root):
    path = proteins.fold_file
    assert path.is_file() and data_root.path not in path.parents  # never in the data root
    stored = json.loads(path.read_text())
    assert stored["num_graphs"] == 1113 and len(stored["folds"]) == 10
    assert stored["folds"][3]["test"] == proteins.folds[3].test.tolist()
    again = load_graph_data("proteins", None, data_root)
    fresh = make_folds(proteins.dataset.y)
    assert len(proteins.folds) == 10
    for a, b, c in zip(proteins.folds, again.folds, fresh, strict=True):
        for key in ("train", "val", "test"):
            assert torch.equal(getattr(a, key), getattr(b, key)) and torch.equal(getattr(a, key), getattr(c, key))


def test_graph_task_is_registered_and_configs_check_backbones():
    assert DATASETS.get("proteins").task == "graph" and TRAINERS.get("graph").train is train_graph
    config = TrainConfig(dataset="proteins")
    assert (config.backbone, config.depth, config.setting, config.hidden, config.batch_size) == (
        "gunet", 3, "cv10", 64, 64)
    dd = TrainConfig(dataset="dd", splits=tuple(range(10)))
    assert (dd.hidden, dd.batch_size, dd.dropout, dd.lr, dd.epochs) == (128, 32, 0.3, 1e-3, 200)
    with pytest.raises(ConfigError, match="backbone 'gcn' does not apply to graph-classification.*valid: gunet"):
        TrainConfig(dataset="proteins", backbone="gcn")
    with pytest.raises(ConfigError, match="valid: gcn, jknet, gcnii"):
        TrainConfig(dataset="cora", backbone="gunet")
    with pytest.raises(ConfigError, match="unknown key|unknown config key 'ratio'"):
        TrainConfig.from_dict({"dataset": "proteins", "ratio": 0.5})


@pytest.mark.slow
def test_run_configs_trains_folds_and_reports_every_epoch():
    seen = []
    config = TrainConfig(dataset="proteins", splits=(0, 1), epochs=2, **QUICK)
    original = TrainConfig(dataset="proteins", ortho=False, splits=(2,), epochs=2, **QUICK)
    results = run_configs([config, original], CPU, on_epoch=seen.append)
    assert [r.config for r in results] == [config, original]
    assert [e.epoch for e in seen] == [1, 2]
    assert [[r.split for r in result.runs] for result in results] == [[0, 1], [2]]
    for result in results:
        assert result.status == "completed" and result.seconds_per_epoch > 0 and result.device == "cpu"
        for run in result.runs:
            assert 1 <= run.best_epoch <= run.epochs == 2 and 0.5 < run.val_acc <= 1.0
            assert len(run.grad_norms) == 7 and run.m_sig > 0 and run.smoothness > 0
    for report in seen:
        assert [len(v) for v in report.val_acc] == [2, 1] and [len(v) for v in report.train_loss] == [2, 1]
        assert all(0.0 <= b <= 1.0 for b in report.best_val)
    # selection on validation: the first epoch with the highest validation accuracy
    for c, result in enumerate(results):
        for r, run in enumerate(result.runs):
            val = [e.val_acc[c][r] for e in seen]
            assert run.best_epoch == val.index(max(val)) + 1
            assert run.test_acc == seen[run.best_epoch - 1].test_acc[c][r]


@pytest.mark.slow
def test_graph_u_nets_train_with_gao_and_jis_optimiser(monkeypatch):
    """Adam with amsgrad and weight decay 8e-4, as Gao & Ji's trainer (the cv10 default)."""
    made = []
    adam = torch.optim.Adam
    monkeypatch.setattr(torch.optim, "Adam", lambda groups, **kwargs: made.append((groups, kwargs)) or adam(
        groups, **kwargs))
    config = TrainConfig(dataset="proteins", splits=(0,), epochs=1, **QUICK)
    assert config.weight_decay == 8e-4
    run_configs([config], CPU)
    ((groups, kwargs),) = made
    assert kwargs["amsgrad"] is True and kwargs["lr"] == config.lr
    assert {g["weight_decay"] for g in groups} == {8e-4}


@pytest.mark.slow  # 3-4 s: kept out of the fast subset
def test_a_run_does_not_depend_on_the_runs_beside_it(proteins):
    alone = train_graph(TrainConfig(dataset="proteins", splits=(1,), epochs=1, **QUICK), proteins, CPU)[0].runs[0]
    beside = train_graph(TrainConfig(dataset="proteins", splits=(0, 1), epochs=1, **QUICK), proteins, CPU)[0].runs[1]
    assert (alone.val_acc, alone.test_acc, alone.grad_norms) == (beside.val_acc, beside.test_acc, beside.grad_norms)


@pytest.mark.slow
def test_divergence_ends_failed_with_a_reason(proteins):
    config = TrainConfig(dataset="proteins", lr=1e30, epochs=3, **QUICK)  # the first step overflows
    result = train_graph(config, proteins, CPU)[0]
    assert result.status == "failed"
    assert "non-finite Ortho-GConv weight" in result.reason and "epoch 1" in result.reason


def test_bad_fold_is_a_config_error(proteins):
    with pytest.raises(ConfigError, match=r"split=10 must be a fold index in \[0, 9\]"):
        train_graph(TrainConfig(dataset="proteins", splits=(10,), epochs=1, **QUICK), proteins, CPU)


@pytest.mark.slow
def test_cli_train_on_proteins_json(capsys):
    argv = ["train", "--dataset", "proteins", "--backbone", "gunet", "--split", "0", "--epochs", "2", "--json",
            "--hidden", "16"]  # narrower than the protocol's 64 only to keep the test quick
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["status"] == "completed" and summary["config"]["depth"] == 3
    assert summary["config"]["splits"] == [0] and summary["epochs"] == 2
    assert 0.0 < summary["test_acc"] <= 1.0 and len(summary["grad_norms"]) == 7


def test_cli_node_backbone_on_proteins_is_one_line(capsys):
    assert main(["train", "--dataset", "proteins", "--backbone", "gcn", "--epochs", "1"]) == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and "backbone 'gcn' does not apply" in lines[0] and "valid: gunet" in lines[0]
