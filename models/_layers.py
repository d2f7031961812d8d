"""Linear transformations for P packed models, with optional Ortho-GConv."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from models._ortho import (
    OrthoSettings,
    check_packable,
    hybrid_init_,
    newton_orthogonalise,
    orthogonality_penalty,
)
from orthotune.errors import check


class PackedLinear(nn.Module):
    """``y = x W_p^T + b_p`` for each of ``packs`` models ``p`` at once.

    With ``ortho`` (one :class:`OrthoSettings` per pack) the layer is an Ortho-GConv
    transformation: ``W_p`` is the Newton-orthogonalised form of a hybrid-initialised
    ``Q_p``, and :meth:`regularisation` gives ``||W_p W_p^T - c_p I||_F`` per pack.
    Inputs are ``[N, in]`` (shared by all packs) or ``[N, packs, in]``; outputs
    ``[N, packs, out]``.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        packs: int = 1,
        bias: bool = True,
        ortho: Sequence[OrthoSettings] | None = None,
    ) -> None:
        super().__init__()
        self.in_channels, self.out_channels, self.packs = in_channels, out_channels, packs
        self.weight = nn.Parameter(torch.empty(packs, out_channels, in_channels))
        self.bias = nn.Parameter(torch.empty(packs, out_channels)) if bias else None
        self.ortho = tuple(ortho) if ortho is not None else None
        if self.ortho is not None:
            check(len(self.ortho) == packs, f"{len(self.ortho)} ortho settings for {packs} packs")
            check(in_channels == out_channels, "Ortho-GConv needs a square transformation")
            check_packable(self.ortho)
            self.register_buffer("steps", torch.tensor([s.T for s in self.ortho]))
            self.c = nn.Parameter(torch.ones(packs))
        self.reset_parameters()

    def reset_parameters(self, generators: Sequence[torch.Generator | None] | None = None) -> None:
        generators = generators or [None] * self.packs
        for p, generator in enumerate(generators):
            if self.ortho is not None:
                hybrid_init_(self.weight.data[p], self.ortho[p].beta, generator)
            else:
                nn.init.xavier_uniform_(self.weight.data[p], generator=generator)
        if self.bias is not None:
            nn.init.zeros_(self.bias)
        if self.ortho is not None:
            nn.init.ones_(self.c)

    def effective_weight(self) -> Tensor:
        """The ``[packs, out, in]`` weights the forward pass uses."""
        if self.ortho is None:
            return self.weight
        first = self.ortho[0]
        return newton_orthogonalise(
            self.weight, self.steps, first.centre_rows, first.norm_groups
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.apply_weight(x, self.effective_weight())

    def apply_weight(self, x: Tensor, weight: Tensor) -> Tensor:
        if x.dim() == 2:  # one input shared by every pack: a single matmul
            flat = weight.reshape(self.packs * self.out_channels, self.in_channels)
            y = (x @ flat.T).view(x.shape[0], self.packs, self.out_channels)
        else:
            y = torch.einsum("npi,poi->npo", x, weight)
        return y if self.bias is None else y + self.bias

    def regularisation(self, weight: Tensor | None = None) -> Tensor:
        """Per-pack ``||W W^T - c I||_F`` (zeros for a non-orthogonal layer)."""
        if self.ortho is None:
            return self.weight.new_zeros(self.packs)
        weight = self.effective_weight() if weight is None else weight
        return orthogonality_penalty(weight, self.c, self.ortho[0].squared_norm)

    def extra_repr(self) -> str:
        return (
            f"{self.in_channels}, {self.out_channels}, packs={self.packs}, "
            f"ortho={self.ortho is not None}"
        )
