"""Graph classification (PROTEINS, D&D): 10-fold cross-validation folds and the trainer.

Protocol (``cv10``): stratified 10-fold cross-validation with a fixed seed; fold ``k``'s
test part is the ``k``-th fold, and a stratified tenth of the other nine folds is held
out as its validation part (train 81%, validation 9%, test 10%). The fold indices are
computed once, saved as JSON next to the processed dataset in orthotune's cache (never in
the data root) and reused, so every process and every search sees the same folds.

Selection, patience and failure are the shared loop's (:mod:`._loop`), as for node
classification: each fold's test accuracy is read at its selected epoch (highest
validation accuracy or lowest validation loss); early stopping after ``patience`` epochs
without a strictly better one. The Graph U-Nets code reports the maximum test accuracy
over epochs; orthotune never selects on test.

Training is mini-batch Adam with amsgrad (as Gao & Ji's trainer) over PyG's
``DataLoader``. The folds of a config (and several configs) are separate models trained
in lock-step, one epoch each in turn, so that the per-epoch callback sees every run after
every epoch as with the node trainer. Each run keeps its own dropout random stream and
shuffling generator, so a run's result does not depend on which other runs share the call.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import torch
import torch.nn.functional as F
from filelock import FileLock
from torch import Tensor
from torch_geometric.data import Batch
from torch_geometric.loader import DataLoader

from orthotune.core import (
    DATASETS,
    ConfigError,
    ConfigResult,
    EpochCallback,
    OrthotuneError,
    TrainConfig,
    check,
)
from orthotune.models import (
    GRAPH_BACKBONES,
    OrthoGraphNet,
    feature_norms,
    layer_gradient_norms,
    signal_magnification,
    smoothness,
)
from orthotune.training._base import BaseTrainer, OneRunPack, first_fault
from orthotune.training._data import DataRoot, load_dataset
from orthotune.training._loop import Run, Steadiness, Step
from orthotune.training._options import DEFAULT_OPTIONS, TrainOptions

NUM_FOLDS = 10
#: The fixed seed of the fold assignment (not a training seed: changing it changes the folds).
FOLD_SEED = 0
#: Share of each training fold held out for validation (stratified).
VAL_FRACTION = 0.1


@dataclass(frozen=True)
class Fold:
    """Graph indices of one cross-validation fold: disjoint, together the whole dataset."""

    train: Tensor
    val: Tensor
    test: Tensor


def make_folds(labels: Tensor, folds: int = NUM_FOLDS, seed: int = FOLD_SEED,
               val_fraction: float = VAL_FRACTION) -> list[Fold]:
    """Stratified ``folds``-fold split; a stratified ``val_fraction`` of each training part."""
    # imported here: scikit-learn (and the SciPy it loads, about a second) serves only the
    # first split of a graph dataset, and every Ray worker imports this module
    from sklearn.model_selection import StratifiedKFold, train_test_split

    y = labels.cpu().numpy()
    outer = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
    result = []
    for k, (rest, test) in enumerate(outer.split(y.reshape(-1, 1), y)):
        train, val = train_test_split(rest, test_size=val_fraction, stratify=y[rest], random_state=seed + k)
        result.append(Fold(*(torch.as_tensor(sorted(part), dtype=torch.long) for part in (train, val, test))))
    return result


def saved_folds(path: Path, labels: Tensor, seed: int = FOLD_SEED) -> list[Fold]:
    """The folds stored at ``path``, created there first if missing or for other labels."""
    fingerprint = hashlib.sha1(labels.cpu().numpy().tobytes()).hexdigest()
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path) + ".lock"):  # Ray workers of one machine may start together
        if path.exists():
            stored = json.loads(path.read_text())
            if stored.get("labels_sha1") == fingerprint and stored.get("seed") == seed:
                return [Fold(*(torch.tensor(f[key], dtype=torch.long) for key in ("train", "val", "test")))
                        for f in stored["folds"]]
        folds = make_folds(labels, seed=seed)
        payload = {
            "protocol": f"stratified {NUM_FOLDS}-fold CV, stratified {VAL_FRACTION} of train as validation",
            "seed": seed,
            "num_graphs": int(labels.numel()),
            "labels_sha1": fingerprint,
            "folds": [{key: getattr(f, key).tolist() for key in ("train", "val", "test")} for f in folds],
        }
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(payload))
        os.replace(temporary, path)
        return folds


@dataclass(frozen=True)
class GraphData:
    """A graph-classification dataset with its saved folds.

    The graphs stay on the CPU; :meth:`to` only records the device every mini-batch is
    moved to (PyG's ``DataLoader`` collates on the CPU).
    """

    name: str
    setting: str
    dataset: object  # the PyG TUDataset
    folds: tuple[Fold, ...]
    fold_file: Path
    num_features: int
    num_classes: int
    device: torch.device = torch.device("cpu")

    @property
    def num_graphs(self) -> int:
        return len(self.dataset)

    def fold(self, split: int) -> Fold:
        check(0 <= split < len(self.folds),
              f"split={split} must be a fold index in [0, {len(self.folds) - 1}] for {self.name} ({self.setting})")
        return self.folds[split]

    def to(self, device: torch.device | str) -> GraphData:
        return replace(self, device=torch.device(device))


def load_graph_data(name: str, setting: str | None = None, data_root: DataRoot | None = None,
                    directed: bool = False) -> GraphData:
    info = DATASETS.get(name)
    if info.task != "graph":
        raise OrthotuneError(f"dataset {name!r} is a node-classification dataset")
    if directed:
        raise ConfigError(f"directed=true applies to node-classification datasets, not {info.name}")
    setting = setting or info.default_setting
    dataset = load_dataset(name, setting, data_root)
    labels = dataset.y.view(-1)
    path = Path(dataset.processed_dir).parent / "folds" / f"{setting}-seed{FOLD_SEED}.json"
    folds = saved_folds(path, labels)
    return GraphData(info.name, setting, dataset, tuple(folds), path, dataset.num_features,
                     int(labels.max()) + 1)


def build_graph_model(config: TrainConfig, data: GraphData, seed: int) -> OrthoGraphNet:
    return GRAPH_BACKBONES.get(config.backbone)(
        data.num_features, config.hidden, data.num_classes, config.depth, config.dropout,
        ortho=config.ortho_settings(), seed=seed,
    )


class _GraphTask(BaseTrainer):
    """The graph task's trainer: one pack per fold (and seed) of each config."""

    def __init__(self, data: GraphData, device: torch.device, options: TrainOptions = DEFAULT_OPTIONS) -> None:
        super().__init__(device, options)
        self.data = data

    def packs(self, runs: list[Run]) -> list[_GraphPack]:
        return [_GraphPack(run, i, self.data) for i, run in enumerate(runs)]


class _GraphPack(OneRunPack):
    """One fold (and seed) of one config as a pack of one slot: its model, optimiser and
    loaders. Losses, accuracies and failures stay on the device (no per-batch sync)."""

    def __init__(self, run: Run, index: int, data: GraphData) -> None:
        config = run.config
        check(config.batch_size is not None, f"batch_size is required for {config.dataset}")
        fold = data.fold(run.split)
        super().__init__(run, index, data.device)
        self.config, self.data, self.device = config, data, data.device
        self.model = build_graph_model(config, data, run.seed).to(self.device)
        # Adam with amsgrad, as Gao & Ji train Graph U-Nets (their trainer.py)
        self.optimizer = self.adam(config, amsgrad=True)
        shuffle = torch.Generator().manual_seed(run.seed)
        self.train_loader = DataLoader(data.dataset[fold.train], config.batch_size, shuffle=True, generator=shuffle)
        self.val_loader = DataLoader(data.dataset[fold.val], config.batch_size)
        self.test_loader = DataLoader(data.dataset[fold.test], config.batch_size)
        # Steadiness metrics use one fixed batch: the first graphs of the training part.
        self.probe = Batch.from_data_list(list(data.dataset[fold.train[: config.batch_size]]))
        self.best = self.snapshot()

    def train_step(self, active: Tensor, record_grads: bool) -> Step:
        """One epoch of mini-batches (per-epoch gradient norms are recorded for node tasks only;
        a training pass over graphs sees no validation graph: ``train_pass_val_loss`` is refused
        for graph tasks)."""
        self.model.train()
        total = torch.zeros(1, device=self.device)
        fault = torch.zeros(1, dtype=torch.long, device=self.device)
        graphs = 0
        for batch in self.train_loader:
            batch = batch.to(self.device)
            self.optimizer.zero_grad(set_to_none=True)
            out = self.model.run(batch.x, batch.edge_index, batch.batch)
            loss = F.cross_entropy(out.logits, batch.y) + out.penalty.sum()
            fault = first_fault(fault, self.loss_fault(~torch.isfinite(loss).view(1), out.weights))
            loss.backward()  # a failed run trains on to the next sync point; its result is frozen
            self.optimizer.step()
            total, graphs = total + loss.detach() * batch.num_graphs, graphs + batch.num_graphs
        return Step(total / max(graphs, 1), fault)

    def evaluate(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """On the validation and test folds, on the pack's own random stream as its training:
        each pass over a loader draws its base seed from the global stream."""
        with self.rng.active():
            val_acc, val_loss, val_fault = self._evaluate(self.val_loader)
            test_acc, _, test_fault = self._evaluate(self.test_loader)
        return val_acc, val_loss, test_acc, first_fault(val_fault, test_fault)

    @torch.no_grad()
    def _evaluate(self, loader: DataLoader) -> tuple[Tensor, Tensor, Tensor]:
        """Accuracy, mean cross-entropy and failure code over ``loader``'s graphs."""
        self.model.eval()
        correct = torch.zeros(1, device=self.device)
        loss = torch.zeros(1, device=self.device)
        fault = torch.zeros(1, dtype=torch.long, device=self.device)
        graphs = 0
        for batch in loader:
            batch = batch.to(self.device)
            out = self.model.run(batch.x, batch.edge_index, batch.batch)
            bad = ~torch.isfinite(out.logits).all().view(1)
            fault = first_fault(fault, self.output_fault(bad, out.weights))
            correct += (out.logits.argmax(-1) == batch.y).sum()
            loss += F.cross_entropy(out.logits, batch.y, reduction="sum")
            graphs += batch.num_graphs
        return correct / max(graphs, 1), loss / max(graphs, 1), fault

    def finish(self, slots: Sequence[int]) -> list[Steadiness]:
        """Steadiness metrics of the selected model (no dropout) on the probe batch."""
        self.model.load_state_dict(self.best)
        self.model.eval()
        probe = self.probe.to(self.device)
        out = self.model.run(probe.x, probe.edge_index, probe.batch)
        norms = layer_gradient_norms(F.cross_entropy(out.logits, probe.y), out.weights)
        # M_sig against the input features (the paper's H(0) = X), as for node tasks
        m_sig = signal_magnification(feature_norms(probe.x), out.last.detach())
        return [Steadiness(float(m_sig[0]),
                           float(smoothness(out.last.detach())[0]), [float(v) for v in norms[0]])]


def train_graph(
    configs: Sequence[TrainConfig] | TrainConfig,
    data: GraphData,
    device: torch.device,
    on_epoch: EpochCallback | None = None,
    options: TrainOptions = DEFAULT_OPTIONS,
) -> list[ConfigResult]:
    """Train every fold of every config; one :class:`ConfigResult` per config (folds as runs).

    Each fold is a pack of one slot; the shared loop synchronises after every epoch
    (mini-batches come from the host anyway), so finished folds stop at once.
    """
    configs = [configs] if isinstance(configs, TrainConfig) else list(configs)
    check(all(c.dataset == data.name for c in configs),
          f"configs for {sorted({c.dataset for c in configs})} cannot train on {data.name}")
    return _GraphTask(data.to(device), device, options).train(configs, on_epoch)
