"""Full-batch node classification: packs of runs as one batched model each.

Selection, patience, failure and stopping are the shared loop's (:mod:`._loop`); this
module supplies the node task's pack: a model whose every parameter has a leading slot
dimension (nothing is shared between slots; :class:`PackAdam` checks it), trained on the
whole graph each epoch. Packed runs are selected, stopped and failed each on their own,
so packing does not change any run's result.

Packing: configs that share :func:`pack_key` (dataset, setting, backbone, depth, arm,
hidden width, dropout and every structural switch) may share a pack. Each slot keeps
its own seed, split, ``T``, ``beta``, ``lambda``, learning rate, weight decays, epochs,
patience and selection rule:

- ``T``/``beta``/``lambda`` live in the model (per-matrix Newton steps, per-slot init and
  penalty weight);
- learning rate and weight decay live in :class:`PackAdam`. Adam without amsgrad, with
  coupled L2 weight decay (``torch.optim.Adam``'s ``weight_decay``), computes moments
  from the gradient alone, so its update is linear in the learning rate. Each slot's L2
  term ``wd_p * w_p`` is added to its own gradient slice, torch's Adam steps with the
  first slot's learning rate, and every other slot's update is rescaled by
  ``lr_p / lr_0``. A run trained alone takes exactly torch's Adam step; inside a pack
  of mixed rates the rescaling changes only float rounding. The input layer (the model's
  ``input_parameters()``) takes ``weight_decay_io``, the output layer
  (``output_parameters()``) ``weight_decay_output`` (else ``weight_decay_io``), the rest
  ``weight_decay``.

Pack size: the runs of one call are split into packs of at most ``max_pack`` runs and,
on a GPU, of as many as the free memory holds (measured on a first epoch of a probe
pack), on a CPU of as many as keep a packed hidden state within 16 MiB (see
:func:`~._memory.pack_capacity`). Split packs train in lock-step. Each slot draws its
dropout masks from its own stream (``models.dropout_streams``), seeded from its run's seed
and carried through a compaction (``OrthoGNN.streams``), so a run's result does not depend
on its pack, with dropout or without.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from typing import NamedTuple

import torch
from torch import Tensor, nn
from torch_geometric.utils import remove_self_loops, to_edge_index

from orthotune.core import (
    DATASETS,
    PASS_SELECTION,
    ConfigResult,
    EpochCallback,
    Group,
    OrthotuneError,
    TrainConfig,
    backbone_info,
    by_group,
)
from orthotune.models import (
    OrthoGNN,
    SparseFeatures,
    adjacency,
    build_node_model,
    feature_norms,
    is_module_backbone,
    layer_gradient_norms,
    readout_width,
    signal_magnification,
    smoothness,
)
from orthotune.training._base import BasePack, BaseTrainer
from orthotune.training._drop_edge import edge_stream, slot_adjacency
from orthotune.training._loop import LoopResult, Run, Steadiness, Step
from orthotune.training._memory import cpu_capacity, pack_capacity
from orthotune.training._modules import train_modules
from orthotune.training._node_data import NodeData, in_locality_order, input_features
from orthotune.training._options import DEFAULT_OPTIONS, TrainOptions
from orthotune.training._pack_adam import PackAdam

#: Fields that may differ between the slots of one pack (everything else must agree).
PER_RUN = frozenset({"selection", "input_T"})


def choose_device(requested: str | None = None) -> torch.device:
    """Pick the device once: ``requested``, else CUDA when present, else CPU."""
    if requested:
        if requested.startswith("cuda") and not torch.cuda.is_available():
            raise OrthotuneError(f"device {requested!r} requested but CUDA is not available")
        return torch.device(requested)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def pack_key(config: TrainConfig) -> tuple:
    """Configs with equal keys can be trained together as one packed model.

    What may differ inside a pack: seeds/splits, ``T``, ``beta``, ``lambda``, learning
    rate, weight decays, epochs, patience, selection and ``input_T``.
    """
    fixed = [f.name for f in by_group(TrainConfig, Group.CELL, Group.VARIANT) if f.name not in PER_RUN]
    return (*(getattr(config, name) for name in fixed), config.layout, config.hidden, config.dropout,
            config.input_dropout, config.alpha, config.theta)


def train_node(
    configs: Sequence[TrainConfig] | TrainConfig,
    data: NodeData,
    device: torch.device,
    on_epoch: EpochCallback | None = None,
    options: TrainOptions = DEFAULT_OPTIONS,
) -> list[ConfigResult]:
    """Train every run of every config (all with one :func:`pack_key`) in packs; PyG's models
    and users' factories one model per run (``._modules``)."""
    configs = [configs] if isinstance(configs, TrainConfig) else list(configs)
    if is_module_backbone(configs[0].backbone):  # PyG's models and factories: one model per run
        return train_modules(configs, data, device, on_epoch, options)
    if len({pack_key(c) for c in configs}) != 1:
        raise OrthotuneError("configs packed together must share dataset, backbone, depth, arm, "
                             "hidden width, dropout and every structural switch")
    return _NodeTask(data, device, options).train(configs, on_epoch)


