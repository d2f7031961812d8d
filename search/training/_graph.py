"""Graph classification (PROTEINS, D&D): 10-fold cross-validation folds and the trainer.

Protocol (``cv10``): stratified 10-fold cross-validation with a fixed seed; fold ``k``'s
test part is the ``k``-th fold, and a stratified tenth of the other nine folds is held
out as its validation part (train 81%, validation 9%, test 10%). The fold indices are
computed once, saved as JSON next to the processed dataset in orthotune's cache (never in
the data root) and reused, so every process and every search sees the same folds.

Selection rule, as for node classification: each fold's test accuracy is read at its
validation-best epoch (the first epoch reaching the highest validation accuracy); early
stopping after ``patience`` epochs without a strictly better one. The Graph U-Nets code
reports the maximum test accuracy over epochs; orthotune never selects on test.

Training is mini-batch Adam over PyG's ``DataLoader``. The folds of a config (and several
configs) are separate models trained in lock-step, one epoch each in turn, so that the
per-epoch callback sees every run after every epoch as with the node trainer. Each run
keeps its own dropout random stream and shuffling generator, so a run's result does not
depend on which other runs share the call.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import math
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import torch
import torch.nn.functional as F
from filelock import FileLock
from sklearn.model_selection import StratifiedKFold, train_test_split
from torch import Tensor
from torch_geometric.data import Batch
from torch_geometric.loader import DataLoader

from orthotune.core import (
    DATASETS,
    ConfigResult,
    EpochCallback,
    EpochReport,
    OrthotuneError,
    RunResult,
    Status,
    TrainConfig,
    check,
    mean_or_zero,
)
from orthotune.models import GRAPH_BACKBONES, OrthoGraphNet, layer_gradient_norms, signal_magnification, smoothness
from orthotune.search.training._data import DataRoot, load_dataset
from orthotune.search.training._memory import retain_freed_memory

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


def load_graph_data(name: str, setting: str | None = None, data_root: DataRoot | None = None) -> GraphData:
    info = DATASETS.get(name)
    if info.task != "graph":
        raise OrthotuneError(f"dataset {name!r} is a node-classification dataset")
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


class _Rng:
    """A run's own global random stream (dropout), swapped in while the run computes."""

    def __init__(self, seed: int, device: torch.device) -> None:
        self.devices = [device] if device.type == "cuda" else []
        with torch.random.fork_rng(devices=self.devices):
            torch.manual_seed(seed)
            self.states = self._get()

    def _get(self) -> list[Tensor]:
        return [torch.get_rng_state()] + [torch.cuda.get_rng_state(d) for d in self.devices]

    @contextmanager
    def active(self) -> Iterator[None]:
        with torch.random.fork_rng(devices=self.devices):
            torch.set_rng_state(self.states[0])
            for device, state in zip(self.devices, self.states[1:]):
                torch.cuda.set_rng_state(state, device)
            yield
            self.states = self._get()


