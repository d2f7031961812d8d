"""Graph-classification backbones: Graph U-Nets (Gao & Ji 2019) in original and Ortho-GConv form.

One family behind :class:`OrthoGraphNet`, as in PyG's ``basic_gnn``: a start GCN from the
input features to ``hidden`` channels, a node encoder (the subclass), a readout of several
node states per graph (max, sum and mean, concatenated) and an MLP classifier.

:class:`GraphUNet` follows the Graph U-Nets protocol: ``depth`` *levels*, each a GCN
followed by gPool (PyG's ``TopKPooling`` with a sigmoid gate, keeping ``ceil(ratio * n)``
nodes of every graph on the graph's second power, the paper's connectivity augmentation),
a bottom GCN, then per level gUnpool (the pooled states scattered back to their nodes,
zeros elsewhere), a GCN and a skip connection to the matching down level. Every GCN after
the start one has a ``hidden x hidden`` transformation: those ``2 * depth + 1``
transformations are the ones Ortho-GConv orthogonalises, through :class:`PackedLinear`
and therefore the one orthogonalisation module (``models._ortho``).

The node trainer's pack dimension is kept with a single pack (``[N, 1, hidden]`` states in
:class:`GraphPass`) so the steadiness metrics of ``models._metrics`` apply unchanged;
pooling selects different nodes per model, so several models cannot share one batch.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn import MLP, TopKPooling, global_add_pool, global_max_pool, global_mean_pool
from torch_geometric.nn.conv import SimpleConv
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.utils import add_self_loops, remove_self_loops, to_torch_coo_tensor, to_torch_csr_tensor

from orthotune.core import OrthoSettings, Registry, check
from orthotune.models._layers import PackedLinear
from orthotune.models._rules import check_rules

#: Graph U-Nets' pooling ratios for its three levels; deeper nets repeat the last one.
PROTOCOL_RATIOS = (0.9, 0.8, 0.7)
#: Width of the classifier's hidden layer (Graph U-Nets' ``h_dim``).
CLASSIFIER_CHANNELS = 512


class GraphPass(NamedTuple):
    """One forward pass with what training and the steadiness metrics need."""

    logits: Tensor  # [graphs, classes]
    first: Tensor  # h(0): the encoder's input node states, [N, 1, hidden]
    last: Tensor  # h(L): the encoder's output node states (same nodes), [N, 1, hidden]
    weights: list[Tensor]  # effective hidden W(l), each [1, hidden, hidden]
    penalty: Tensor  # [1]: lambda * sum_l ||W(l) W(l)^T - c(l) I||_F


def pool_ratios(depth: int) -> tuple[float, ...]:
    """The protocol's ratios for the first three levels, the last one repeated beyond."""
    return tuple(PROTOCOL_RATIOS[min(level, len(PROTOCOL_RATIOS) - 1)] for level in range(depth))


def augment_adjacency(edge_index: Tensor, num_nodes: int) -> Tensor:
    """The pattern of ``(A + I)^2`` without self-loops: Graph U-Nets' 2-hop augmentation.

    Pooling keeps an induced subgraph; squaring first keeps nodes two hops apart connected
    so that pooling does not shatter the graph.
    """
    edge_index, _ = remove_self_loops(edge_index)
    edge_index, _ = add_self_loops(edge_index, num_nodes=num_nodes)
    ones = torch.ones(edge_index.shape[1], device=edge_index.device)
    # COO, not CSR: torch 2.13's CPU CSR @ CSR leaks about 0.4 MB a call (measured).
    adj = to_torch_coo_tensor(edge_index, ones, size=(num_nodes, num_nodes))
    squared = torch.sparse.mm(adj, adj).coalesce()
    edge_index, _ = remove_self_loops(squared.indices())
    return edge_index


def unpool(h: Tensor, perm: Tensor, num_nodes: int) -> Tensor:
    """gUnpool: put the pooled states back at their nodes ``perm``; the others get zeros."""
    out = h.new_zeros(num_nodes, h.shape[-1])
    return out.index_copy(0, perm, h)


