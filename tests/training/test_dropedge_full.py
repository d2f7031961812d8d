"""The dropedge-full setting (issue 50): DropEdge's full-supervised protocol, FastGCN's split of
the Planetoid files and the DropEdge scripts' first-order adjacency ``I + D^-1/2 A D^-1/2``."""

from __future__ import annotations

import pytest
import torch
from torch_geometric.utils import remove_self_loops, to_edge_index

from orthotune.core import DATASETS, SETTINGS, ConfigError, TrainConfig
from orthotune.training import load_node_data, normalised_adjacency, run_configs
from orthotune.training._drop_edge import slot_adjacency
from orthotune.training._node_data import fastgcn_masks


def split(name: str, data_root) -> tuple[torch.Tensor, ...]:
    return tuple(m[:, 0] for m in load_node_data(name, "dropedge-full", data_root).masks([0]))


def test_cora_trains_every_node_before_the_last_500_ahead_of_planetoids_test_nodes(data_root):
    train, val, test = split("cora", data_root)
    assert (int(train.sum()), int(val.sum()), int(test.sum())) == (1208, 500, 1000)
    assert not (train & val).any() and not (train & test).any() and not (val & test).any()
    assert bool((train | val | test).all())  # Cora: every node has a part
    assert val.nonzero().view(-1).tolist() == list(range(1208, 1708))  # the authors' idx_val
    public = load_node_data("cora", "semi", data_root).masks([0])
    assert torch.equal(test, public[2][:, 0])  # Planetoid's public test nodes
    assert bool(train[public[1][:, 0]].all())  # Planetoid's public validation nodes train here
    assert all(torch.equal(a, b) for a, b in zip(split("cora", data_root), (train, val, test)))  # deterministic


def test_the_rule_reads_the_first_test_node_and_refuses_a_graph_too_small():
    test = torch.zeros(1000, dtype=torch.bool)
    test[700:900] = True  # nodes 900-999 belong to no part (CiteSeer's padded test range)
    train, val, held = (m[:, 0] for m in fastgcn_masks(test))
    assert (int(train.sum()), int(val.sum()), int(held.sum())) == (200, 500, 200)
    assert bool(train[:200].all()) and bool(val[200:700].all()) and not (train | val | held)[900:].any()
    small = torch.zeros(600, dtype=torch.bool)
    small[400:] = True
    with pytest.raises(ConfigError, match="more than 500 nodes before the first test node"):
        fastgcn_masks(small)


def test_the_setting_is_declared_once_and_unknown_settings_list_it():
    info = SETTINGS.get("dropedge-full")
    assert (info.split, info.adjacency, info.repeats_field) == ("fastgcn", "first-order", "seeds")
    others = {"dropedge-full": "first-order", "semi-rw": "random-walk"}
    assert {SETTINGS.get(name).adjacency for name in SETTINGS if name not in others} == {"augmented"}
    assert SETTINGS.get("semi-rw").adjacency == "random-walk" and SETTINGS.get("semi-rw").split == "public"
    augmented = SETTINGS.get("dropedge-full-aug")  # the same split, their other scripts' adjacency
    assert (augmented.split, augmented.adjacency, augmented.repeats_field) == ("fastgcn", "augmented", "seeds")
    for name in ("cora", "citeseer", "pubmed"):
        assert {"dropedge-full", "dropedge-full-aug", "semi-rw"} <= set(DATASETS.get(name).settings)
    with pytest.raises(ConfigError, match="dropedge-full"):
        SETTINGS.get("fastgcn-full")
    with pytest.raises(ConfigError, match="valid: full, semi, semi-rw, dropedge-full, dropedge-full-aug"):
        DATASETS.get("cora").check_setting("bogus")
    with pytest.raises(ConfigError, match="not available for texas"):
        TrainConfig(dataset="texas", setting="dropedge-full")


def test_first_order_adjacency_is_the_identity_plus_the_normalised_graph(data_root):
    edges = torch.tensor([[0, 1, 0, 2], [1, 0, 2, 0]])  # 0 - 1, 0 - 2
    a = normalised_adjacency(edges, 4, adjacency="first-order").to_dense()
    r = 2**-0.5  # D = (2, 1, 1, 0): the isolated node 3 keeps its identity row
    assert torch.allclose(a, torch.tensor([[1, r, r, 0], [r, 1, 0, 0], [r, 0, 1, 0], [0, 0, 0, 1.0]]))
    cora = load_node_data("cora", "dropedge-full", data_root)
    assert (cora.adjacency, load_node_data("cora", "semi", data_root).adjacency) == ("first-order", "augmented")
    dense = cora.adj.to_dense()
    assert torch.equal(dense.diagonal(), torch.ones(cora.num_nodes))
    # DropEdge renormalises each kept graph the same way: at rate 0, the setting's adjacency
    kept = remove_self_loops(to_edge_index(cora.adj)[0])[0]
    index, weight = slot_adjacency(kept, cora.num_nodes, [0.0], [torch.Generator()], "first-order")
    assert torch.allclose(torch.sparse_coo_tensor(index.as_tensor(), weight, dense.shape).to_dense(), dense)


