"""Full-batch node classification with one model per run: PyG's GAT, GraphSAGE, GIN and APPNP,
and users' factories (``orthotune.models.build_module_model``).

They are not packed (their parameters have no slot dimension): each run is a :class:`Pack` of
one slot, and the shared loop (:mod:`._loop`) drives every run of the call in lock-step, one
epoch each in turn, as the graph task's trainer does; so selection, patience, failure and
ASHA's stops are those of every other backbone. The Ortho-GConv arm's loss adds
:func:`~orthotune.models.orthogonality_regulariser`, and each step runs inside
``parametrize.cached()`` so that Newton's iteration runs once per weight per pass.
Adam (coupled L2, as the packed trainer) with the model's input and output layers taking
``weight_decay_io`` and ``weight_decay_output``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.utils import parametrize
from torch_geometric.utils import remove_self_loops, to_edge_index

from orthotune.core import PASS_SELECTION, ConfigResult, EpochCallback, TrainConfig
from orthotune.models import (
    NodeModule,
    SparseFeatures,
    build_module_model,
    feature_norms,
    orthogonalised_weights,
    orthogonality_regulariser,
    signal_magnification,
    smoothness,
)
from orthotune.training._base import BaseTrainer, OneRunPack
from orthotune.training._drop_edge import edge_stream, kept_edges
from orthotune.training._loop import Run, Steadiness, Step
from orthotune.training._node_data import SPARSE_CROSSOVER, NodeData, input_features
from orthotune.training._options import DEFAULT_OPTIONS, TrainOptions


class _Graph(BaseTrainer):
    """The trainer of one model per run; what every run of one call shares: dense features (and
    the same as sparse CSR, where they are sparse enough, for the models that read it), the
    graph's edges without self-loops (the symmetrised graph ``A_hat`` was built from), labels."""

    def __init__(self, data: NodeData, device: torch.device, options: TrainOptions = DEFAULT_OPTIONS) -> None:
        super().__init__(device, options)
        self.data = data
        x = data.x.to_dense() if data.x.is_sparse else data.x
        self.x = x.float()
        self.x_norms = feature_norms(self.x)
        self.edge_index = remove_self_loops(to_edge_index(data.adj)[0])[0]
        # sparse only where the crossover is measured: the weight's gradient of a linear layer on
        # sparse CSR input is a dense x sparse product, not yet run on a GPU
        features = input_features(self.x, device) if device.type in SPARSE_CROSSOVER else self.x
        # with the transpose's layout, computed once for every run's input layer (its weight gradient reads it)
        self.features = features if isinstance(features, SparseFeatures) else None
        self.sparse_x = None if self.features is None else self.features.matrix(self.features.values)

    def inputs(self, model: NodeModule) -> Tensor:
        """The features ``model`` reads: sparse CSR where it takes them and they are sparse."""
        if not model.sparse_input or self.features is None:
            return self.x
        model.remember_features(self.features)
        return self.sparse_x

    def packs(self, runs: list[Run]) -> list[_ModulePack]:
        return [_ModulePack(self, run, i) for i, run in enumerate(runs)]


