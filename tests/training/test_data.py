import pytest
import torch

from orthotune.core import DATASETS, OrthotuneError
from orthotune.training import DataRoot, check_dataset_files, load_node_data
from orthotune.training._data import NO_DATA_ROOT, load_dataset, missing_files, required_files

# nodes, directed edges as PyG loads them, features, classes, split-0 train/val/test sizes
EXPECTED = {
    ("cora", "full"): (2708, 10556, 1433, 7, (1192, 796, 497)),
    ("cora", "semi"): (2708, 10556, 1433, 7, (140, 500, 1000)),
    ("citeseer", "full"): (3327, 9104, 3703, 6, (1596, 1065, 666)),
    ("citeseer", "semi"): (3327, 9104, 3703, 6, (120, 500, 1000)),
    ("pubmed", "full"): (19717, 88648, 500, 3, (9463, 6310, 3944)),
    ("pubmed", "semi"): (19717, 88648, 500, 3, (60, 500, 1000)),
    # FastGCN's split (the DropEdge paper's Table 3)
    ("cora", "dropedge-full"): (2708, 10556, 1433, 7, (1208, 500, 1000)),
    ("citeseer", "dropedge-full"): (3327, 9104, 3703, 6, (1812, 500, 1000)),
    ("pubmed", "dropedge-full"): (19717, 88648, 500, 3, (18217, 500, 1000)),
    ("cora", "dropedge-full-aug"): (2708, 10556, 1433, 7, (1208, 500, 1000)),
    ("cornell", "full"): (183, 298, 1703, 5, (87, 59, 37)),
    ("texas", "full"): (183, 325, 1703, 5, (87, 59, 37)),
    ("wisconsin", "full"): (251, 515, 1703, 5, (120, 80, 51)),
}


@pytest.mark.slow
@pytest.mark.parametrize("name, setting", sorted(EXPECTED))
def test_counts_match_the_real_files(data_root, name, setting):
    nodes, edges, features, classes, sizes = EXPECTED[(name, setting)]
    assert (DATASETS.get(name).nodes, DATASETS.get(name).features) == (nodes, features)  # memory estimates
    data = load_node_data(name, setting, data_root)
    assert (data.num_nodes, data.num_edges, data.x.shape[1], data.num_classes) == (
        nodes, edges, features, classes)
    train, val, test = data.masks([0])
    assert (int(train.sum()), int(val.sum()), int(test.sum())) == sizes
    assert data.num_splits == (10 if setting == "full" else 1)


