"""DropEdge (config ``drop_edge``, issue 50): each training epoch drops a share of the edges from
the run's own stream, renormalises, and evaluates on the whole graph; a run drops the same edges
alone or packed, on a packed backbone and on one model per run."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from torch_geometric.utils import remove_self_loops, to_edge_index

from orthotune.core import ConfigError, TrainConfig
from orthotune.training import run_configs
from orthotune.training._drop_edge import edge_stream, kept_edges, slot_adjacency
from orthotune.training._loop import Run


def config(**values) -> TrainConfig:
    # dropout 0: a pack draws one dropout tensor for all its slots; DropEdge draws per run
    base = dict(dataset="texas", backbone="gcn", ortho=False, depth=2, hidden=8, dropout=0.0, epochs=6, patience=6,
                splits=(0,), seeds=(0,))
    return TrainConfig(**{**base, **values})


def outcome(result) -> list[tuple]:
    return [(r.status, round(r.val_acc, 6), round(r.test_acc, 6), r.best_epoch, r.epochs, round(r.val_loss, 4))
            for r in result.runs]


def test_the_rate_is_declared_once_and_checked():
    assert config().drop_edge == 0.0
    for bad in (1.0, -0.1, "0.5"):
        with pytest.raises(ConfigError, match="drop_edge="):
            config(drop_edge=bad)
    with pytest.raises(ConfigError, match="drop_edge=0.3 does not apply to mlp"):
        config(backbone="mlp", drop_edge=0.3)


def test_an_epoch_keeps_the_authors_share_drawn_from_the_runs_seed_and_split_alone():
    edges = torch.randint(0, 50, (2, 400))
    run = Run(owner=3, config=config(), split=1, seed=7)
    first = kept_edges(edges, 0.3, edge_stream(run))
    assert first.shape == (2, int(400 * 0.7))
    same = kept_edges(edges, 0.3, edge_stream(dataclasses.replace(run, owner=0)))  # its place in a call: no matter
    assert torch.equal(first, same)
    for other in (dataclasses.replace(run, seed=8), dataclasses.replace(run, split=2)):
        assert not torch.equal(first, kept_edges(edges, 0.3, edge_stream(other)))


def test_at_rate_zero_a_slot_gets_the_whole_graphs_a_hat(cora):
    edges = remove_self_loops(to_edge_index(cora.adj)[0])[0]
    nodes = cora.num_nodes
    blocks, weight = slot_adjacency(edges, nodes, [0.0, 0.5], [torch.Generator(), torch.Generator()])
    assert blocks.sparse_size() == (2 * nodes, 2 * nodes)
    dense = torch.sparse_coo_tensor(blocks.as_tensor(), weight, (2 * nodes, 2 * nodes)).to_dense()
    assert torch.allclose(dense[:nodes, :nodes], cora.adj.to_dense(), atol=1e-6)
    assert dense[nodes:, :nodes].abs().sum() == 0  # nothing crosses slots
    dropped = dense[nodes:, nodes:]
    assert torch.allclose(dropped.diagonal() > 0, torch.ones(nodes, dtype=torch.bool))  # self-loops stay
    assert int((dropped > 0).sum()) == nodes + int(edges.shape[1] * 0.5)


@pytest.mark.slow
@pytest.mark.parametrize("backbone", ["gcn", "gat", "incepgcn"])
def test_a_run_drops_the_same_edges_alone_or_packed_and_dropping_changes_what_it_trains(backbone, data_root):
    extra = {"heads": 2} if backbone == "gat" else {}
    alone = run_configs([config(backbone=backbone, drop_edge=0.4, **extra)], torch.device("cpu"))[0]
    packed = run_configs([config(backbone=backbone, drop_edge=0.4, **extra),
                          config(backbone=backbone, drop_edge=0.1, seeds=(3,), lr=0.05, **extra)],
                         torch.device("cpu"))[0]
    assert outcome(alone) == outcome(packed)
    whole = run_configs([config(backbone=backbone, **extra)], torch.device("cpu"))[0]
    assert alone.status == whole.status == "completed"
    assert outcome(alone) != outcome(whole)