class _ModulePack(OneRunPack):
    """One run as a pack of one slot: its model, optimiser and selected weights."""

    def __init__(self, graph: _Graph, run: Run, index: int) -> None:
        super().__init__(run, index, graph.device)
        config = run.config
        self.graph, self.config = graph, config
        self.model: NodeModule = build_module_model(config, graph.x.shape[1], graph.data.num_classes,
                                                    run.seed).to(graph.device)
        self.optimizer = self.adam(config)
        self.train_mask, self.val_mask, self.test_mask = (m[:, 0].bool() for m in graph.data.masks([run.split]))
        self.best = self.snapshot()
        self.edge_stream = edge_stream(run) if config.drop_edge else None
        self.x = graph.inputs(self.model)

    def training_edges(self) -> Tensor:
        """This epoch's edges: the whole graph's, or DropEdge's kept share (the run's own stream)."""
        if self.edge_stream is None:
            return self.graph.edge_index
        return kept_edges(self.graph.edge_index, self.config.drop_edge, self.edge_stream)

    def train_step(self, active: Tensor, record_grads: bool) -> Step:
        """One training step (per-epoch gradient norms: packed backbones only)."""
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        with parametrize.cached():  # each W computed once for the pass and the regulariser
            logits = self.model(self.x, self.training_edges())
            y = self.graph.data.y
            loss = F.cross_entropy(logits[self.train_mask], y[self.train_mask])
            pass_val_loss = F.cross_entropy(logits[self.val_mask].detach(), y[self.val_mask]).view(1) \
                if self.config.selection == PASS_SELECTION else None
            if self.config.ortho:
                loss = loss + orthogonality_regulariser(self.model)
            weights = list(orthogonalised_weights(self.model).values())
            fault = self.loss_fault(~torch.isfinite(loss).view(1), weights)
            loss.backward()  # a failed run stops at the loop's next sync (every epoch); its result is frozen
        self.optimizer.step()
        return Step(loss.detach().view(1), fault, None, pass_val_loss)

    @torch.no_grad()
    def evaluate(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        self.model.eval()
        with parametrize.cached():
            logits = self.model(self.x, self.graph.edge_index)
            weights = list(orthogonalised_weights(self.model).values())
        y = self.graph.data.y
        fault = self.output_fault(~torch.isfinite(logits).all().view(1), weights)
        correct = (logits.argmax(-1) == y).float()
        val_loss = F.cross_entropy(logits[self.val_mask], y[self.val_mask]).view(1)
        return _share(correct, self.val_mask), val_loss, _share(correct, self.test_mask), fault

    def state(self) -> dict[str, Tensor]:
        """Parameters and buffers by name, not the state dict: PyG's Linear also saves a
        parametrized weight's transformed value there, which a parametrized module refuses to load."""
        return {**dict(self.model.named_parameters()), **dict(self.model.named_buffers())}

    def finish(self, slots: Sequence[int]) -> list[Steadiness]:
        """Steadiness metrics of the selected weights: gradient norms of the Ortho-GConv
        weights (the same layers' raw weights in the original arm); ``M_sig`` and smoothness
        of the output layer's input (NaN for a factory, whose output layer is unknown)."""
        with torch.no_grad():
            for key, value in self.state().items():
                value.copy_(self.best[key])
        self.model.eval()
        captured: list[Tensor] = []
        layer = self.model.output_layer
        hook = layer.register_forward_pre_hook(lambda _, args: captured.append(args[0])) if layer else None
        try:
            with parametrize.cached():
                weights = self._layer_weights()
                logits = self.model(self.x, self.graph.edge_index)
                loss = F.cross_entropy(logits[self.train_mask], self.graph.data.y[self.train_mask])
                grads = torch.autograd.grad(loss, weights, allow_unused=True) if weights else []
                norms = [0.0 if g is None else float(g.norm()) for g in grads]
        finally:
            if hook is not None:
                hook.remove()
        if not captured:
            return [Steadiness(math.nan, math.nan, norms)]
        last = captured[-1].detach().unsqueeze(1)  # [N, 1, d]: one pack slot
        return [Steadiness(float(signal_magnification(self.graph.x_norms, last)[0]),
                           float(smoothness(last)[0]), norms)]

    def _layer_weights(self) -> list[Tensor]:
        ortho = list(orthogonalised_weights(self.model).values())
        if ortho:
            return ortho
        select = self.model.selector()
        return [p for prefix, owner in self.model.named_modules()
                for name, p in owner.named_parameters(recurse=False) if select(prefix, owner, name, p)]


def _share(correct: Tensor, mask: Tensor) -> Tensor:
    return ((correct * mask).sum() / mask.sum().clamp_min(1)).view(1)


def train_modules(
    configs: Sequence[TrainConfig],
    data: NodeData,
    device: torch.device,
    on_epoch: EpochCallback | None = None,
    options: TrainOptions = DEFAULT_OPTIONS,
) -> list[ConfigResult]:
    """Train every run of every config, one model per run, in lock-step (see the module docstring)."""
    # a setting's own operator (first-order, random-walk) is refused for these backbones by TrainConfig
    return _Graph(data, device, options).train(configs, on_epoch)
