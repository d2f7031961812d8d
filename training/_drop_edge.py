"""DropEdge (Rong et al., ICLR 2020): each training epoch a run trains on its graph with a
share ``drop_edge`` of its edges removed at random; evaluation reads the whole graph.

As the authors' sampler: every epoch keeps a random ``int(E * (1 - drop_edge))`` of the ``E``
directed edges (self-loops excluded; the graph's symmetrised edges, each direction drawn on its
own), and the kept graph is normalised afresh, ``D^-1/2 (A + I) D^-1/2`` with ``D`` its row
sums (the authors' ``AugNormAdj``; at rate 0 the whole graph's ``A_hat``), or the setting's
own operator: ``I + D^-1/2 A D^-1/2`` (their ``FirstOrderGCN``) or ``D^-1 (A + I)`` (their
``AugRWalk``), as their scripts pass. PyG's convolutions (one model per run) normalise the
kept edges themselves.

Which edges an epoch keeps comes from the run's own stream (:func:`edge_stream`: its seed and
split, nothing else), so a run keeps the same edges alone, in any pack and beside any other
run; a packed model gets one adjacency per slot, on a block diagonal (:func:`slot_adjacency`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor
from torch_geometric import EdgeIndex

from orthotune.training._loop import Run
from orthotune.training._node_data import operator_weights

#: This stream's tag among a run's random streams (weights and dropout draw from others).
DROP_EDGE_STREAM = 0x44524F50


def edge_stream(run: Run) -> torch.Generator:
    """The run's own stream of dropped edges, from its seed and split alone."""
    state = np.random.SeedSequence([run.seed, run.split, DROP_EDGE_STREAM]).generate_state(1, dtype=np.uint64)
    return torch.Generator().manual_seed(int(state[0]) >> 1)


def kept_edges(edge_index: Tensor, rate: float, generator: torch.Generator) -> Tensor:
    """One epoch's edges (``[2, E']``, in the graph's order): a random ``int(E * (1 - rate))``
    of ``edge_index``'s ``E``, drawn from ``generator`` (on the host: the same draws on any device)."""
    edges = edge_index.shape[1]
    keep = torch.randperm(edges, generator=generator)[: int(edges * (1 - rate))]
    return edge_index[:, keep.sort().values.to(edge_index.device)]


def slot_adjacency(edge_index: Tensor, num_nodes: int, rates: Sequence[float],
                   generators: Sequence[torch.Generator], adjacency: str = "augmented") -> tuple[EdgeIndex, Tensor]:
    """One epoch's ``A_hat`` of each slot (its kept edges, renormalised as the setting's
    ``adjacency``: :func:`~orthotune.training._node_data.operator_weights`) on the diagonal of one
    ``slots * N`` square adjacency, row-sorted, with its edge weights: what a packed model's
    propagation multiplies all slots' states by at once."""
    pairs, weights = [], []
    for slot, (rate, generator) in enumerate(zip(rates, generators)):
        kept = kept_edges(edge_index, rate, generator) if rate > 0 else edge_index
        index, weight = operator_weights(kept, num_nodes, adjacency)
        order = torch.argsort(index[0] * num_nodes + index[1])
        pairs.append(index[:, order] + slot * num_nodes)
        weights.append(weight[order])
    size = len(rates) * num_nodes
    return EdgeIndex(torch.cat(pairs, dim=1), sparse_size=(size, size), sort_order="row"), torch.cat(weights)
