"""Node backbones that are plain ``nn.Module`` s: PyG's GAT, GraphSAGE, GIN and APPNP, and a
user's own model factory. Their Ortho-GConv arm is :func:`orthogonalise` on their weights.

They are not packed: one model trains one run (``orthotune.training`` trains them one after
another, in lock-step). Every model here is a :class:`NodeModule`: ``forward(x, edge_index)``
returns ``[N, classes]`` logits, ``edge_index`` being the graph without self-loops (each
layer adds its own, as PyG's convolutions do).

What ``depth`` means (as for GCN, it pairs the arms on the same propagations):

- ``gat``, ``sage``, ``gin``: PyG's ``num_layers``, the message-passing layers. ``layout``
  ``linear`` (the default, as orthotune's GCN): a linear input layer (features -> hidden),
  ``depth`` hidden -> hidden PyG convolutions, a linear output layer (hidden -> classes);
  ``standard``: PyG's model as published, its first convolution reads the features and its
  last gives the classes (hidden -> hidden convolutions: ``depth - 2``).
- ``appnp``: the hidden -> hidden layers of its MLP, then ``K`` propagation steps with
  teleport probability ``alpha`` (PyG's ``APPNP``, no weights). ``linear``: the MLP is
  features -> hidden, ``depth`` hidden -> hidden, hidden -> classes; ``standard``: ``depth``
  linear layers in all (the APPNP paper's 2-layer MLP is depth 2).
- a factory: whatever the factory makes of the ``depth`` it is given; ``layout`` is not read.

A user's factory: a backbone named ``package.module:factory`` (checked syntactically by the
config, imported by :func:`user_model` only when a model is built from it, so the module must be
importable where training runs: installed, or on ``PYTHONPATH``, which local Ray workers
inherit). ``factory(in_size, hidden, out_size, depth, dropout)`` returns an ``nn.Module`` whose
``forward(x, edge_index)`` gives ``[nodes, out_size]`` logits; a failing import or call, a
non-module or a wrong shape on a 4-node graph is one ``ConfigError`` line naming it.

What the Ortho-GConv arm orthogonalises: PyG's default rule (:data:`~._parametrize.DEFAULT_RULE`)
for GAT (each hidden convolution's ``lin``), GraphSAGE (``lin_l`` and ``lin_r``) and GIN (the
square layers of each hidden convolution's MLP); for APPNP, whose propagation has no weights,
the square hidden layers of its MLP; for a factory, the default rule on its module. In the
``standard`` layout a depth-2 GAT/SAGE/GIN or APPNP has no square hidden weight, so its Ortho
arm is refused in one line (orthogonalise's).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn.conv import APPNP as APPNPPropagation
from torch_geometric.nn.dense.linear import Linear as PygLinear
from torch_geometric.nn.models import GAT, GIN, MLP, GraphSAGE
from torch_geometric.nn.models.basic_gnn import BasicGNN

from orthotune.core import TASKS, ConfigError, Registry, TrainConfig, check, is_factory, one_line
from orthotune.models._parametrize import Selector, orthogonalise, square_conv_weights
from orthotune.models._sparse import SparseFeatures, SparseInputLinear, csr_dropout, nonzero_dropout
from orthotune.models._treatment import apply_treatment


class NodeModule(nn.Module):
    """A non-packed node model: ``body`` maps (features, edges) to logits; ``output`` is the layer
    whose input is the last hidden state (the steadiness metrics read it; None: unknown).

    ``sparse_input``: the body's first use of the features is a linear layer (``F.linear``
    reads a sparse CSR matrix too), so a trainer may hand it sparse CSR features: bag-of-words
    features (Cora's 1.3% non-zero) then cost a sparse product instead of a dense one. The
    MLP reference, APPNP, DAGNN and PyG's models in the ``linear`` layout declare it; PyG's
    convolutions reading the features (``standard``), SGC and a user's model read dense ones."""

    def __init__(self, body: nn.Module, hidden: int, select: Selector | None = None,
                 inputs: nn.Module | None = None, output: nn.Module | None = None,
                 input_dropout: float = 0.0, sparse_input: bool = False) -> None:
        super().__init__()
        self.body, self.hidden_channels = body, hidden  # the default selector reads hidden_channels
        self.select, self.input_dropout, self.sparse_input = select, input_dropout, sparse_input
        if sparse_input and inputs is not None:
            inputs = _sparse_input_layer(body, inputs)
        self._inputs, self._output = [inputs], [output]  # lists: not registered twice as children

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        if x.layout == torch.sparse_csr:
            check(self.sparse_input, "this model reads dense features, not a sparse CSR matrix")
            return self.body(csr_dropout(x, self.input_dropout, self.training), edge_index)
        return self.body(nonzero_dropout(x, self.input_dropout, self.training), edge_index)

    def remember_features(self, features: SparseFeatures) -> None:
        """Hand the input layer the sparse features it will read, with their transpose's layout
        (see :meth:`~models._sparse.SparseInputLinear.remember`); nothing for dense readers."""
        if isinstance(self._inputs[0], SparseInputLinear):
            self._inputs[0].remember(features)

    @property
    def output_layer(self) -> nn.Module | None:
        return self._output[0]

    def input_parameters(self) -> list[nn.Parameter]:
        """The input layer's parameters (weight decay ``weight_decay_io``)."""
        return list(self._inputs[0].parameters()) if self._inputs[0] is not None else []

    def output_parameters(self) -> list[nn.Parameter]:
        """The output layer's parameters (``weight_decay_output``, else ``weight_decay_io``)."""
        return list(self._output[0].parameters()) if self._output[0] is not None else []

    def selector(self) -> Selector:
        """Which weights the Ortho-GConv arm transforms (see the module docstring)."""
        return self.select or square_conv_weights(self)


def _sparse_input_layer(body: nn.Module, layer: nn.Module) -> nn.Module:
    """``layer`` (the body's first use of the features) replaced in ``body`` by a
    :class:`~models._sparse.SparseInputLinear` holding its parameters; returns the new layer."""
    name = next(name for name, module in body.named_modules() if module is layer)
    replacement = SparseInputLinear(layer)
    body.set_submodule(name, replacement)
    return replacement


class _Linear(nn.Module):
    """``layout: linear``: a linear input layer, the hidden -> hidden GNN, a linear output layer."""

    def __init__(self, gnn: BasicGNN, in_channels: int, hidden: int, out_channels: int, dropout: float,
                 bias: bool) -> None:
        super().__init__()
        self.input = PygLinear(in_channels, hidden, bias=bias)
        self.gnn, self.dropout = gnn, dropout
        self.output = PygLinear(hidden, out_channels, bias=bias)

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        h = F.dropout(F.relu(self.input(x)), self.dropout, self.training)
        # PyG leaves its last layer without activation: it is a hidden layer here
        h = F.dropout(F.relu(self.gnn(h, edge_index)), self.dropout, self.training)
        return self.output(h)


class _Appnp(nn.Module):
    """APPNP (Gasteiger et al., 2019): an MLP, then ``K`` personalised-PageRank propagations."""

    def __init__(self, channels: list[int], dropout: float, K: int, alpha: float, bias: bool) -> None:
        super().__init__()
        self.mlp = MLP(channels, dropout=dropout, norm=None, bias=bias)
        self.propagate = APPNPPropagation(K, alpha)

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        return self.propagate(self.mlp(x), edge_index)


def _gnn_model(gnn_class: type[BasicGNN], config: TrainConfig, features: int, classes: int,
               **kwargs: object) -> NodeModule:
    # TrainConfig refuses the switches these models lack (official layout, no feature transform, ...)
    if config.conv_bias is False:
        kwargs["bias"] = False
    common = dict(dropout=config.dropout, norm="batch_norm" if config.batch_norm else None, **kwargs)
    if config.layout == "linear":
        gnn = gnn_class(config.hidden, config.hidden, config.depth, **common)
        body = _Linear(gnn, features, config.hidden, classes, config.dropout, config.io_bias)
        return NodeModule(body, config.hidden, inputs=body.input, output=body.output,
                          input_dropout=input_dropout_of(config), sparse_input=True)
    gnn = gnn_class(features, config.hidden, config.depth, out_channels=classes, **common)
    return NodeModule(gnn, config.hidden, inputs=gnn.convs[0], output=gnn.convs[-1],
                      input_dropout=input_dropout_of(config))


def _appnp_model(config: TrainConfig, features: int, classes: int) -> NodeModule:
    hidden = [config.hidden] * (config.depth + 1 if config.layout == "linear" else config.depth - 1)
    body = _Appnp([features, *hidden, classes], config.dropout, config.K, config.alpha, config.io_bias)
    width = config.hidden

    def select(module_name: str, owner: nn.Module, name: str, weight: Tensor) -> bool:
        # the square hidden layers of the MLP: the only weights APPNP has besides its input/output
        return (isinstance(owner, PygLinear) and name == "weight" and module_name.startswith("body.mlp.")
                and tuple(weight.shape) == (width, width))

    lins = body.mlp.lins
    return NodeModule(body, config.hidden, select=select, inputs=lins[0], output=lins[-1],
                      input_dropout=input_dropout_of(config), sparse_input=True)


class _FeatureMLP(nn.Module):
    """The node task's structure-agnostic reference: an MLP on the node features alone; the
    edges it is handed are never read (H2GCN's MLP baseline)."""

    def __init__(self, channels: list[int], dropout: float, bias: bool) -> None:
        super().__init__()
        self.mlp = MLP(channels, dropout=dropout, norm=None, bias=bias)

    def forward(self, x: Tensor, edge_index: Tensor) -> Tensor:
        return self.mlp(x)


def _mlp_model(config: TrainConfig, features: int, classes: int) -> NodeModule:
    """``depth`` linear layers in all (depth 2: features -> hidden -> classes); dropout on the
    features (``input_dropout``) and after each hidden layer."""
    body = _FeatureMLP([features, *[config.hidden] * (config.depth - 1), classes], config.dropout, config.io_bias)
    lins = body.mlp.lins
    return NodeModule(body, config.hidden, inputs=lins[0], output=lins[-1], input_dropout=input_dropout_of(config),
                      sparse_input=True)


#: ``(config, features, classes) -> NodeModule`` per catalogue name.
MODULE_BACKBONES: Registry[Callable[[TrainConfig, int, int], NodeModule]] = Registry("module backbone")
MODULE_BACKBONES.add("gat", lambda c, f, k: _gnn_model(GAT, c, f, k, heads=c.heads))
MODULE_BACKBONES.add("sage", lambda c, f, k: _gnn_model(GraphSAGE, c, f, k, aggr=c.aggr))
MODULE_BACKBONES.add("gin", lambda c, f, k: _gnn_model(GIN, c, f, k))
MODULE_BACKBONES.add("appnp", _appnp_model)
MODULE_BACKBONES.add(TASKS.get("node").reference, _mlp_model)


def is_module_backbone(backbone: str) -> bool:
    """Is ``backbone`` trained one run per model (PyG's models, a factory), not packed?"""
    return is_factory(backbone) or backbone in MODULE_BACKBONES


def build_module_model(config: TrainConfig, features: int, classes: int, seed: int) -> NodeModule:
    """The model of one run of ``config``, its Ortho-GConv arm orthogonalised; weights drawn
    from ``seed`` (the global stream is left as it was)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if is_factory(config.backbone):
            model = NodeModule(user_model(config.backbone, features, config.hidden, classes, config.depth,
                                          config.dropout), config.hidden, input_dropout=0.0)
        else:
            model = MODULE_BACKBONES.get(config.backbone)(config, features, classes)
        if config.treatment:  # before Ortho-GConv: what the treatment adds is orthogonalised too
            model = _treated(model, config)
        if config.ortho:
            generator = torch.Generator().manual_seed(seed)
            try:
                orthogonalise(model, config.ortho_settings(), model.selector(), generator=generator)
            except ConfigError as error:  # say which backbone: a factory's name is the user's clue
                raise ConfigError(f"backbone {config.backbone!r} (Ortho-GConv arm): {error}") from None
    return model


def _treated(model: NodeModule, config: TrainConfig) -> NodeModule:
    """``model`` after ``config``'s treatment; a new module around it keeps the model's input,
    output and Ortho-GConv selector (its input dropout is the wrapped model's own)."""
    out = apply_treatment(model, config)
    if isinstance(out, NodeModule):
        out.sparse_input = False  # what a treatment does to the features' path is not known
        return out
    return NodeModule(out, model.hidden_channels, select=model.select, inputs=model._inputs[0],
                      output=model.output_layer)


def user_model(name: str, in_size: int, hidden: int, out_size: int, depth: int, dropout: float) -> nn.Module:
    """``factory(in_size, hidden, out_size, depth, dropout)`` of ``package.module:factory``,
    imported here (only here: when a model is built from it) and checked on a tiny graph:
    ``forward(x, edge_index)`` must give ``[nodes, out_size]`` logits. Every failure is one
    ``ConfigError`` line naming the factory."""
    module_name, attr = name.split(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # any failure of the user's import is theirs to see, in one line
        raise ConfigError(f"backbone {name!r}: cannot import {module_name}: {one_line(error, typed=True)}") from None
    factory = getattr(module, attr, None)
    check(callable(factory), f"backbone {name!r}: {module_name} has no callable {attr!r}")
    try:
        model = factory(in_size, hidden, out_size, depth, dropout)
    except Exception as error:
        raise ConfigError(f"backbone {name!r}: {attr}({in_size}, {hidden}, {out_size}, {depth}, {dropout}) "
                          f"failed: {one_line(error, typed=True)}") from None
    check(isinstance(model, nn.Module), f"backbone {name!r}: {attr} returned {type(model).__name__}, "
                                        f"not a torch.nn.Module")
    _check_shape(name, model, in_size, out_size)
    return model


def _check_shape(name: str, model: nn.Module, in_size: int, out_size: int) -> None:
    """One forward pass on a 4-node path graph (it also initialises lazy parameters)."""
    nodes = 4
    x = torch.randn(nodes, in_size)
    edge_index = torch.tensor([[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]])
    model.eval()
    try:
        with torch.no_grad():
            out = model(x, edge_index)
    except Exception as error:
        raise ConfigError(f"backbone {name!r}: forward(x, edge_index) on {nodes} nodes with {in_size} features "
                          f"failed: {one_line(error, typed=True)}") from None
    shape = tuple(out.shape) if isinstance(out, Tensor) else type(out).__name__
    check(shape == (nodes, out_size),
          f"backbone {name!r}: forward(x, edge_index) returned {shape} on {nodes} nodes, "
          f"not ({nodes}, {out_size}) logits")
    model.train()


def input_dropout_of(config: TrainConfig) -> float:
    """The dropout on a module's input features: ``input_dropout``, else ``dropout``."""
    return config.dropout if config.input_dropout is None else config.input_dropout

