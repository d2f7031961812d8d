"""Linear transformations for P packed models, with optional Ortho-GConv.

An input layer reads sparse features through :meth:`PackedLinear.sparse` (``models._sparse``:
every slot's own dropped-out copy of ``X`` in one block-diagonal product).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from orthotune.core import OrthoSettings, check
from orthotune.models._ortho import (
    check_packable,
    fan_out_uniform_,
    init_ortho_weight_,
    mix_identity,
    newton_orthogonalise,
    ortho_target,
    orthogonalise_once_,
    orthogonality_penalty,
)
from orthotune.models._sparse import SparseFeatures, _PackedSparseMatmul


def init_biases_(bias: Tensor, init: str, generators: Sequence[torch.Generator | None]) -> None:
    """A ``[packs, channels]`` bias as ``init`` starts it (``TrainConfig.init``): zeros
    (``glorot``), or each slot uniform in ``+-1/sqrt(channels)`` from its own generator."""
    if init != "fan_out":
        nn.init.zeros_(bias)
        return
    for p, generator in enumerate(generators):
        fan_out_uniform_(bias.data[p], bias.shape[-1], generator)


#: On a CPU, a layer with fewer outputs than this takes its weight gradient as ``G^T x``
#: (``[out, N]`` by ``[N, in]``, the weight's own layout) rather than autograd's ``x^T G``, whose
#: few output columns take a slow path of the matrix kernel. One thread, ms, ``x^T G`` / ``G^T x``:
#: ``[24, 2708, 64]`` (Cora) to 7 columns 15.74 / 4.18, to 15 9.56 / 5.89, to 16 6.12 / 5.74;
#: ``[5, 19717, 64]`` (PubMed) to 2-15 columns 10.6-31.2 / 6.0-8.2, to 16 8.05 / 8.20;
#: ``[5, 19717, 576]`` (PubMed JKNet-8's head) to 7 239.9 / 53.0, to 16 54.8 / 68.8.
NARROW_BELOW = 16


class _NarrowOutput(torch.autograd.Function):
    """``x W^T + b`` for ``[packs, N, in]`` inputs, as :meth:`PackedLinear.apply_weight`'s
    ``baddbmm`` (the same forward and input gradient), with the weight gradient as ``G^T x``
    (:data:`NARROW_BELOW`)."""

    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
        ctx.save_for_backward(x, weight)
        ctx.with_bias = bias is not None
        if bias is None:
            return torch.bmm(x, weight.mT)
        return torch.baddbmm(bias.unsqueeze(1), x, weight.mT)

    @staticmethod
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, Tensor | None, Tensor | None]:
        x, weight = ctx.saved_tensors
        grad_x = torch.bmm(grad, weight) if ctx.needs_input_grad[0] else None
        grad_weight = torch.bmm(grad.mT, x) if ctx.needs_input_grad[1] else None
        grad_bias = grad.sum(1) if ctx.with_bias and ctx.needs_input_grad[2] else None
        return grad_x, grad_weight, grad_bias


class PackedLinear(nn.Module):
    """``y = x W_p^T + b_p`` for each of ``packs`` models ``p`` at once.

    With ``ortho`` (one :class:`OrthoSettings` per pack) the layer is an Ortho-GConv
    transformation: ``W_p`` is the orthogonalised form (:meth:`orthogonalise`) of ``Q_p``
    (:meth:`ortho_input`: the hybrid-initialised weight, or ``beta P + (1 - beta) I`` with
    ``hybrid="reparam"``), and :meth:`regularisation` gives ``||W_p W_p^T - target_p||_F``
    per pack. ``c`` holds the target: a scalar per pack (``cI``) or a ``d x d`` matrix per
    pack (``ones``; :func:`share_targets` ties it across a model's layers, as the authors'
    one ``gama``); a buffer when ``target_trainable`` is false.
    With ``init_ortho`` (one :class:`OrthoSettings` per pack) a plain layer is
    orthogonalised once at each initialisation with ``input_T`` steps (the authors' input
    projection), centred along ``init_ortho_rows`` (see :func:`orthogonalise_once_`); it is
    trained freely afterwards.
    With ``in_major`` (an input layer that reads sparse features) the parameter is held as
    ``weight_t``, ``[packs, in, out]``, the layout :meth:`sparse`'s product reads, and
    ``weight`` is its ``[packs, out, in]`` view: no transposed copy of the weight in the
    forward pass, nor of its gradient (into the parameter's layout) in the backward. The
    values and every update are those of the ``[packs, out, in]`` form, elementwise the same.
    Inputs are ``[N, in]`` (shared by all packs) or ``[packs, N, in]``; outputs
    ``[packs, N, out]``. Pack-major states make each pack's transformation one
    contiguous matrix of a batched matmul (``baddbmm``, bias included), with no
    copies to and from a node-major layout in the forward or the backward pass.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        packs: int = 1,
        bias: bool = True,
        ortho: Sequence[OrthoSettings] | None = None,
        init_ortho: Sequence[OrthoSettings] | None = None,
        init_ortho_rows: str = "in",
        in_major: bool = False,
    ) -> None:
        super().__init__()
        self.in_channels, self.out_channels, self.packs = in_channels, out_channels, packs
        self.init_ortho_rows, self.in_major = init_ortho_rows, in_major
        check(not (in_major and ortho is not None), "an Ortho-GConv transformation is held as [packs, out, in]")
        if in_major:
            self.weight_t = nn.Parameter(torch.empty(packs, in_channels, out_channels))
        else:
            self.weight = nn.Parameter(torch.empty(packs, out_channels, in_channels))
        self.bias = nn.Parameter(torch.empty(packs, out_channels)) if bias else None
        self.ortho = tuple(ortho) if ortho is not None else None
        self.init_ortho = tuple(init_ortho) if init_ortho is not None else None
        if self.init_ortho is not None:
            check(len(self.init_ortho) == packs, f"{len(self.init_ortho)} init_ortho settings for {packs} packs")
        if self.ortho is not None:
            check(len(self.ortho) == packs, f"{len(self.ortho)} ortho settings for {packs} packs")
            check(in_channels == out_channels, "Ortho-GConv needs a square transformation")
            check_packable(self.ortho)
            # settings, not state: outside the state dict, so a trainer neither keeps nor
            # copies them (a model built for other runs has its own)
            self.register_buffer("steps", torch.tensor([s.T for s in self.ortho]), persistent=False)
            # float64 so that a double-precision model mixes with the exact beta
            self.register_buffer("betas", torch.tensor([s.beta for s in self.ortho], dtype=torch.float64),
                                 persistent=False)
            target = ortho_target(self.ortho[0], packs, out_channels)
            if self.ortho[0].target_trainable:
                self.c = nn.Parameter(target)
            else:
                self.register_buffer("c", target)
        self.reset_parameters()

    #: How a plain (not Ortho-GConv) weight and the bias start (``TrainConfig.init``); the model
    #: sets it on each of its layers before its first initialisation.
    init = "glorot"

    def __getattr__(self, name: str) -> Tensor | nn.Module:
        if name == "weight" and "weight_t" in self._parameters:  # in_major: the [packs, out, in] view
            return self._parameters["weight_t"].mT
        return super().__getattr__(name)

    def reset_parameters(self, generators: Sequence[torch.Generator | None] | None = None) -> None:
        generators = generators or [None] * self.packs
        for p, generator in enumerate(generators):
            # in_major: drawn into a contiguous [out, in] matrix, so the values are the same
            weight = torch.empty(self.out_channels, self.in_channels) if self.in_major else self.weight.data[p]
            if self.ortho is not None:
                init_ortho_weight_(weight, self.ortho[p], generator)
            elif self.init == "fan_out":  # their [in, out] weight's size(1): our out_channels
                fan_out_uniform_(weight, self.out_channels, generator)
            else:
                nn.init.xavier_uniform_(weight, generator=generator)
            if self.init_ortho is not None:
                settings = self.init_ortho[p]
                orthogonalise_once_(weight, settings.input_T, settings, self.init_ortho_rows)
            if self.in_major:
                self.weight_t.data[p].copy_(weight.T)
        if self.bias is not None:
            init_biases_(self.bias, self.init, generators)
        if self.ortho is not None:
            nn.init.ones_(self.c)

    def effective_weight(self) -> Tensor:
        """The ``[packs, out, in]`` weights the forward pass uses."""
        if self.ortho is None:
            return self.weight
        return self.orthogonalise(self.ortho_input(self.weight))

    def ortho_input(self, weight: Tensor) -> Tensor:
        """``Q`` from ``weight`` (``[..., packs, d, d]``): the weight itself (``init``) or
        ``beta P + (1 - beta) I`` per pack (``reparam``)."""
        if self.ortho[0].hybrid == "reparam":
            return mix_identity(weight, self.betas)
        return weight

    def orthogonalise(self, q: Tensor) -> Tensor:
        """``W`` from ``Q`` (``[..., packs, d, d]``): Newton's iteration, or ``Q`` itself
        with ``transform="none"`` (no bounding either: the paper's ablation)."""
        settings = self.ortho[0]
        if settings.transform == "none":
            return q
        # positional arguments: tests count calls through this module's name
        return newton_orthogonalise(
            q, self.newton_steps(), settings.centre_rows, settings.norm_groups, settings.bound,
            max(s.T for s in self.ortho),  # known on the host: no GPU sync per forward pass
        )

    def newton_steps(self) -> int | Tensor:
        """``T`` per pack; a plain int when all packs share it (no per-matrix freezing)."""
        steps = {s.T for s in self.ortho}
        return steps.pop() if len(steps) == 1 else self.steps

    def forward(self, x: Tensor) -> Tensor:
        return self.apply_weight(x, self.effective_weight())

    def sparse(self, features: SparseFeatures, values: Tensor) -> Tensor:
        """``[packs, N, out]`` for sparse inputs: pack ``p`` sees ``values[p]`` (``[P, nnz]``)."""
        weight = self.weight_t if self.in_major else self.effective_weight().transpose(1, 2).contiguous()
        y = _PackedSparseMatmul.apply(features, values, weight)
        return y if self.bias is None else y + self.bias.unsqueeze(1)

    def apply_weight(self, x: Tensor, weight: Tensor) -> Tensor:
        """``[packs, N, out]`` from ``x`` ``[N, in]`` or ``[packs, N, in]`` and ``weight``
        ``[packs, out, in]``."""
        if x.dim() == 2:  # one input shared by every pack: a single matmul
            flat = weight.reshape(self.packs * self.out_channels, self.in_channels)
            y = (x @ flat.T).view(x.shape[0], self.packs, self.out_channels).transpose(0, 1)
            return (y if self.bias is None else y + self.bias.unsqueeze(1)).contiguous()
        if x.device.type == "cpu" and self.out_channels < NARROW_BELOW and torch.is_grad_enabled():
            return _NarrowOutput.apply(x, weight, self.bias)
        if self.bias is None:
            return torch.bmm(x, weight.mT)
        return torch.baddbmm(self.bias.unsqueeze(1), x, weight.mT)

    def regularisation(self, weight: Tensor | None = None) -> Tensor:
        """Per-pack ``||W W^T - target||_F``, squared with ``squared_norm`` (zeros for a
        non-orthogonal layer)."""
        if self.ortho is None:
            return self.weight.new_zeros(self.packs)
        weight = self.effective_weight() if weight is None else weight
        return orthogonality_penalty(weight, self.c, self.ortho[0].squared_norm)

    def extra_repr(self) -> str:
        return (
            f"{self.in_channels}, {self.out_channels}, packs={self.packs}, "
            f"ortho={self.ortho[0].structure() if self.ortho else None}"
            + (", in_major=True" if self.in_major else "")
        )