class _GraphRun:
    """One fold (and seed) of one config: its model, optimiser, loaders and selection state."""

    def __init__(self, config: TrainConfig, split: int, seed: int, data: GraphData) -> None:
        check(config.batch_size is not None, f"batch_size is required for {config.dataset}")
        self.config, self.data, self.device = config, data, data.device
        self.result = RunResult(split, seed)
        fold = data.fold(split)
        self.rng = _Rng(seed, self.device)
        self.model = build_graph_model(config, data, seed).to(self.device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
        shuffle = torch.Generator().manual_seed(seed)
        self.train_loader = DataLoader(data.dataset[fold.train], config.batch_size, shuffle=True, generator=shuffle)
        self.val_loader = DataLoader(data.dataset[fold.val], config.batch_size)
        self.test_loader = DataLoader(data.dataset[fold.test], config.batch_size)
        # Steadiness metrics use one fixed batch: the first graphs of the training part.
        self.probe = Batch.from_data_list(list(data.dataset[fold.train[: config.batch_size]]))
        self.best_state = copy.deepcopy(self.model.state_dict())
        self.best_val, self.since_best, self.seconds = -1.0, 0, 0.0
        self.loss, self.val, self.test = math.nan, math.nan, math.nan
        self.active = True

    def epoch(self, epoch: int) -> None:
        start = time.perf_counter()
        with self.rng.active():
            self.loss = self._train(epoch)
            if self.result.status != Status.FAILED:
                self.val, self.test = self._accuracy(self.val_loader, epoch), self._accuracy(self.test_loader, epoch)
        self.result.epochs = epoch
        if self.result.status != Status.FAILED and self.val > self.best_val:  # test never looked at
            self.best_val, self.since_best = self.val, 0
            self.best_state = copy.deepcopy(self.model.state_dict())
            self.result.val_acc, self.result.test_acc, self.result.best_epoch = self.val, self.test, epoch
        else:
            self.since_best += 1
        self.active = (self.result.status != Status.FAILED and self.since_best < self.config.patience
                       and epoch < self.config.epochs)
        self.seconds += time.perf_counter() - start

    def _train(self, epoch: int) -> float:
        self.model.train()
        total, graphs = 0.0, 0
        for batch in self.train_loader:
            batch = batch.to(self.device)
            self.optimizer.zero_grad(set_to_none=True)
            out = self.model.run(batch.x, batch.edge_index, batch.batch)
            loss = F.cross_entropy(out.logits, batch.y) + out.penalty.sum()
            if not bool(torch.isfinite(loss)):
                self._fail(epoch, out.weights, "loss")
                return math.nan
            loss.backward()
            self.optimizer.step()
            total, graphs = total + float(loss.detach()) * batch.num_graphs, graphs + batch.num_graphs
        return total / max(graphs, 1)

    @torch.no_grad()
    def _accuracy(self, loader: DataLoader, epoch: int) -> float:
        self.model.eval()
        correct, graphs = 0, 0
        for batch in loader:
            batch = batch.to(self.device)
            out = self.model.run(batch.x, batch.edge_index, batch.batch)
            if not bool(torch.isfinite(out.logits).all()):
                self._fail(epoch, out.weights, "output")
                return math.nan
            correct += int((out.logits.argmax(-1) == batch.y).sum())
            graphs += batch.num_graphs
        return correct / max(graphs, 1)

    def _fail(self, epoch: int, weights: list[Tensor], what: str) -> None:
        if any(not bool(torch.isfinite(w).all()) for w in weights):
            what = "Ortho-GConv weight (Newton iteration overflow)"
        self.result.status, self.result.reason = Status.FAILED, f"non-finite {what} at epoch {epoch}"

    def finish(self) -> None:
        """Steadiness metrics of the validation-best model (no dropout) on the probe batch."""
        if self.result.status == Status.FAILED:
            return
        self.model.load_state_dict(self.best_state)
        self.model.eval()
        probe = self.probe.to(self.device)
        out = self.model.run(probe.x, probe.edge_index, probe.batch)
        norms = layer_gradient_norms(F.cross_entropy(out.logits, probe.y), out.weights)
        self.result.m_sig = float(signal_magnification(out.first.detach(), out.last.detach())[0])
        self.result.smoothness = float(smoothness(out.last.detach())[0])
        self.result.grad_norms = [float(v) for v in norms[0]]


def train_graph(
    configs: Sequence[TrainConfig] | TrainConfig,
    data: GraphData,
    device: torch.device,
    on_epoch: EpochCallback | None = None,
) -> list[ConfigResult]:
    """Train every fold of every config; one :class:`ConfigResult` per config (folds as runs)."""
    configs = [configs] if isinstance(configs, TrainConfig) else list(configs)
    check(all(c.dataset == data.name for c in configs),
          f"configs for {sorted({c.dataset for c in configs})} cannot train on {data.name}")
    retain_freed_memory()
    data = data.to(device)
    runs = [[_GraphRun(c, split, seed, data) for split, seed in c.runs()] for c in configs]
    epoch = 0
    while any(r.active for group in runs for r in group):
        epoch += 1
        for run in (r for group in runs for r in group if r.active):
            run.epoch(epoch)
        if on_epoch is not None:
            _stop(on_epoch(_report(epoch, runs)) or (), runs, epoch)
    for run in (r for group in runs for r in group):
        run.finish()
    return [_result(config, group, device) for config, group in zip(configs, runs)]


def _report(epoch: int, runs: list[list[_GraphRun]]) -> EpochReport:
    """Per config and run; a stopped run repeats its last values."""
    def values(key: str) -> list[list[float]]:
        return [[getattr(r, key) for r in group] for group in runs]

    best = [mean_or_zero([r.result.val_acc for r in group]) for group in runs]
    return EpochReport(epoch, values("loss"), values("val"), values("test"), best,
                       [any(r.active for r in group) for group in runs],
                       [[dataclasses.replace(r.result) for r in group] for group in runs])


def _stop(configs: Iterable[int], runs: list[list[_GraphRun]], epoch: int) -> None:
    """The scheduler stopped these configs: their folds stop where they are."""
    for index in configs:
        for run in (r for r in runs[index] if r.active):
            run.active = False
            run.result.status, run.result.reason = Status.STOPPED, f"stopped by ASHA at epoch {epoch}"


def _result(config: TrainConfig, group: list[_GraphRun], device: torch.device) -> ConfigResult:
    """``seconds_per_epoch`` is per fold-epoch: one epoch of one fold, train and evaluation."""
    seconds = sum(r.seconds for r in group)
    epochs = sum(r.result.epochs for r in group)
    return ConfigResult(config, [r.result for r in group], seconds=seconds,
                        seconds_per_epoch=seconds / max(epochs, 1), device=str(device))
