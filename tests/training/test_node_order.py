"""A node task's graph in locality order (``TrainOptions.locality_order``): the same graph,
splits and metrics under new node numbers."""

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from orthotune.core import TrainConfig
from orthotune.training import TrainOptions, load_node_data, train_node
from orthotune.training._data import load_dataset
from orthotune.training._node_data import in_locality_order, locality_order, with_random_split

CPU = torch.device("cpu")


def _spread(adj: torch.Tensor) -> float:
    """Mean |i - j| over the stored entries: how far apart a row's columns lie."""
    rows = torch.repeat_interleave(torch.arange(adj.shape[0]), adj.crow_indices().diff())
    return float((rows - adj.col_indices()).abs().float().mean())


def test_the_order_is_a_permutation_that_brings_neighbours_closer(cora):
    order = locality_order(cora.adj)
    assert torch.equal(order.sort().values, torch.arange(cora.num_nodes))
    reordered = cora.reordered(order)
    assert _spread(reordered.adj) < 0.5 * _spread(cora.adj)
    assert torch.equal(order, locality_order(cora.adj))  # deterministic


def test_reordered_is_the_same_graph_under_new_numbers(cora):
    order = locality_order(cora.adj)
    moved = cora.reordered(order)
    assert torch.equal(moved.adj.to_dense(), cora.adj.to_dense()[order][:, order])
    assert torch.equal(moved.x, cora.x[order]) and torch.equal(moved.y, cora.y[order])
    for new, old in zip(moved.masks([0]), cora.masks([0]), strict=True):
        assert torch.equal(moved.in_loaded_order(new), old)
    assert torch.equal(moved.in_loaded_order(moved.x), cora.x)
    crow = moved.adj.crow_indices()
    columns = moved.adj.col_indices()
    assert all(bool((columns[a:b].diff() > 0).all()) for a, b in zip(crow[:-1].tolist(), crow[1:].tolist()))
    twice = moved.reordered(order)  # orders compose: back to the loaded graph through both
    assert torch.equal(twice.in_loaded_order(twice.y), cora.y)


def test_a_random_split_holds_the_same_nodes_in_any_order(data_root, tmp_path):
    raw = load_dataset("cora", "semi", data_root)[0]
    np.savez(tmp_path / "cora.npz", **{key: raw[key].numpy() for key in ("x", "y", "edge_index")})
    dataset = f"file:{tmp_path / 'cora.npz'}"
    data = with_random_split(load_node_data(dataset, "random", data_root), TrainConfig(dataset=dataset))
    moved = data.reordered(locality_order(data.adj))
    for new, old in zip(moved.masks([0, 3]), data.masks([0, 3]), strict=True):
        assert torch.equal(moved.in_loaded_order(new), old)


@pytest.mark.slow
def test_without_dropout_the_order_changes_only_the_last_bits(cora):
    """Nothing random in training: both orders train the same model, its sums in another order."""
    config = TrainConfig(dataset="cora", depth=2, dropout=0.0, lr=0.01, weight_decay=5e-4, epochs=20,
                         patience=20, seeds=(0, 1))
    ordered = train_node(config, cora, CPU)[0].runs
    loaded = train_node(config, cora, CPU, options=TrainOptions(locality_order=False))[0].runs
    for a, b in zip(ordered, loaded, strict=True):
        assert a.best_epoch == b.best_epoch
        assert math.isclose(a.val_loss, b.val_loss, rel_tol=1e-4)
        assert abs(a.test_acc - b.test_acc) <= 2 / 1000 and abs(a.val_acc - b.val_acc) <= 2 / 500
        assert math.isclose(a.smoothness, b.smoothness, rel_tol=1e-3)
        assert math.isclose(a.m_sig, b.m_sig, rel_tol=1e-3)


def test_a_loaded_graph_is_renumbered_once(cora):
    first = in_locality_order(cora)
    again = in_locality_order(replace(cora, setting=cora.setting))  # a config's copy: the same tensors
    assert again.x is first.x and again.adj is first.adj and torch.equal(first.order, locality_order(cora.adj))
    other = replace(cora, y=cora.y.clone())  # another tensor: renumbered anew
    assert in_locality_order(other).y is not first.y and torch.equal(in_locality_order(other).y, first.y)