def effective_weights(layers: Sequence[PackedLinear]) -> list[Tensor]:
    """Every layer's ``[packs, out, in]`` effective weight.

    The Ortho-GConv layers of one model share their settings, so their Newton iterations
    run as one batch ``[layers, packs, d, d]``: a deep model costs the small-matrix
    kernel calls of one layer (they dominated a Cora epoch at depth 8).
    """
    ortho = [layer for layer in layers if layer.ortho is not None]
    if len(ortho) < 2 or len({(layer.ortho, layer.weight.shape) for layer in ortho}) != 1:
        return [layer.effective_weight() for layer in layers]
    first = ortho[0]
    stacked = first.orthogonalise(first.ortho_input(torch.stack([layer.weight for layer in ortho])))
    batched = iter(stacked.unbind(0))
    return [next(batched) if layer.ortho is not None else layer.weight for layer in layers]


def share_targets(layers: Sequence[PackedLinear]) -> None:
    """Tie the ``ones`` regulariser target of a model's Ortho-GConv layers to one tensor.

    The authors' code keeps one trainable ``d x d`` matrix (``gama``) per model that every
    layer's penalty compares against; a backbone calls this once after building its
    layers. Each pack keeps its own matrix (the target is ``[packs, d, d]``), so packing
    changes nothing. A no-op for the ``cI`` target (one scalar per layer, the paper's).
    """
    ortho = [layer for layer in layers if layer.ortho is not None]
    if not ortho or ortho[0].ortho[0].target != "ones":
        return
    for layer in ortho[1:]:
        check(layer.c.shape == ortho[0].c.shape, "layers sharing a target need one width")
        layer.c = ortho[0].c  # re-registers the same Parameter (or buffer) on each layer


def regularisation(layers: Sequence[PackedLinear], weights: Sequence[Tensor]) -> Tensor:
    """``sum_l ||W(l) W(l)^T - target(l)||_F`` per pack, batched over layers like
    :func:`effective_weights`."""
    ortho = [(layer, w) for layer, w in zip(layers, weights) if layer.ortho is not None]
    if len(ortho) < 2 or len({(layer.ortho, w.shape) for layer, w in ortho}) != 1:
        return sum(layer.regularisation(w) for layer, w in zip(layers, weights))
    penalty = orthogonality_penalty(
        torch.stack([w for _, w in ortho]), torch.stack([layer.c for layer, _ in ortho]),
        ortho[0][0].ortho[0].squared_norm,
    )
    return penalty.sum(0)
