"""Users' model factories for the tests (``factories_for_tests:NAME`` as a backbone): pytest puts
this folder on ``sys.path``, as a user's own package would be there."""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn import GCNConv


class SmallGCN(nn.Module):
    """features -> hidden (linear), ``depth`` hidden x hidden GCN convolutions, hidden -> classes."""

    def __init__(self, in_size: int, hidden: int, out_size: int, depth: int, dropout: float) -> None:
        super().__init__()
        self.input = nn.Linear(in_size, hidden)
        self.convs = nn.ModuleList(GCNConv(hidden, hidden) for _ in range(depth))
        self.output = nn.Linear(hidden, out_size)
        self.dropout = dropout

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        h = F.relu(self.input(F.dropout(x, self.dropout, self.training)))
        for conv in self.convs:
            h = F.relu(conv(F.dropout(h, self.dropout, self.training), edge_index))
        return self.output(h)


def small_gcn(in_size: int, hidden: int, out_size: int, depth: int, dropout: float) -> nn.Module:
    return SmallGCN(in_size, hidden, out_size, depth, dropout)


def raises(in_size: int, hidden: int, out_size: int, depth: int, dropout: float) -> nn.Module:
    raise RuntimeError("no GPU\nfound")  # two lines: the error must still be one


def wrong_shape(in_size: int, hidden: int, out_size: int, depth: int, dropout: float) -> nn.Module:
    return SmallGCN(in_size, hidden, out_size + 1, depth, dropout)


def not_a_module(in_size: int, hidden: int, out_size: int, depth: int, dropout: float) -> object:
    return "a model"


def no_square_weights(in_size: int, hidden: int, out_size: int, depth: int, dropout: float) -> nn.Module:
    return GCNConv(in_size, out_size)


NOT_CALLABLE = 3