def _state_bytes(config: TrainConfig, nodes: int) -> int:
    """Bytes of one run's widest hidden state (JKNet's concatenated head, as the model sizes it)."""
    return nodes * readout_width(config) * 4


def runs_per_cpu_pack(config: TrainConfig, runs: int, options: TrainOptions = DEFAULT_OPTIONS) -> int:
    """How many of ``runs`` runs of ``config`` one pack holds on a CPU (as :class:`_NodeTask`
    packs them); the others train in further packs, one after another, within each epoch. A
    backbone outside the packed family trains one model per run: one."""
    if not backbone_info(config.backbone).packed:
        return 1
    return cpu_capacity(runs, options, _state_bytes(config, DATASETS.get(config.dataset).nodes))


def masked_mean(per_node: Tensor, mask: Tensor) -> Tensor:
    """Each slot's mean of ``[N, slots]`` values over its own masked nodes, ``[slots]``."""
    return (per_node * mask).sum(0) / mask.sum(0).clamp_min(1)


class _NodeTask(BaseTrainer):
    """The node task's trainer; what every pack of one call shares: the graph, its features
    and masks. Its packs hold as many runs as fit (:func:`~._memory.pack_capacity`) and the
    loop looks at them at the options' cadence."""

    sync_every = None

    def __init__(self, data: NodeData, device: torch.device, options: TrainOptions = DEFAULT_OPTIONS) -> None:
        super().__init__(device, options)
        self.x_norms = feature_norms(data.x)  # M_sig's ||h_i(0)|| = ||x_i|| (the paper's H(0) = X), loaded order
        self.data = in_locality_order(data) if options.locality_order else data
        data = self.data
        # sparse bag-of-words: sparse input projection (PubMed's 10.02% too, on a CPU)
        self.x = input_features(data.x, device)
        self.adj = adjacency(data.adj)
        self.edges = remove_self_loops(to_edge_index(data.adj)[0])[0]  # what DropEdge draws from

    def build(self, runs: Sequence[Run]) -> OrthoGNN:
        first = runs[0].config
        ortho = [r.config.ortho_settings() for r in runs] if first.ortho else None
        model = build_node_model(first, self.data.x.shape[1], self.data.num_classes, [r.seed for r in runs], ortho,
                                 isinstance(self.x, SparseFeatures))
        return model.to(self.device)

    def packs(self, runs: list[Run]) -> list[_NodePack]:
        size = pack_capacity(partial(_NodePack, self), runs, self.device, self.options,
                             _state_bytes(runs[0].config, self.data.num_nodes))
        return [_NodePack(self, runs, list(range(start, min(start + size, len(runs)))))
                for start in range(0, len(runs), size)]

    def results(self, configs: Sequence[TrainConfig], runs: Sequence[Run], packs: Sequence[_NodePack],
                outcome: LoopResult) -> list[ConfigResult]:
        """The packs train in lock-step: every config's seconds are the loop's."""
        per_epoch = outcome.seconds / max(outcome.epochs, 1)
        return [
            ConfigResult(config, [r for r, run in zip(outcome.results, runs) if run.owner == i],
                         seconds=outcome.seconds, seconds_per_epoch=per_epoch, device=str(self.device))
            for i, config in enumerate(configs)
        ]

    def losses(self, logits: Tensor, mask: Tensor) -> Tensor:
        """Mean cross-entropy over each slot's masked nodes, ``[slots]``: log-sum-exp less
        the target's logit, on the model's pack-major logits. ``F.cross_entropy`` needs them
        node-major (a copy) and its log-softmax over a few classes runs element by element:
        on 24 Cora runs (7 classes) 13.3 ms forward and backward against 3.2 ms here (the
        same losses to 1e-6)."""
        return masked_mean(self.cross_entropies(logits), mask)

    def cross_entropies(self, logits: Tensor) -> Tensor:
        """Every node's cross-entropy per slot, ``[N, slots]`` (:meth:`losses` before its mask)."""
        packed = logits.transpose(0, 1)  # [slots, N, C], contiguous as the model made it
        shifted = packed - packed.detach().amax(-1, keepdim=True)
        targets = self.data.y.view(1, -1, 1).expand(packed.shape[0], -1, 1)
        return (shifted.exp().sum(-1).log() - shifted.gather(-1, targets).squeeze(-1)).T


