"""Datasets a user names (issue 27, item 4): a PyG class by name (``pyg:CLASS/NAME``) and a
file (``file:PATH``, ``.npz`` or ``.pt``), with their own masks (setting ``own``) or seeded
random splits (setting ``random``). Real data only: Cora written out by the test."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from orthotune.core import DATASETS, ConfigError, TrainConfig
from orthotune.search import cell_key
from orthotune.spaces import parse_space
from orthotune.training import check_dataset_files, load_node_data, run_configs
from orthotune.training._data import DataRoot, load_dataset
from orthotune.training._graph import load_graph_data
from orthotune.training._node_data import with_random_split

CPU = torch.device("cpu")
#: Few epochs, the same training values in every setting (own takes full's defaults, semi its own).
QUICK = dict(depth=2, epochs=20, patience=20, weight_decay=5e-4, alpha=0.1)


@pytest.fixture(scope="module")
def cora_raw(data_root) -> Data:
    """Cora as PyG loads it, public split (what a user would save)."""
    return load_dataset("cora", "semi", data_root)[0]


def _arrays(data: Data) -> dict[str, np.ndarray]:
    return {key: data[key].numpy() for key in ("x", "y", "edge_index", "train_mask", "val_mask", "test_mask")}


@pytest.fixture(scope="module")
def cora_files(cora_raw, tmp_path_factory) -> dict[str, str]:
    folder = tmp_path_factory.mktemp("user")
    np.savez(folder / "cora.npz", **_arrays(cora_raw))
    torch.save(cora_raw, folder / "cora.pt")
    return {"npz": f"file:{folder / 'cora.npz'}", "pt": f"file:{folder / 'cora.pt'}"}


def _accuracies(dataset: str, setting: str, **values) -> list[tuple[float, float]]:
    results = [run_configs([TrainConfig(dataset=dataset, setting=setting, ortho=ortho, **QUICK, **values)], CPU)[0]
               for ortho in (False, True)]
    return [(r.mean("val_acc"), r.mean("test_acc")) for r in results]


@pytest.mark.slow  # 3-4 s: kept out of the fast subset
def test_a_user_file_with_masks_trains_as_the_catalogue_dataset(cora_files):
    """Both arms, the same public split carried in the file: the same accuracies as the
    catalogue's Cora (semi), from the .npz, the .pt and Planetoid by class name."""
    expected = _accuracies("cora", "semi")
    assert _accuracies(cora_files["npz"], "own") == expected
    assert _accuracies(cora_files["pt"], "own") == expected
    assert _accuracies("pyg:Planetoid/Cora", "own") == expected
    assert all(0.3 < test < 1 for _, test in expected)


def test_a_pyg_class_by_name_reads_the_data_root(data_root):
    data = load_node_data("pyg:Planetoid/Cora", "own", data_root)
    assert (data.num_nodes, data.num_classes, data.num_splits) == (2708, 7, 1)
    assert [int(m.sum()) for m in data.masks([0])] == [140, 500, 1000]
    graphs = load_graph_data("pyg:TUDataset/PROTEINS", None, data_root)
    assert (graphs.num_graphs, graphs.num_classes, len(graphs.folds)) == (1113, 2, 10)


def test_random_splits_have_the_stated_fractions_and_are_reproducible(data_root, cora_files):
    data = load_node_data(cora_files["npz"], "random", data_root)
    config = TrainConfig(dataset=cora_files["npz"])  # the default setting: random, 60/20/20
    assert (config.setting, config.split_train, config.split_val) == ("random", 0.6, 0.2)
    split = with_random_split(data, config)
    train, val, test = split.masks([0, 1])
    assert [int(m[:, 0].sum()) for m in (train, val, test)] == [1625, 541, 542]
    assert not ((train & val) | (train & test) | (val & test)).any() and bool((train | val | test).all())
    again = with_random_split(load_node_data(cora_files["pt"], "random", data_root), config).masks([0, 1])
    assert all(torch.equal(a, b) for a, b in zip((train, val, test), again, strict=True))  # from the seed alone
    assert not torch.equal(train[:, 0], train[:, 1])  # another seed, another split


def test_random_splits_per_class(data_root, cora_files):
    data = load_node_data(cora_files["npz"], "random", data_root)
    per_class = with_random_split(data, TrainConfig(dataset=cora_files["npz"], split_per_class=20, split_val=0.2))
    train, val, _ = per_class.masks([3])
    assert torch.bincount(data.y[train[:, 0]]).tolist() == [20] * 7 and int(val.sum()) == 542
    stratified = with_random_split(data, TrainConfig(dataset=cora_files["npz"], split_stratify=True))
    train = stratified.masks([0])[0][:, 0]
    counts, shares = torch.bincount(data.y[train]), torch.bincount(data.y)
    assert ((counts - 0.6 * shares).abs() <= 1).all()