def test_packed_gcn_trains_on_it_and_pyg_convolutions_are_refused(data_root):
    base = dict(dataset="cora", setting="dropedge-full", ortho=False, depth=2, hidden=8, epochs=3, patience=3,
                seeds=(0,))
    root = str(data_root.path)
    (result,) = run_configs([TrainConfig(backbone="gcn", drop_edge=0.3, **base)], torch.device("cpu"), root)
    assert result.status == "completed"
    with pytest.raises(ConfigError, match="first-order adjacency"):
        run_configs([TrainConfig(backbone="gat", **base)], torch.device("cpu"), root)


def test_the_augmented_form_has_the_same_split_and_kipfs_adjacency_where_pyg_convolutions_train(data_root):
    """IncepGCN's full-supervised script (issue 50): DropEdge's split, the graph as the semi
    setting propagates it, and PyG's convolutions normalising their own way agree with it."""
    augmented, first = load_node_data("cora", "dropedge-full-aug", data_root), load_node_data(
        "cora", "dropedge-full", data_root)
    assert all(torch.equal(a, b) for a, b in zip(augmented.masks([0]), first.masks([0])))
    assert augmented.adjacency == "augmented"
    assert torch.equal(augmented.adj.to_dense(), load_node_data("cora", "semi", data_root).adj.to_dense())
    config = TrainConfig(dataset="cora", setting="dropedge-full-aug", backbone="incepgcn", depth=8, ortho=False)
    assert (config.hidden, config.lr, config.weight_decay, config.dropout, config.epochs) == (128, 0.01, 1e-3, 0.5, 400)
    base = dict(dataset="cora", setting="dropedge-full-aug", ortho=False, depth=2, hidden=8, epochs=2, patience=2,
                seeds=(0,))
    (result,) = run_configs([TrainConfig(backbone="gat", **base)], torch.device("cpu"), str(data_root.path))
    assert result.status == "completed"


def test_random_walk_adjacency_averages_each_node_with_its_neighbours(data_root):
    """DropEdge's AugRWalk, ``D^-1 (A + I)`` (the semi-rw setting): rows sum to one, row ``i``
    weighs ``i`` and each neighbour ``1 / (degree + 1)``; DropEdge renormalises each kept graph
    the same way, and PyG's convolutions, which normalise their own way, are refused."""
    edges = torch.tensor([[0, 1, 0, 2, 2], [1, 0, 2, 0, 2]])  # 0 - 1, 0 - 2, and a self-loop at 2 (dropped)
    a = normalised_adjacency(edges, 4, adjacency="random-walk").to_dense()
    third, half = 1 / 3, 0.5
    assert torch.allclose(a, torch.tensor([[third, third, third, 0], [half, half, 0, 0], [half, 0, half, 0],
                                           [0, 0, 0, 1.0]]))
    cora = load_node_data("cora", "semi-rw", data_root)
    semi = load_node_data("cora", "semi", data_root)
    assert cora.adjacency == "random-walk" and all(torch.equal(a, b) for a, b in zip(cora.masks([0]), semi.masks([0])))
    dense = cora.adj.to_dense()
    assert torch.allclose(dense.sum(1), torch.ones(cora.num_nodes))
    assert not torch.equal(dense, dense.T)  # unlike the symmetric operators
    kept = remove_self_loops(to_edge_index(semi.adj)[0])[0]
    index, weight = slot_adjacency(kept, cora.num_nodes, [0.0], [torch.Generator()], "random-walk")
    assert torch.allclose(torch.sparse_coo_tensor(index.as_tensor(), weight, dense.shape).to_dense(), dense)
    index, weight = slot_adjacency(kept, cora.num_nodes, [0.6], [torch.Generator().manual_seed(1)], "random-walk")
    rows = torch.zeros(cora.num_nodes).index_add_(0, index[0], weight)
    assert torch.allclose(rows, torch.ones(cora.num_nodes))  # each kept graph renormalised
    base = dict(dataset="cora", setting="semi-rw", ortho=False, depth=2, hidden=8, epochs=3, patience=3, seeds=(0,))
    root = str(data_root.path)
    (result,) = run_configs([TrainConfig(backbone="jknet", drop_edge=0.6, **base)], torch.device("cpu"), root)
    assert result.status == "completed"
    with pytest.raises(ConfigError, match="random-walk adjacency"):
        run_configs([TrainConfig(backbone="gat", **base)], torch.device("cpu"), root)
    # the structure-agnostic reference never reads an edge: it trains on any operator's setting
    (reference,) = run_configs([TrainConfig(backbone="mlp", **base)], torch.device("cpu"), root)
    assert reference.status == "completed"