class OrthoGraphNet(nn.Module):
    """Base class: start GCN, an encoder (:meth:`encode`), readout and MLP classifier."""

    def __init__(
        self,
        in_channels: int,
        hidden_channels: int,
        out_channels: int,
        depth: int,
        dropout: float = 0.3,
        ortho: OrthoSettings | None = None,
        seed: int = 0,
        classifier_channels: int = CLASSIFIER_CHANNELS,
    ) -> None:
        super().__init__()
        check_rules(depth=depth, dropout=dropout, hidden=hidden_channels)  # the config fields' rules
        self.in_channels, self.hidden_channels, self.out_channels = in_channels, hidden_channels, out_channels
        self.depth, self.dropout, self.seed, self.ortho = depth, dropout, seed, ortho
        self.register_buffer("lam", torch.tensor([ortho.lam if ortho else 0.0]))
        self.start = PackedLinear(in_channels, hidden_channels)
        self.transforms = nn.ModuleList(
            PackedLinear(hidden_channels, hidden_channels, ortho=[ortho] if ortho else None)
            for _ in range(self.num_transforms())
        )
        self.propagation = SimpleConv(aggr="sum")
        self.build()
        self.classifier = MLP(
            [hidden_channels * 3 * self.num_states(), classifier_channels, out_channels],
            dropout=dropout, act="elu", norm=None,
        )
        self.reset_parameters()

    def num_transforms(self) -> int:
        raise NotImplementedError

    def num_states(self) -> int:
        """How many node states the readout concatenates."""
        raise NotImplementedError

    def build(self) -> None:
        """Create the encoder's own modules (pooling, ...)."""

    def encoder_modules(self) -> list[nn.Module]:
        """The encoder's own modules with parameters, for :meth:`reset_parameters`."""
        return []

    def reset_parameters(self) -> None:
        """Re-initialise everything from ``seed`` alone (global RNG untouched)."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            for module in (self.start, *self.transforms, *self.encoder_modules(), self.classifier):
                module.reset_parameters()

    def gcn(self, h: Tensor, layer: PackedLinear, weight: Tensor, adj: Tensor) -> Tensor:
        """``ELU(A_hat dropout(h) W)`` for ``[N, d]`` states."""
        h = F.dropout(h, self.dropout, self.training)
        h = layer.apply_weight(h, weight).squeeze(0)
        return F.elu(self.propagation(h, adj))

    def encode(
        self, h: Tensor, edge_index: Tensor, adj: Tensor, batch: Tensor, weights: list[Tensor]
    ) -> list[tuple[Tensor, Tensor]]:
        """Node states to read out, each with its batch vector; the last is ``h(L)``.

        ``adj`` is ``normalise(edge_index)``, shared with the start GCN.
        """
        raise NotImplementedError

    def input_parameters(self) -> list[nn.Parameter]:
        """The input layer's parameters: the start GCN (weight decay ``weight_decay_io``)."""
        return list(self.start.parameters())

    def output_parameters(self) -> list[nn.Parameter]:
        """The output layer's parameters: the MLP classifier (``weight_decay_output``, else
        ``weight_decay_io``)."""
        return list(self.classifier.parameters())

    def io_parameters(self) -> list[nn.Parameter]:
        """The input and output layers' parameters; the rest belongs to the convolutions."""
        return [*self.input_parameters(), *self.output_parameters()]

    def run(self, x: Tensor, edge_index: Tensor, batch: Tensor) -> GraphPass:
        weights = [t.effective_weight() for t in self.transforms]
        adj = normalise(edge_index, x.shape[0])
        first = self.gcn(x, self.start, self.start.effective_weight(), adj)
        states = self.encode(first, edge_index, adj, batch, weights)
        num_graphs = int(batch.max()) + 1 if batch.numel() else 0
        pooled = [
            pool(h, b, num_graphs)
            for pool in (global_max_pool, global_add_pool, global_mean_pool)
            for h, b in states
        ]
        head = F.dropout(torch.cat(pooled, dim=-1), self.dropout, self.training)
        penalty = sum(t.regularisation(w) for t, w in zip(self.transforms, weights))
        last = states[-1][0]
        return GraphPass(self.classifier(head), first.unsqueeze(1), last.unsqueeze(1), weights,
                         self.lam * penalty)

    def forward(self, x: Tensor, edge_index: Tensor, batch: Tensor) -> Tensor:
        return self.run(x, edge_index, batch).logits

    def __repr__(self) -> str:
        form = "ortho" if self.ortho else "original"
        return (f"{type(self).__name__}({self.in_channels}, {self.out_channels}, "
                f"hidden={self.hidden_channels}, depth={self.depth}, {form})")


def normalise(edge_index: Tensor, num_nodes: int) -> Tensor:
    """``A_hat`` of one (batched) graph as sparse CSR: GCN's normalisation with self-loops.

    A CSR matrix makes each propagation one sparse-dense product (forward and backward),
    which is several times faster on CPU than gathering and scattering per edge.
    """
    edge_index, edge_weight = gcn_norm(edge_index, None, num_nodes, add_self_loops=True)
    with warnings.catch_warnings():  # torch flags sparse CSR as beta on every construction
        warnings.simplefilter("ignore", UserWarning)
        return to_torch_csr_tensor(edge_index, edge_weight, size=(num_nodes, num_nodes))


