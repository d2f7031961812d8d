import pytest

from orthotune.core import OrthotuneError
from orthotune.search.training import DataRoot, load_dataset, load_node_data

# nodes, directed edges as PyG loads them, features, classes, split-0 train/val/test sizes
EXPECTED = {
    ("cora", "full"): (2708, 10556, 1433, 7, (1192, 796, 497)),
    ("cora", "semi"): (2708, 10556, 1433, 7, (140, 500, 1000)),
    ("citeseer", "full"): (3327, 9104, 3703, 6, (1596, 1065, 666)),
    ("citeseer", "semi"): (3327, 9104, 3703, 6, (120, 500, 1000)),
    ("pubmed", "full"): (19717, 88648, 500, 3, (9463, 6310, 3944)),
    ("pubmed", "semi"): (19717, 88648, 500, 3, (60, 500, 1000)),
    ("cornell", "full"): (183, 298, 1703, 5, (87, 59, 37)),
    ("texas", "full"): (183, 325, 1703, 5, (87, 59, 37)),
    ("wisconsin", "full"): (251, 515, 1703, 5, (120, 80, 51)),
}


@pytest.mark.parametrize("name, setting", sorted(EXPECTED))
def test_counts_match_the_real_files(data_root, name, setting):
    nodes, edges, features, classes, sizes = EXPECTED[(name, setting)]
    data = load_node_data(name, setting, data_root)
    assert (data.num_nodes, data.num_edges, data.x.shape[1], data.num_classes) == (
        nodes, edges, features, classes)
    train, val, test = data.masks([0])
    assert (int(train.sum()), int(val.sum()), int(test.sum())) == sizes
    assert data.num_splits == (10 if setting == "full" else 1)


@pytest.mark.parametrize("name, graphs", [("proteins", 1113), ("dd", 1178)])
def test_tu_datasets_load(data_root, name, graphs):
    assert len(load_dataset(name, None, data_root)) == graphs


def test_data_root_is_never_written(data_root):
    before = {p for p in data_root.path.rglob("*")}
    load_node_data("citeseer", "full", data_root)
    assert {p for p in data_root.path.rglob("*")} == before


def test_missing_data_root_is_a_clear_error(tmp_path):
    with pytest.raises(OrthotuneError, match="is not a directory"):
        DataRoot.resolve(tmp_path / "absent")


def test_missing_dataset_under_root_is_a_clear_error(tmp_path):
    with pytest.raises(OrthotuneError, match="no raw files"):
        load_node_data("cora", "full", DataRoot.resolve(tmp_path))
