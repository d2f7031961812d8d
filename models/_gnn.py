"""The base of orthotune's packed node backbones (GCN, JKNet, GCNII, IncepGCN: ``models._backbones``).

Every model is one family behind :class:`OrthoGNN`, as in PyG's ``basic_gnn``: ``depth`` graph convolutions (PyG's
``num_layers``), of which the ``layout`` makes the input and output layers linear maps or graph convolutions; the
hidden ones each have a ``hidden x hidden`` transformation ``W(l)`` (orthogonalised in the Ortho-GConv form, built by
:meth:`OrthoGNN.init_conv`). Propagation multiplies by ``A_hat``, computed once by the data module, as a cached CSR
pair (:mod:`models._packing`) whose backward reuses the transpose's layout.

All models carry a leading *pack* dimension: ``packs`` independent models (own seeds, settings, dropout masks,
BatchNorm statistics) trained as one, the pack first in every parameter and buffer. States are pack-major,
``[packs, N, d]``: each pack's transformation is one matrix of a batched matmul; propagation multiplies all
packs at once by a block-diagonal ``A_hat`` (narrow states: ``A_hat`` by node-major ``[N, packs * d]``). Sparse
features come as :class:`~models._sparse.SparseFeatures` (one block-diagonal product for all packs; dropout
masks the non-zeros). An epoch issues the same kernels whatever the pack size.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, NamedTuple

import torch
from torch import Tensor, nn
from torch_geometric import EdgeIndex
from torch_geometric.nn.conv import SimpleConv
from torch_geometric.typing import Adj, OptTensor

from orthotune.core import BackboneInfo, OrthoSettings, TrainConfig, check
from orthotune.models._dropout import Stream, dropout, dropout_streams, stream_device
from orthotune.models._layers import PackedLinear, effective_weights, init_biases_, regularisation, share_targets
from orthotune.models._packing import BlockAdjacency, PackedBatchNorm, block_adjacency, node_major, propagate
from orthotune.models._rules import check_rules
from orthotune.models._sparse import SparseFeatures


class Pass(NamedTuple):
    """One forward pass with what training and the steadiness metrics need; node-major views of pack-major states."""

    logits: Tensor  # [N, packs, out]
    first: Tensor  # h(0): the input layer's output, input of the first hidden convolution, [N, packs, hidden]
    last: Tensor  # h(L): output of the last hidden convolution (h(0) without any), [N, packs, hidden]
    weights: list[Tensor]  # effective W(l) of each hidden convolution, [packs, hidden, hidden]
    penalty: Tensor  # per pack: lambda * sum_l ||W(l) W(l)^T - target(l)||_F


class Layout(NamedTuple):
    """Which end layers are graph convolutions (``A_hat H W``), not linear maps; the others are hidden ones."""

    graph_input: bool
    graph_output: bool


class OrthoGNN(nn.Module):
    """Base class of the node backbones, as PyG's ``BasicGNN``: construction goes through hooks that each
    layout and switch fill in (:meth:`init_input`, :meth:`init_conv`, :meth:`init_output`, :meth:`init_extra`,
    ...), and subclasses define :meth:`convolve` (one hidden layer) and may widen what the head reads
    (:meth:`readout_channels`, :meth:`readout`).

    ``depth`` counts every graph convolution, i.e. the propagations by ``A_hat`` of one forward pass, as PyG's
    ``num_layers``. ``layout`` (:attr:`layouts`) decides which of them are the input and output layers; the
    rest, ``hidden_layers`` of them, are hidden convolutions, each with its own ``hidden x hidden``
    transformation ``W(l)`` (the ones Ortho-GConv orthogonalises and the steadiness metrics report):

    - ``linear``: input and output are linear projections, so all ``depth`` convolutions are hidden ones
      (``depth`` square weights, four weight layers at depth 2).
    - ``standard``: the backbone's own paper. GCN as Kipf & Welling (PyG's ``GCN``): the input and output
      layers are graph convolutions, ``A_hat X W_in`` and ``A_hat H W_out``, so depth 2 is the 2-layer GCN,
      with no square weight, and depth ``L`` has ``L - 2``. JKNet as Xu et al. (PyG's ``GCN(jk=...)``): the first graph
      convolution is the input layer, ``L - 1`` hidden ones follow, jumping knowledge
      aggregates the ``L`` outputs and a linear head classifies.
    - ``official``: the Ortho-GConv authors' code: GCN and JKNet with graph-convolution
      input and output layers, so their ``--layer L`` (JKNet: ``--nbaseblocklayer L``) is
      ``depth = L + 2``; for GCN the same model as ``standard``.

    GCNII (Chen et al.) has linear input and output layers in its paper and in the authors'
    code, so every layout builds the same GCNII: ``depth`` GCNII convolutions, the authors'
    ``--layer``.

    Other switches: ``conv_bias`` adds a bias after each hidden propagation (as PyG's
    ``GCNConv``); ``io_bias=False`` drops the input and output layers' biases (Kipf &
    Welling's GCN and the authors' JKNet have none); ``input_dropout`` is the dropout on the
    raw input features (None: ``dropout``; the authors' JKNet never drops them);
    ``batch_norm`` normalises each convolution's output before its activation, per pack
    slot (the hidden ones and a graph-convolution input layer);
    ``feature_transform=False`` drops every ``W(l)`` (propagation only, the paper's Figure
    1d), which leaves nothing to orthogonalise; ``init`` is how plain weights and biases start
    (``TrainConfig.init``: Glorot and zeros, or uniform in ``+-1/sqrt(fan-out)``); with ``sparse_input`` (the
    input arrives as ``SparseFeatures``) the input layers hold their weights ``in_major``.
    """

    #: Per layout: which end layers are graph convolutions (subclasses override entries).
    layouts: dict[str, Layout] = {
        "linear": Layout(False, False),
        "standard": Layout(True, True),
        "official": Layout(True, True),
    }
    #: The backbone's declaration (``core.BackboneInfo``): its name and what it can do, which
    #: the base reads (its ``conv_bias`` kind, say) instead of the backbone's name.
    info: ClassVar[BackboneInfo]
    #: The axis of the input projection that the authors' one-off orthogonalisation
    #: (``input_T``) centres along: their GCN and JKNet input weights are ``[in, out]``.
    input_rows: str = "in"

    def __init__(
        self,
        in_channels: int,
        hidden_channels: int,
        out_channels: int,
        depth: int,
        dropout: float = 0.5,
        ortho: Sequence[OrthoSettings] | None = None,
        seeds: Sequence[int] = (0,),
        *,
        layout: str = "linear",
        conv_bias: bool = True,
        batch_norm: bool = False,
        feature_transform: bool = True,
        input_dropout: float | None = None,
        io_bias: bool = True,
        init: str = "glorot",
        sparse_input: bool = False,
    ) -> None:
        super().__init__()
        check_rules(depth=depth, dropout=dropout, input_dropout=input_dropout, hidden=hidden_channels,
                    layout=layout)
        check(feature_transform or ortho is None,
              "feature_transform=False leaves no transformation to orthogonalise; use the original arm")
        self.depth, self.dropout, self.seeds = depth, dropout, tuple(seeds)
        self.input_dropout = dropout if input_dropout is None else input_dropout
        self.packs = len(self.seeds)
        self.in_channels, self.hidden_channels, self.out_channels = in_channels, hidden_channels, out_channels
        self.layout, self.feature_transform, self.io_bias = layout, feature_transform, io_bias
        self.sparse_input = sparse_input  # the input layers' weights in the sparse product's layout
        self.graph_input, self.graph_output = self.layouts[layout]
        self.hidden_layers = self.hidden_layers_of(depth, layout)
        self.ortho = tuple(ortho) if ortho is not None else None
        self.register_buffer(  # a setting, not state (see PackedLinear's steps)
            "lam", torch.tensor([s.lam for s in self.ortho] if self.ortho else [0.0] * self.packs), persistent=False
        )
        self.input = self.init_input()
        count = self.hidden_layers if feature_transform else 0
        self.transforms = nn.ModuleList(self.init_conv(hidden_channels, hidden_channels) for _ in range(count))
        self.conv_biases = self.init_conv_biases(conv_bias and self.info.conv_bias == "switch")
        self.norms = self.init_norms(batch_norm)
        self.input_loop = self.output_loop = None  # graph-convolution ends' self-loop weights (init_extra)
        self.init_extra()
        self.output = self.init_output()
        self.input_bias, self.output_bias = self.init_graph_biases()
        share_targets(self.ortho_layers())
        self.propagation = SimpleConv(aggr="sum")
        self._blocks: dict[int, tuple[EdgeIndex, OptTensor, BlockAdjacency]] = {}  # by copies
        self._streams: list[Stream] | None = None  # per slot, made on first use
        self.init = init  # on every transformation, a subclass's own included, before they are drawn
        self.apply(lambda layer: setattr(layer, "init", init) if isinstance(layer, PackedLinear) else None)
        self.reset_parameters()

    # --- what a layout makes of a depth -------------------------------------------------

    @classmethod
    def hidden_layers_of(cls, depth: int, layout: str) -> int:
        """How many of ``depth`` graph convolutions are hidden ``hidden x hidden`` ones."""
        ends = cls.layouts[layout]
        return depth - int(ends.graph_input) - int(ends.graph_output)

    @classmethod
    def readout_channels(cls, hidden: int, hidden_layers: int, **switches: object) -> int:
        """Width of what the head reads (the last hidden state; JKNet's aggregate)."""
        return hidden

    # --- construction hooks -------------------------------------------------------------

    def init_input(self) -> PackedLinear:
        """The input layer's ``W_in`` (``in -> hidden``): a linear map, or the transformation
        of a graph convolution whose bias comes after propagation (:meth:`init_graph_biases`).
        With ``input_T`` the authors' one-off orthogonalisation applies (along
        :attr:`input_rows`)."""
        return PackedLinear(self.in_channels, self.hidden_channels, self.packs,
                            bias=self.io_bias and not self.graph_input, init_ortho=self.ortho,
                            init_ortho_rows=self.input_rows, in_major=self.sparse_input)

    def init_conv(self, in_channels: int, out_channels: int) -> PackedLinear:
        """One hidden convolution's transformation ``W(l)`` (Ortho-GConv when ``ortho``);
        its bias, if any, is added after propagation (:attr:`conv_biases`)."""
        return PackedLinear(in_channels, out_channels, self.packs, bias=False, ortho=self.ortho)

    @classmethod
    def config_arguments(cls, config: TrainConfig) -> dict[str, Any]:
        """This backbone's own constructor arguments from ``config``, beyond those every packed
        backbone takes (``models.build_node_model`` passes both): subclasses add theirs, so a
        backbone's arguments live with it. The base's: ``conv_bias`` where the declaration says
        it switches a bias."""
        return {"conv_bias": config.conv_bias} if cls.info.conv_bias == "switch" else {}

    def init_conv_biases(self, enabled: bool) -> nn.ParameterList:
        """One bias per hidden convolution, added after its propagation (PyG's ``GCNConv``)."""
        return nn.ParameterList(nn.Parameter(torch.zeros(self.packs, self.hidden_channels))
                                for _ in range(self.hidden_layers if enabled else 0))

    def init_norms(self, enabled: bool) -> nn.ModuleList:
        """BatchNorm per hidden convolution, then one for a graph-convolution input layer."""
        count = self.hidden_layers + int(self.graph_input) if enabled else 0
        return nn.ModuleList(PackedBatchNorm(self.packs, self.hidden_channels) for _ in range(count))

    def init_extra(self) -> None:
        """Subclasses add their own modules here (before the output layer is sized)."""

    def init_output(self) -> PackedLinear:
        """The output layer's ``W_out`` (what the head reads ``-> out``)."""
        return PackedLinear(self.head_channels(), self.out_channels, self.packs,
                            bias=self.io_bias and not self.graph_output)

    def init_graph_biases(self) -> tuple[nn.Parameter | None, nn.Parameter | None]:
        """The biases of graph-convolution input and output layers, added after their propagation
        (named ``input_*``/``output_*``: the trainer's weight decay groups find them by name)."""
        def bias(graph: bool, channels: int) -> nn.Parameter | None:
            return nn.Parameter(torch.zeros(self.packs, channels)) if graph and self.io_bias else None

        return bias(self.graph_input, self.hidden_channels), bias(self.graph_output, self.out_channels)

    def head_channels(self) -> int:
        return self.readout_channels(self.hidden_channels, self.hidden_layers)

    def ortho_layers(self) -> list[PackedLinear]:
        """Every transformation whose Newton iteration runs in each forward pass (batched
        into one iteration by :func:`effective_weights`)."""
        return list(self.transforms)

    @property
    def propagations(self) -> int:
        """How many times one forward pass multiplies by ``A_hat``: ``depth``."""
        return self.hidden_layers + int(self.graph_input) + int(self.graph_output)

    def reset_parameters(self) -> None:
        """Re-initialise every pack from its own seed (so a pack equals a lone model)."""
        generators = [torch.Generator().manual_seed(seed) for seed in self.seeds]
        self.input.reset_parameters(generators)
        for transform in self.transforms:
            transform.reset_parameters(generators)
        self.output.reset_parameters(generators)
        self.reset_extra(generators)
        for bias in (*self.conv_biases, self.input_bias, self.output_bias):
            if bias is not None:
                init_biases_(bias, self.init, generators)
        for norm in self.norms:
            norm.reset_parameters()

    def reset_extra(self, generators: Sequence[torch.Generator]) -> None:
        """Re-initialise what :meth:`init_extra` added, from the packs' generators."""

    def input_parameters(self) -> list[nn.Parameter]:
        """The input layer's parameters (weight decay ``weight_decay_io``)."""
        return [p for name, p in self.named_parameters() if name.startswith("input")]

    def output_parameters(self) -> list[nn.Parameter]:
        """The output layer's parameters (``weight_decay_output``, else ``weight_decay_io``)."""
        return [p for name, p in self.named_parameters() if name.startswith("output")]

    def io_parameters(self) -> list[nn.Parameter]:
        """The input and output layers' parameters; the rest is the hidden convolutions' (``weight_decay``)."""
        return [*self.input_parameters(), *self.output_parameters()]

    # --- forward ---------------------------------------------------------------------------

    def streams(self, device: torch.device) -> list[Stream]:
        """Each slot's dropout stream (:func:`~models._dropout.dropout_streams`), made on
        ``device`` at the first draw; a compaction carries them over (:meth:`take_streams`)."""
        here = stream_device(self._streams[0]) if self._streams else None
        if here is None or here.type != device.type or device.index not in (None, here.index):
            self._streams = dropout_streams(self.seeds, device)
        return self._streams

    def take_streams(self, other: OrthoGNN, slots: Sequence[int]) -> None:
        """The dropout streams of ``other``'s ``slots`` (a compaction), as they stand."""
        self._streams = None if other._streams is None else [other._streams[s] for s in slots]

    def drop(self, x: Tensor, p: float) -> Tensor:
        """Dropout of ``[packs, ...]`` states (or one slot's 2-D input), each slot from its own stream."""
        return dropout(x, p, True, self.streams(x.device)) if self.training and p > 0.0 else x

    def dropped_input(self, x: Tensor | SparseFeatures) -> tuple[Tensor | SparseFeatures, Tensor | None]:
        """Input dropout: dense features, or sparse ones and each pack's kept values ``[packs, nnz]``;
        each pack draws its mask from its own stream, as it would trained alone."""
        if isinstance(x, SparseFeatures):
            return x, self.drop(x.values.expand(self.packs, -1), self.input_dropout)
        if self.training and self.input_dropout > 0 and self.packs > 1:
            x = x.unsqueeze(0).expand(self.packs, -1, -1)
        return self.drop(x, self.input_dropout), None

    @staticmethod
    def project(layer: PackedLinear, x: Tensor | SparseFeatures, values: Tensor | None) -> Tensor:
        return layer(x) if values is None else layer.sparse(x, values)  # of dropped_input's (x, values)

    def embed(self, x: Tensor | SparseFeatures) -> Tensor:  # input dropout and projection, [packs, N, hidden]
        return self.project(self.input, *self.dropped_input(x))

    def first_layer(self, x: Tensor | SparseFeatures, edge_index: Adj, edge_weight: OptTensor) -> Tensor:
        """``h(0)``: the activated input layer (a graph convolution where the layout says)."""
        dropped = self.dropped_input(x)
        h = self.project(self.input, *dropped)
        if self.graph_input:
            h = self.propagate(h, edge_index, edge_weight)
            if self.input_loop is not None:
                h = h + self.project(self.input_loop, *dropped)
            if self.input_bias is not None:
                h = h + self.input_bias.unsqueeze(1)
            if self.norms:
                h = self.norms[-1](h)
        return torch.relu_(h)  # h is this pass's own: in place (autograd checks no op saved it)

    def head(self, h: Tensor, edge_index: Adj, edge_weight: OptTensor) -> Tensor:
        """Logits ``[packs, N, out]`` from the dropped-out readout ``h``."""
        logits = self.output(h)
        if self.graph_output:
            logits = self.propagate(logits, edge_index, edge_weight)
            if self.output_loop is not None:
                logits = logits + self.output_loop(h)
            if self.output_bias is not None:
                logits = logits + self.output_bias.unsqueeze(1)
        return logits

    def propagate(self, h: Tensor, edge_index: Adj, edge_weight: OptTensor) -> Tensor:
        """``A_hat h`` for ``[packs, N, d]`` states, one sparse product for all packs (DropEdge
        hands a ``packs * N`` square ``edge_index``, each slot's own ``A_hat``: one block)."""
        own = isinstance(edge_index, EdgeIndex) and edge_index.sparse_size(0) != h.shape[1]  # DropEdge's
        if own or isinstance(edge_index, EdgeIndex) and not node_major(h):
            return propagate(self._block_adjacency(edge_index, edge_weight, 1 if own else self.packs), h)
        wide = h.transpose(0, 1).reshape(1, h.shape[1], -1)  # node-major [1, N, P*d]
        if isinstance(edge_index, EdgeIndex):  # narrow states: the block product's sums, in its order
            out = propagate(self._block_adjacency(edge_index, edge_weight, 1), wide)
        else:  # SimpleConv (on an EdgeIndex it would scatter edge by edge)
            out = self.propagation(wide[0], edge_index, edge_weight)
        return out.view(h.shape[1], self.packs, -1).transpose(0, 1).contiguous()

    def _block_adjacency(self, edge_index: EdgeIndex, edge_weight: OptTensor, copies: int) -> BlockAdjacency:
        """``A_hat`` ``copies`` times on the diagonal, kept while the same adjacency is used."""
        cached = self._blocks.get(copies)
        if cached is None or cached[0] is not edge_index or cached[1] is not edge_weight:
            self._blocks[copies] = cached = (edge_index, edge_weight, block_adjacency(edge_index, edge_weight, copies))
        return cached[2]

    def transform(self, layer: int, h: Tensor, weight: Tensor | None) -> Tensor:
        """``h W(l)`` (``h`` itself without feature transformations)."""
        return h if weight is None else self.transforms[layer].apply_weight(h, weight)

    def finish_conv(self, layer: int, z: Tensor) -> Tensor:
        """Bias, BatchNorm and ReLU after hidden convolution ``layer``'s propagation."""
        if self.conv_biases:  # z is the convolution's own: bias and ReLU in place, no new state
            z = z + self.conv_biases[layer].unsqueeze(1)
        if self.norms:
            z = self.norms[layer](z)
        return torch.relu_(z)

    def convolve(
        self, layer: int, h: Tensor, h0: Tensor, weights: Sequence[Tensor | None], edge_index: Adj,
        edge_weight: OptTensor,
    ) -> Tensor:
        """Hidden convolution ``layer`` (0-based) of ``h``; ``weights`` are all layers'
        effective weights from :meth:`effective_weights`."""
        raise NotImplementedError

    def readout(self, states: list[Tensor]) -> Tensor:
        """What the head sees from ``[h(0), ..., h(L)]``."""
        return states[-1]

    def effective_weights(self) -> list[Tensor | None]:
        """One effective weight per transformation of :meth:`ortho_layers` (None for every
        hidden layer without feature transformations), Newton iterations batched."""
        layers = self.ortho_layers()
        return effective_weights(layers) if layers else [None] * self.hidden_layers

    def run(
        self, x: Tensor | SparseFeatures, edge_index: Adj, edge_weight: OptTensor = None,
        weights: Sequence[Tensor | None] | None = None, penalty: bool = True,
    ) -> Pass:
        """One forward pass. ``weights``: :meth:`effective_weights` of the current
        parameters, computed beforehand (a trainer computes them once for an evaluation and
        the next training step); ``penalty=False`` skips the regulariser (an evaluation
        never reads it; the pass's penalty is then zero)."""
        weights = self.effective_weights() if weights is None else list(weights)
        h = self.first_layer(x, edge_index, edge_weight)
        states = [h]
        for layer in range(self.hidden_layers):
            h = self.convolve(layer, h, states[0], weights, edge_index, edge_weight)
            states.append(h)
        head = self.drop(self.readout(states), self.dropout)
        logits = self.head(head, edge_index, edge_weight)
        layers = self.ortho_layers()
        total = regularisation(layers, weights) if layers and penalty else self.lam.new_zeros(self.packs)
        hidden = [w for w in weights[: self.hidden_layers] if w is not None]
        return Pass(logits.transpose(0, 1), states[0].transpose(0, 1), h.transpose(0, 1), hidden,
                    self.lam * total)

    def forward(self, x: Tensor | SparseFeatures, edge_index: Adj, edge_weight: OptTensor = None) -> Tensor:
        return self.run(x, edge_index, edge_weight).logits

    def __repr__(self) -> str:
        form = "ortho" if self.ortho else "original"
        return (f"{type(self).__name__}({self.in_channels}, {self.out_channels}, hidden={self.hidden_channels}, "
                f"depth={self.depth}, layout={self.layout}, hidden_layers={self.hidden_layers}, "
                f"propagations={self.propagations}, packs={self.packs}, {form})")