@pytest.mark.slow
def test_the_same_random_split_trains_alike_twice(cora_files):
    first = _accuracies(cora_files["npz"], "random", splits=(2,))
    assert _accuracies(cora_files["pt"], "random", splits=(2,)) == first
    assert _accuracies(cora_files["npz"], "random", splits=(3,)) != first


def _write(tmp_path, name: str, **arrays) -> str:
    path = tmp_path / name
    np.savez(path, **arrays)
    return f"file:{path}"


BAD = {
    "size": (dict(y=np.zeros(3, np.int64)), "y has 3 labels for 4 nodes"),
    "label": (dict(y=np.array([0, 1, 2, -1])), "label -1 is outside 0..2"),
    "nan": (dict(x=np.array([[0.0], [np.nan], [1.0], [1.0]], np.float32)), "x holds 1 NaN or infinite"),
    "edge": (dict(edge_index=np.array([[0, 1], [1, 4]])), "edge_index holds node 4, outside 0..3"),
    "overlap": (dict(val_mask=np.array([True, False, True, False])), "train_mask and val_mask overlap on 1 node"),
    "dtype": (dict(test_mask=np.array([0, 0, 0, 1])), "test_mask has dtype torch.int64; masks must be boolean"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_broken_file_is_one_line(tmp_path, data_root, case):
    good = dict(x=np.ones((4, 2), np.float32), y=np.array([0, 1, 2, 0]), edge_index=np.array([[0, 1], [1, 2]]),
                train_mask=np.array([True, False, False, False]), val_mask=np.array([False, True, False, False]),
                test_mask=np.array([False, False, True, True]))
    changes, message = BAD[case]
    name = _write(tmp_path, "bad.npz", **{**good, **changes})
    with pytest.raises(ConfigError, match=message) as error:
        check_dataset_files(name, "own", data_root)
    assert "\n" not in str(error.value) and "bad.npz" in str(error.value)


def test_garbage_missing_and_wrong_files_are_one_line(tmp_path, data_root):
    (tmp_path / "junk.npz").write_bytes(b"\x00\x01garbage" * 50)
    (tmp_path / "junk.pt").write_bytes(b"\x80\x02garbage" * 50)
    torch.save({"x": torch.ones(2, 2)}, tmp_path / "partial.pt")
    cases = {"junk.npz": "is not a readable .npz", "junk.pt": "is not a PyG Data or dict of tensors",
             "absent.npz": "does not exist", "partial.pt": "lacks y, edge_index"}
    for file, message in cases.items():
        with pytest.raises(ConfigError, match=message) as error:
            check_dataset_files(f"file:{tmp_path / file}", None, data_root)
        assert "\n" not in str(error.value)


def test_a_pickle_in_a_pt_file_is_refused_not_run(tmp_path, data_root):
    torch.save({"x": torch.ones(2, 2), "extra": DataRoot(tmp_path)}, tmp_path / "code.pt")
    with pytest.raises(ConfigError, match="weights_only=True"):
        check_dataset_files(f"file:{tmp_path / 'code.pt'}", None, data_root)


def test_own_setting_needs_masks(tmp_path, data_root):
    name = _write(tmp_path, "plain.npz", x=np.ones((3, 2), np.float32), y=np.array([0, 1, 0]),
                  edge_index=np.array([[0], [1]]))
    with pytest.raises(ConfigError, match="has no train_mask, val_mask and test_mask; use --setting random"):
        check_dataset_files(name, "own", data_root)
    check_dataset_files(name, "random", data_root)


def test_pyg_names_fail_in_one_line(tmp_path, data_root):
    with pytest.raises(ConfigError, match=r"unknown PyG dataset class 'Planetiod'.*e\.g\. Planetoid, .*TUDataset"):
        check_dataset_files("pyg:Planetiod/Cora", None, data_root)
    with pytest.raises(ConfigError, match="has no folder Amazon/ for dataset 'pyg:Amazon/Computers'.*--download"):
        check_dataset_files("pyg:Amazon/Computers", None, data_root)
    (tmp_path / "TUDataset" / "MUTAG").mkdir(parents=True)
    with pytest.raises(ConfigError, match=r"lacks 2 raw file\(s\) of dataset 'pyg:TUDataset/MUTAG' below "
                                          r"TUDataset/: TUDataset/MUTAG/raw/MUTAG_A.txt, .*add --download"):
        check_dataset_files("pyg:TUDataset/MUTAG", None, DataRoot.resolve(tmp_path))
    assert not any(tmp_path.rglob("raw"))  # the data root is never written without --download
    with pytest.raises(ConfigError, match="must read pyg:CLASS or pyg:CLASS/NAME"):
        TrainConfig(dataset="pyg:Planetoid/Cora/extra")


def test_names_read_well_in_configs_spaces_and_cell_keys(cora_files):
    name = cora_files["npz"]
    assert DATASETS.get(name).name == name and name in DATASETS and "file:x.npz" in DATASETS
    assert DATASETS.get("PyG:Planetoid/Cora").name == "pyg:Planetoid/Cora"
    config = TrainConfig(dataset="pyg:Planetoid/Cora")
    assert (config.setting, config.backbone) == ("own", "gcn")
    assert TrainConfig(dataset="pyg:TUDataset/PROTEINS").backbone == "gunet"
    assert cell_key(config.to_dict()) == "pyg:Planetoid/Cora/gcn/2/ortho"
    space = parse_space({"datasets": ["pyg:WikipediaNetwork/chameleon", name], "backbones": ["gcn"], "depths": [2]})
    assert space.datasets == ("pyg:WikipediaNetwork/chameleon", name)
    assert space.protocol(name) == {"setting": "random", "splits": [0, 1, 2, 3, 4]}
    with pytest.raises(ConfigError, match="split_train=0.5 applies to the random setting only"):
        TrainConfig(dataset="cora", split_train=0.5)
    with pytest.raises(ConfigError, match="must be below 1"):
        TrainConfig(dataset=name, split_train=0.9, split_val=0.2)


@pytest.mark.slow
def test_train_a_file_dataset_through_the_cli(cora_files):
    proc = subprocess.run([sys.executable, "-m", "orthotune.cli", "train", "--dataset", cora_files["npz"],
                           "--setting", "own", "--depth", "2", "--epochs", "10", "--json"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert 0.3 < summary["test_acc"] <= 1


def test_launch_checks_a_file_dataset_before_the_store_and_ray(tmp_path, monkeypatch):
    """A space's file dataset goes through launch's file check: a broken file fails in one
    line before the store is made or Ray starts."""
    import ray

    from orthotune.search import LaunchOptions, launch

    monkeypatch.setattr(ray, "init", lambda *args, **kwargs: pytest.fail("Ray started"))
    name = _write(tmp_path, "bad.npz", x=np.ones((3, 2), np.float32), y=np.array([0, 1, 5]),
                  edge_index=np.array([[0], [1]]), num_classes=np.array(3))
    space = parse_space({"datasets": [name], "backbones": ["gcn"], "depths": [2]})
    options = LaunchOptions(store=str(tmp_path / "store"), name="api", space=space, scheduler="fifo")
    with pytest.raises(ConfigError, match=r"label 5 is outside 0\.\.2"):
        launch(options, progress=False)
    assert not (tmp_path / "store").exists()


@pytest.mark.slow
def test_best_report_and_verdict_read_file_cells(cora_files, tmp_path, capsys):
    """Both arms of a file dataset on random splits 0-2, stored as a search would: each row
    holds its split rule (setting, split_* fields, repeat_split); ``best`` and ``report``
    show the cell under the name given, with the paired verdict."""
    from orthotune.cli import main
    from orthotune.store import Store, epoch_rows, trial_row

    name = cora_files["npz"]
    store = Store.open(str(tmp_path / "store"), create=True)
    for number, ortho in enumerate((False, True)):
        config = TrainConfig(dataset=name, ortho=ortho, splits=(0, 1, 2), **QUICK)
        result = run_configs([config], CPU)[0]
        store.write_trial(trial_row("given", f"t{number}", result, result.status, result.reason),
                          epoch_rows({}, result.runs))
    rows = store.read("trials").to_pylist()
    assert {(r["dataset"], r["setting"], r["split_train"], r["split_val"], r["split_per_class"]) for r in rows} == {
        (name, "random", 0.6, 0.2, 0)}
    assert all(r["repeat_split"] == [0, 1, 2] for r in rows)
    assert main(["best", "--store", store.uri, "--dataset", name, "--json"]) == 0
    best = json.loads(capsys.readouterr().out)["configs"]
    assert {entry["config"]["dataset"] if "config" in entry else entry["dataset"] for entry in best} == {name}
    assert main(["report", "--store", store.uri]) == 0
    report = capsys.readouterr().out
    assert name in report and "random" in report
    # written to a file, the figures go beside it: their names hold no '/' or ':' of the path
    written = tmp_path / "out" / "report.md"
    assert main(["report", "--store", store.uri, "--format", "md", "-o", str(written)]) == 0
    images = sorted(path.name for path in written.parent.glob("report-*.png"))
    assert images and all(":" not in image for image in images), images
    assert all(f"]({image})" in written.read_text() for image in images)