class GraphUNet(OrthoGraphNet):
    """Graph U-Nets with ``depth`` gPool/gUnpool levels (the protocol uses 3).

    Transformations, in order: ``depth`` down GCNs, the bottom GCN, ``depth`` up GCNs.
    The readout takes the state after each up level and the final ``h + h(0)``.
    """

    def __init__(self, *args, ratios: Sequence[float] | None = None, **kwargs) -> None:
        depth = kwargs.get("depth", args[3] if len(args) > 3 else None)
        self.ratios = tuple(ratios) if ratios is not None else pool_ratios(depth)
        check(len(self.ratios) == depth, f"ratios={self.ratios} must give one ratio per level ({depth})")
        check(all(0.0 < r <= 1.0 for r in self.ratios), f"ratios={self.ratios} must lie in (0, 1]")
        super().__init__(*args, **kwargs)

    def num_transforms(self) -> int:
        return 2 * self.depth + 1

    def num_states(self) -> int:
        return self.depth + 1

    def build(self) -> None:
        self.pools = nn.ModuleList(
            TopKPooling(self.hidden_channels, ratio, nonlinearity=torch.sigmoid) for ratio in self.ratios
        )

    def encoder_modules(self) -> list[nn.Module]:
        return list(self.pools)

    def encode(self, h, edge_index, adj, batch, weights):
        down, bottom, up = weights[: self.depth], weights[self.depth], weights[self.depth + 1:]
        first, levels, skips = h, [], []
        for level in range(self.depth):
            graph = adj if level == 0 else normalise(edge_index, h.shape[0])
            h = self.gcn(h, self.transforms[level], down[level], graph)
            skips.append(h)
            augmented = augment_adjacency(edge_index, h.shape[0])
            scored = F.dropout(h, self.dropout, self.training)
            # As in Graph U-Nets, the gate scores dropped-out states but scales the clean ones.
            pooled = self.pools[level](h, augmented, None, batch, attn=scored)
            levels.append((graph, batch, h.shape[0], pooled[4]))
            h, edge_index, batch = pooled[0], pooled[1], pooled[3]
        h = self.gcn(h, self.transforms[self.depth], bottom, normalise(edge_index, h.shape[0]))
        states = []
        for step in range(self.depth):
            level = self.depth - 1 - step
            graph, batch, num_nodes, perm = levels[level]
            h = unpool(h, perm, num_nodes)
            h = self.gcn(h, self.transforms[self.depth + 1 + step], up[step], graph) + skips[level]
            states.append((h, batch))
        states.append((h + first, batch))
        return states


class SumOfFeaturesMLP(nn.Module):
    """The graph task's structure-agnostic reference (Errica et al., ICLR 2020, their baseline
    for chemical datasets): each graph's node features summed, then an MLP of ``depth`` linear
    layers (depth 2: features -> hidden -> classes). It never reads an edge. Built with
    :class:`OrthoGraphNet`'s arguments and run as one (:meth:`run`), so the one graph trainer
    trains it; it has no hidden transformation, so no Ortho-GConv arm (the config refuses one)
    and no hidden node states: its steadiness metrics are read on the input features
    (``first`` and ``last`` are both ``x``: M_sig 1, no layer gradients). Their published
    model also passes the logits through a ReLU; this one gives the MLP's logits as they are."""

    def __init__(self, in_channels: int, hidden_channels: int, out_channels: int, depth: int,
                 dropout: float = 0.0, ortho: OrthoSettings | None = None, seed: int = 0) -> None:
        super().__init__()
        check_rules(depth=depth, dropout=dropout, hidden=hidden_channels)
        check(ortho is None, "the sum-of-features MLP is the structure-agnostic reference: it has no Ortho-GConv arm")
        self.seed = seed
        channels = [in_channels, *[hidden_channels] * (depth - 1), out_channels]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.mlp = MLP(channels, dropout=dropout, act="relu", norm=None)

    def input_parameters(self) -> list[nn.Parameter]:
        return list(self.mlp.lins[0].parameters())

    def output_parameters(self) -> list[nn.Parameter]:
        return list(self.mlp.lins[-1].parameters())

    def run(self, x: Tensor, edge_index: Tensor, batch: Tensor) -> GraphPass:
        num_graphs = int(batch.max()) + 1 if batch.numel() else 0
        logits = self.mlp(global_add_pool(x, batch, num_graphs))
        states = x.unsqueeze(1)
        return GraphPass(logits, states, states, [], logits.new_zeros(1))

    def forward(self, x: Tensor, edge_index: Tensor, batch: Tensor) -> Tensor:
        return self.run(x, edge_index, batch).logits


GRAPH_BACKBONES: Registry[type[nn.Module]] = Registry("graph backbone")
GRAPH_BACKBONES.add("gunet", GraphUNet)
GRAPH_BACKBONES.add("sum-mlp", SumOfFeaturesMLP)
