"""Node backbones that decouple propagation from transformation, one model per run
(``core.BackboneInfo``: not packed, no Ortho-GConv arm, one form whatever ``layout`` says):

- ``sgc`` (Wu et al., ICML 2019): PyG's :class:`~torch_geometric.nn.conv.SGConv`, ``depth``
  propagations by ``A_hat`` (its ``K``), then one linear layer; no hidden layer, no
  non-linearity. Its propagated features are computed once (``cached``) where nothing makes
  them change between passes: no input dropout and no DropEdge.
- ``dagnn`` (Liu et al., KDD 2020, "Towards deeper graph neural networks"): a 2-layer MLP
  (features -> hidden -> classes), then ``depth`` propagations by ``A_hat``; the
  ``depth + 1`` states ``A_hat^k Z`` are weighed per node by a learned retention score
  ``sigmoid(A_hat^k Z s)`` and summed (:class:`AdaptiveAggregation`, after the authors'
  PyG ``Prop``).

``depth`` counts the propagations by ``A_hat`` of one forward pass, as for every backbone.
Neither has a square ``hidden x hidden`` weight, so neither has an Ortho-GConv arm.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn
from torch_geometric.nn.conv import MessagePassing, SGConv
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.nn.dense.linear import Linear as PygLinear
from torch_geometric.nn.models import MLP

from orthotune.core import TrainConfig
from orthotune.models._modules import MODULE_BACKBONES, NodeModule, input_dropout_of


class AdaptiveAggregation(MessagePassing):
    """DAGNN's adaptive adjustment: ``sum_k sigmoid(H_k s) H_k`` over ``H_k = A_hat^k Z``,
    ``k = 0 .. K`` (``A_hat``: GCN's normalisation with self-loops)."""

    def __init__(self, channels: int, K: int, bias: bool = True) -> None:
        super().__init__(aggr="add")
        self.K = K
        self.retention = PygLinear(channels, 1, bias=bias)

    def reset_parameters(self) -> None:
        self.retention.reset_parameters()

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        edge_index, weight = gcn_norm(edge_index, None, x.size(0), add_self_loops=True, dtype=x.dtype)
        states = [x]
        for _ in range(self.K):
            states.append(self.propagate(edge_index, x=states[-1], weight=weight))
        stacked = torch.stack(states, dim=1)  # [N, K + 1, classes]
        scores = torch.sigmoid(self.retention(stacked))  # [N, K + 1, 1]
        return (scores * stacked).sum(dim=1)

    def message(self, x_j: Tensor, weight: Tensor) -> Tensor:
        return weight.view(-1, 1) * x_j


class _Dagnn(nn.Module):
    """An MLP (dropout after its hidden layer), then DAGNN's propagation and aggregation."""

    def __init__(self, channels: list[int], dropout: float, K: int, bias: bool) -> None:
        super().__init__()
        self.mlp = MLP(channels, dropout=dropout, norm=None, bias=bias)
        self.aggregate = AdaptiveAggregation(channels[-1], K, bias)

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        return self.aggregate(self.mlp(x), edge_index)


def _dagnn_model(config: TrainConfig, features: int, classes: int) -> NodeModule:
    body = _Dagnn([features, config.hidden, classes], config.dropout, config.depth, config.io_bias)
    lins = body.mlp.lins
    return NodeModule(body, config.hidden, inputs=lins[0], output=lins[-1], input_dropout=input_dropout_of(config),
                      sparse_input=True)


def _sgc_model(config: TrainConfig, features: int, classes: int) -> NodeModule:
    dropout = input_dropout_of(config)
    body = SGConv(features, classes, K=config.depth, cached=dropout == 0 and config.drop_edge == 0,
                  bias=config.io_bias)
    # its one linear layer is its output layer (weight_decay_output, else _io, else weight_decay)
    return NodeModule(body, config.hidden, output=body.lin, input_dropout=dropout)


MODULE_BACKBONES.add("sgc", _sgc_model)
MODULE_BACKBONES.add("dagnn", _dagnn_model)