class _NodePack(BasePack):
    """Runs ``runs`` (indices into the call's runs) as the slots of one batched model."""

    def __init__(self, task: _NodeTask, all_runs: Sequence[Run], runs: list[int]) -> None:
        super().__init__(runs, all_runs[runs[0]].seed, task.device)
        self.task, self.all_runs = task, all_runs
        members = self.members()
        self.drop_rates = [r.config.drop_edge for r in members]
        self.edge_streams = [edge_stream(r) for r in members]
        # a captured epoch replays one adjacency; DropEdge draws a new one every epoch
        self.graphing = task.options.cuda_graph and task.device.type == "cuda" and not any(self.drop_rates)
        self.model = task.build(members)
        self.optimizer = PackAdam(self.model, members, capturable=self.graphing)
        self.masks = task.data.masks([r.split for r in members])
        # DropEdge's code selects by the training pass's own validation loss: computed where a slot asks
        self.pass_selection = any(r.config.selection == PASS_SELECTION for r in members)
        self.best = {k: v.detach().clone() for k, v in self._packed_state(self.model).items()}
        self.ahead: _Weights | None = None  # effective weights of the current parameters

    def random_streams(self) -> list[torch.Generator]:
        return self.model.streams(self.model.lam.device)  # the model's own device, its index included

    def before_capture(self) -> None:
        self.ahead = None  # the captured step computes its own weights: no autograd graph crosses epochs

    def captured_evaluation(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        return self.evaluate(ahead=False)

    def members(self, slots: Sequence[int] | None = None) -> list[Run]:
        chosen = self.runs if slots is None else [self.runs[s] for s in slots]
        return [self.all_runs[r] for r in chosen]

    def _packed_state(self, model: nn.Module) -> dict[str, Tensor]:
        """State entries split by slot (a leading slot dimension)."""
        slots = len(self.runs)
        return {k: v for k, v in model.state_dict().items() if v.dim() >= 1 and v.shape[0] == slots}

    def train_step(self, active: Tensor, record_grads: bool) -> Step:
        self.model.train()
        self.optimizer.zero_grad()
        out = self.model.run(self.task.x, *self.training_adjacency(), weights=self._weights_ahead())
        entropies = self.task.cross_entropies(out.logits)
        loss = masked_mean(entropies, self.masks[0]) + out.penalty
        pass_val_loss = masked_mean(entropies.detach(), self.masks[1]) if self.pass_selection else None
        finite = torch.isfinite(loss)
        fault = self.loss_fault(~finite, out.weights)
        if record_grads:  # dL/dW(l) of the effective weights: kept through backward
            for weight in out.weights:
                if weight.requires_grad:
                    weight.retain_grad()
        torch.where(active & finite, loss, 0.0).sum().backward()
        grads = weight_gradient_norms(out.weights, len(self.runs)) if record_grads else None
        for param in self.model.parameters():  # a failed run's NaNs stay in its own slice
            if param.grad is not None:
                param.grad.nan_to_num_(0.0, 0.0, 0.0)
        self.optimizer.step()
        return Step(loss.detach(), fault, grads, pass_val_loss)

    def training_adjacency(self) -> tuple:
        """This epoch's ``A_hat``: the whole graph's, or with DropEdge each slot's own (the
        ``training._drop_edge`` module's), drawn from its run's stream."""
        if not any(self.drop_rates):
            return self.task.adj
        return slot_adjacency(self.task.edges, self.task.data.num_nodes, self.drop_rates, self.edge_streams,
                              self.task.data.adjacency)

    @torch.no_grad()
    def evaluate(self, ahead: bool = True) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``ahead``: compute the effective weights with their autograd graph for the next
        training step (:meth:`_compute_ahead`); else without one."""
        self.model.eval()
        weights = self._compute_ahead() if ahead else None
        out = self.model.run(self.task.x, *self.task.adj, weights=weights, penalty=False)
        _, val_mask, test_mask = self.masks
        bad = ~torch.isfinite(out.logits).all(dim=(0, 2))
        fault = self.output_fault(bad, out.weights)
        correct = (out.logits.argmax(-1) == self.task.data.y.unsqueeze(1)).float()
        # equals OGB's Evaluator for ogbn-arxiv (accuracy over the split's nodes), on the device
        return (accuracy(correct, val_mask), self.task.losses(out.logits, val_mask),
                accuracy(correct, test_mask), fault)

    def _compute_ahead(self) -> list[Tensor | None] | None:
        """The effective weights of the current parameters, with their autograd graph.

        The evaluation after a step and the next training step see the same parameters:
        Ortho-GConv's Newton iteration runs once for both (the same operations on the same
        values, so the same bits), and the training step's backward pass goes through the
        graph built here. None for the original arm (nothing to compute)."""
        if self.model.ortho is None:
            return None
        with torch.enable_grad():
            weights = self.model.effective_weights()
        self.ahead = _Weights(weights, _versions(self.model))
        return weights

    def _weights_ahead(self) -> list[Tensor | None] | None:
        """:meth:`_compute_ahead`'s weights if the parameters are still those it saw (an
        optimiser step or a load bumps a parameter's version counter), else None."""
        ahead, self.ahead = self.ahead, None  # used once: its graph is freed by backward
        if ahead is None or ahead.versions != _versions(self.model):
            return None
        return ahead.weights

    @torch.no_grad()
    def keep_best(self, improved: Tensor) -> None:
        """Each improved slot's weights become its selected ones, in place (no host sync)."""
        state = self.model.state_dict()
        for key, best in self.best.items():
            value = state[key]
            torch.where(improved.view(-1, *([1] * (value.dim() - 1))), value, best, out=best)

    def finish(self, slots: Sequence[int]) -> list[Steadiness]:
        """Steadiness metrics of these slots' selected weights. Every slot of the pack: on the
        pack's own model, its selected weights swapped in and the current ones back after
        (no model is built); some slots (a compaction): on a model of their own."""
        if list(slots) == list(range(len(self.runs))):
            with self._selected_weights():
                return self._steadiness(self.model, slots)
        model = self.task.build(self.members(slots))
        model.load_state_dict(self._sliced(self.model.state_dict(), self.best, slots, model))
        return self._steadiness(model, slots)

    @contextmanager
    def _selected_weights(self) -> Iterator[None]:
        """The pack's model holds every slot's selected weights inside the block."""
        state = self.model.state_dict()
        current = {key: state[key].detach().clone() for key in self.best}
        with torch.no_grad():
            for key, best in self.best.items():
                state[key].copy_(best)
        try:
            yield
        finally:
            with torch.no_grad():
                for key, value in current.items():
                    state[key].copy_(value)

    def _steadiness(self, model: OrthoGNN, slots: Sequence[int]) -> list[Steadiness]:
        model.eval()
        out = model.run(self.task.x, *self.task.adj)
        loss = self.task.losses(out.logits, self.masks[0][:, list(slots)])
        norms = layer_gradient_norms(loss.sum(), out.weights, len(slots)).tolist()
        last = self.task.data.in_loaded_order(out.last.detach())  # the smoothness sample's nodes as loaded
        m_sig = signal_magnification(self.task.x_norms, last).tolist()
        smooth = smoothness(last).tolist()
        return [Steadiness(m_sig[k], smooth[k], norms[k]) for k in range(len(slots))]

    def drop(self, keep: Sequence[int]) -> None:
        """Compact: a model and optimiser of the kept slots, with their state."""
        model = self.task.build(self.members(keep))
        model.load_state_dict(self._sliced(self.model.state_dict(), {}, keep, model))
        optimizer = PackAdam(model, self.members(keep), capturable=self.graphing)
        optimizer.take_state(self.optimizer, keep)
        model.take_streams(self.model, keep)
        self.best = {k: v[list(keep)] for k, v in self.best.items()}
        self.masks = tuple(m[:, list(keep)] for m in self.masks)
        self.drop_rates = [self.drop_rates[s] for s in keep]
        self.edge_streams = [self.edge_streams[s] for s in keep]
        self.model, self.optimizer, self.ahead = model, optimizer, None
        self.forget_graph()  # the new model is captured afresh

    def _sliced(self, state: dict[str, Tensor], override: dict[str, Tensor], slots: Sequence[int],
                target: nn.Module) -> dict[str, Tensor]:
        """``state`` (with ``override`` entries) cut to ``slots`` where ``target`` has fewer slots."""
        index = torch.tensor(list(slots), device=self.task.device)
        shapes = {k: v.shape for k, v in target.state_dict().items()}
        out = {}
        for key, value in state.items():
            value = override.get(key, value)
            out[key] = value if value.shape == shapes[key] else value.index_select(0, index)
        return out


class _Weights(NamedTuple):
    """Effective weights computed ahead, and the parameter versions they were computed from."""

    weights: list[Tensor | None]
    versions: tuple[int, ...]


def _versions(model: nn.Module) -> tuple[int, ...]:
    """Every parameter's version counter (bumped by each in-place change, e.g. Adam's)."""
    return tuple(p._version for p in model.parameters())


def weight_gradient_norms(weights: Sequence[Tensor], slots: int) -> Tensor:
    """``[slots, layers]`` Frobenius norms of each layer's weight gradient after backward
    (zeros where a layer got none), on the weights' device."""
    norms = [w.grad.flatten(1).norm(dim=1) if w.grad is not None else torch.zeros(slots, device=w.device)
             for w in weights]
    return torch.stack(norms, dim=1) if norms else torch.zeros(slots, 0)


def accuracy(correct: Tensor, mask: Tensor) -> Tensor:
    """Per slot: the share of ``mask``'s nodes predicted correctly."""
    return (correct * mask).sum(0) / mask.sum(0).clamp_min(1)