@pytest.mark.parametrize("name, graphs", [("proteins", 1113), pytest.param("dd", 1178, marks=pytest.mark.slow)])
def test_tu_datasets_load(data_root, name, graphs):
    dataset = load_dataset(name, None, data_root)
    assert len(dataset) == graphs
    info = DATASETS.get(name)  # the catalogue's sizes: mean nodes per graph, rounded up
    assert (info.nodes, info.features) == (-(-dataset._data.num_nodes // graphs), dataset.num_features)


def test_data_root_is_never_written(data_root):
    before = {p for p in data_root.path.rglob("*")}
    load_node_data("citeseer", "full", data_root)
    assert {p for p in data_root.path.rglob("*")} == before


def test_missing_data_root_is_a_clear_error(tmp_path):
    with pytest.raises(OrthotuneError, match="is not a directory"):
        DataRoot.resolve(tmp_path / "absent")


def test_missing_dataset_under_root_is_a_clear_error(tmp_path):
    with pytest.raises(OrthotuneError, match=r"lacks 18 file\(s\) of dataset 'cora' \(full\): Planetoid/Cora/geom"):
        load_node_data("cora", "full", DataRoot.resolve(tmp_path))


def test_no_data_root_set_is_an_error_never_a_download(monkeypatch):
    monkeypatch.delenv("ORTHOTUNE_DATA_ROOT")
    with pytest.raises(OrthotuneError) as error:
        DataRoot.resolve()
    assert str(error.value) == NO_DATA_ROOT and "--download" in NO_DATA_ROOT and "ORTHOTUNE_DATA_ROOT" in NO_DATA_ROOT


def test_download_root_is_created_and_writable(tmp_path):
    root = DataRoot.resolve(tmp_path / "new" / "data", download=True)
    assert root.download and root.path.is_dir()
    assert not DataRoot.resolve(tmp_path / "new" / "data").download


@pytest.mark.parametrize("name", DATASETS.names())
def test_every_setting_names_its_files_and_the_shared_data_has_them(data_root, name):
    for setting in DATASETS.get(name).settings:
        files = required_files(name, setting)
        assert files and all(f.startswith(DATASETS.get(name).subdir + "/") for f in files)
        if name != "ogbn-arxiv":  # not in the shared data
            assert missing_files(name, setting, data_root) == []
            check_dataset_files(name, setting, data_root)


def test_missing_files_are_named_with_the_data_root(data_root, tmp_path):
    with pytest.raises(OrthotuneError) as error:
        check_dataset_files("ogbn-arxiv", None, data_root)
    message = str(error.value)
    assert str(data_root.path) in message and "ogbn_arxiv/RELEASE_v1.txt" in message and "and 4 more" in message
    assert "\n" not in message and "--download" in message
    (tmp_path / "WebKB" / "texas" / "raw").mkdir(parents=True)
    (tmp_path / "WebKB" / "texas" / "raw" / "out1_graph_edges.txt").write_text("")
    missing = missing_files("texas", "full", DataRoot.resolve(tmp_path))
    assert missing[0] == "WebKB/texas/raw/out1_node_feature_label.txt" and len(missing) == 11
    with pytest.raises(OrthotuneError, match="lacks 11 file"):
        check_dataset_files("texas", "full", str(tmp_path))


def test_directed_keeps_webkb_edges_as_loaded(data_root):
    from orthotune.core import TrainConfig
    from orthotune.training import run_configs
    from orthotune.training._run import task_data

    directed = load_node_data("texas", "full", data_root, directed=True)
    undirected = load_node_data("texas", "full", data_root)
    a, b = directed.adj.to_dense(), undirected.adj.to_dense()
    assert not torch.equal(a, a.T) and torch.equal(b, b.T)
    # Texas has 325 directed edges, some reciprocal; with self-loops on every node
    assert 325 + 183 >= int((a != 0).sum()) > 183 and int((b != 0).sum()) > int((a != 0).sum())
    # the process-wide cache keeps both graphs apart, and configs reach the directed one
    root = str(data_root.path)
    assert task_data("texas", "full", root, "cpu", True) is not task_data("texas", "full", root, "cpu", False)
    config = TrainConfig(dataset="texas", directed=True, epochs=2)
    assert run_configs([config], torch.device("cpu"), root)[0].status == "completed"


def test_directed_normalisation_uses_out_degrees_like_the_authors():
    from orthotune.training import normalised_adjacency

    edges = torch.tensor([[0, 0], [1, 2]])  # 0 -> 1, 0 -> 2
    a = normalised_adjacency(edges, 3, directed=True).to_dense()
    # D = out-degree + 1 = (3, 1, 1); A_hat = D^-1/2 (A + I) D^-1/2, row = source
    expected = torch.tensor([[1 / 3, 3**-0.5, 3**-0.5], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    assert torch.allclose(a, expected)
    assert torch.allclose(normalised_adjacency(edges, 3).to_dense(), normalised_adjacency(edges, 3).to_dense().T)


def test_mirroring_a_root_another_process_mirrors_at_once_is_not_an_error(tmp_path, monkeypatch):
    """Two processes may both find a link missing and both make it (the plan's measuring
    streams on a fresh cache did): the second one's FileExistsError is the same link."""
    from pathlib import Path

    from orthotune.training import _data

    (tmp_path / "src" / "raw").mkdir(parents=True)
    (tmp_path / "src" / "raw" / "file.npz").write_bytes(b"x")
    _data._mirror(tmp_path / "src", tmp_path / "dst")
    monkeypatch.setattr(Path, "exists", lambda self: False)  # as if the other process linked it just now
    _data._mirror(tmp_path / "src", tmp_path / "dst")
    assert (tmp_path / "dst" / "raw" / "file.npz").read_bytes() == b"x"
