"""Full-batch node-classification training for one or several packed configs.

Selection rule: each run's reported test accuracy is read at its *validation-best epoch*,
the first epoch reaching the highest validation accuracy seen (later epochs must beat it
strictly). Test accuracy never influences anything: not the epoch, not early stopping.
Early stopping: a run stops after ``patience`` epochs without a strictly better validation
accuracy, or at ``epochs``. Packed runs train as one batched model but are selected,
stopped and failed each on their own, so packing does not change any run's result.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import torch
import torch.nn.functional as F
from torch import Tensor

from models import BACKBONES, OrthoGNN, layer_gradient_norms, signal_magnification, smoothness
from orthotune.errors import OrthotuneError
from search._config import TrainConfig
from search._data import NodeData

COMPLETED, STOPPED, FAILED = "completed", "stopped", "failed"


@dataclass
class RunResult:
    """One repeat (split or seed) of one config."""

    split: int
    seed: int
    status: str = COMPLETED
    reason: str = ""
    val_acc: float = float("nan")
    test_acc: float = float("nan")
    best_epoch: int = 0
    epochs: int = 0
    m_sig: float = float("nan")
    smoothness: float = float("nan")
    grad_norms: list[float] = field(default_factory=list)


@dataclass
class ConfigResult:
    """A config's repeats; its objective is the mean validation accuracy over them."""

    config: TrainConfig
    runs: list[RunResult]
    seconds: float = 0.0
    seconds_per_epoch: float = 0.0
    device: str = "cpu"

    @property
    def status(self) -> str:
        return FAILED if any(r.status == FAILED for r in self.runs) else COMPLETED

    @property
    def reason(self) -> str:
        return next((r.reason for r in self.runs if r.status == FAILED), "")

    def mean(self, key: str) -> float:
        values = [getattr(r, key) for r in self.runs]
        return float(sum(values) / len(values))

    def std(self, key: str) -> float:
        values = torch.tensor([getattr(r, key) for r in self.runs], dtype=torch.float64)
        return float(values.std(unbiased=False)) if len(values) > 1 else 0.0


@dataclass
class EpochReport:
    """What a callback sees after each epoch: one entry per config in the pack."""

    epoch: int
    train_loss: list[list[float]]  # [config][run]
    val_acc: list[list[float]]
    test_acc: list[list[float]]
    best_val: list[float]  # per config: mean over runs of the best validation so far
    active: list[bool]  # per config: still training


EpochCallback = Callable[[EpochReport], None]


def choose_device(requested: str | None = None) -> torch.device:
    """Pick the device once: ``requested``, else CUDA when present, else CPU."""
    if requested:
        if requested.startswith("cuda") and not torch.cuda.is_available():
            raise OrthotuneError(f"device {requested!r} requested but CUDA is not available")
        return torch.device(requested)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def pack_key(config: TrainConfig) -> tuple:
    """Configs with equal keys can be trained together as one packed model."""
    return (
        config.dataset, config.setting, config.backbone, config.depth, config.ortho,
        config.hidden, config.dropout, config.lr, config.weight_decay, config.alpha,
        config.theta, config.jk, config.centre_rows, config.norm_groups, config.squared_norm,
    )


def build_model(config: TrainConfig, data: NodeData, seeds: Sequence[int], ortho) -> OrthoGNN:
    extra = {"gcnii": dict(alpha=config.alpha, theta=config.theta), "jknet": dict(jk=config.jk)}
    return BACKBONES.get(config.backbone)(
        data.x.shape[1], config.hidden, data.num_classes, config.depth, config.dropout,
        ortho=ortho, seeds=seeds, **extra.get(config.backbone, {}),
    )


def train_node(
    configs: Sequence[TrainConfig] | TrainConfig,
    data: NodeData,
    device: torch.device,
    on_epoch: EpochCallback | None = None,
) -> list[ConfigResult]:
    """Train every run of every config (all with one :func:`pack_key`) as one model."""
    configs = [configs] if isinstance(configs, TrainConfig) else list(configs)
    if len({pack_key(c) for c in configs}) != 1:
        raise OrthotuneError("configs packed together must share dataset, backbone, depth, "
                             "form and training hyperparameters other than T, beta, lambda")
    return _PackTrainer(configs, data, device).fit(on_epoch)


class _PackTrainer:
    def __init__(self, configs: list[TrainConfig], data: NodeData, device: torch.device) -> None:
        self.configs, self.data, self.device = configs, data, device
        self.owner = [i for i, c in enumerate(configs) for _ in c.runs()]
        runs = [run for c in configs for run in c.runs()]
        self.results = [RunResult(split, seed) for split, seed in runs]
        first = configs[0]
        ortho = [c.ortho_settings() for c in configs for _ in c.runs()] if first.ortho else None
        torch.manual_seed(runs[0][1])  # dropout's stream; weights come from per-run seeds
        self.model = build_model(first, data, [seed for _, seed in runs], ortho).to(device)
        self.optimizer = torch.optim.Adam(
            self.model.parameters(), lr=first.lr, weight_decay=first.weight_decay
        )
        self.train_mask, self.val_mask, self.test_mask = data.masks([s for s, _ in runs])
        self.max_epochs = torch.tensor([configs[i].epochs for i in self.owner], device=device)
        self.patience = torch.tensor([configs[i].patience for i in self.owner], device=device)
        self.best_state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    def fit(self, on_epoch: EpochCallback | None) -> list[ConfigResult]:
        packs = len(self.results)
        active = torch.ones(packs, dtype=torch.bool, device=self.device)
        best_val = torch.full((packs,), -1.0, device=self.device)
        since_best = torch.zeros(packs, dtype=torch.long, device=self.device)
        start, epoch = time.perf_counter(), 0
        while bool(active.any()):
            epoch += 1
            loss = self._step(active, epoch)
            val, test = self._evaluate(active, epoch)
            improved = active & (val > best_val)
            self._remember(improved, val, test, epoch)
            best_val = torch.where(improved, val, best_val)
            since_best = torch.where(improved, 0, since_best + 1)
            for p in torch.nonzero(active).flatten().tolist():
                self.results[p].epochs = epoch
            active &= (since_best < self.patience) & (epoch < self.max_epochs)
            active &= torch.tensor([r.status != FAILED for r in self.results], device=self.device)
            if on_epoch is not None:
                on_epoch(self._report(epoch, loss, val, test, active))
        seconds = time.perf_counter() - start
        self._finish()
        return self._group(seconds, epoch)

    def _step(self, active: Tensor, epoch: int) -> Tensor:
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        out = self.model.run(self.data.x, self.data.adj)
        loss = self._losses(out.logits, self.train_mask) + out.penalty
        finite = torch.isfinite(loss)
        self._fail(active & ~finite, epoch, out.weights)
        torch.where(active & finite, loss, 0.0).sum().backward()
        for param in self.model.parameters():  # a failed run's NaNs stay in its own slice
            if param.grad is not None:
                param.grad.nan_to_num_(0.0, 0.0, 0.0)
        self.optimizer.step()
        return loss.detach()

    def _losses(self, logits: Tensor, mask: Tensor) -> Tensor:
        nodes, packs, classes = logits.shape
        targets = self.data.y.repeat_interleave(packs)
        ce = F.cross_entropy(logits.reshape(-1, classes), targets, reduction="none")
        ce = ce.view(nodes, packs) * mask
        return ce.sum(0) / mask.sum(0).clamp_min(1)

    @torch.no_grad()
    def _evaluate(self, active: Tensor, epoch: int) -> tuple[Tensor, Tensor]:
        self.model.eval()
        out = self.model.run(self.data.x, self.data.adj)
        finite = torch.isfinite(out.logits).all(dim=(0, 2))
        self._fail(active & ~finite, epoch, out.weights)
        predicted = out.logits.argmax(-1)
        if self.data.setting == "official":
            return self._ogb_accuracy(predicted, self.val_mask), self._ogb_accuracy(predicted, self.test_mask)
        correct = (predicted == self.data.y.unsqueeze(1)).float()
        return _accuracy(correct, self.val_mask), _accuracy(correct, self.test_mask)

    def _ogb_accuracy(self, predicted: Tensor, mask: Tensor) -> Tensor:
        """Accuracy per pack through OGB's own Evaluator (official OGB splits)."""
        evaluator = _ogb_evaluator(self.data.name)
        scores = [
            evaluator.eval({"y_true": self.data.y[mask[:, p]].view(-1, 1).cpu(),
                            "y_pred": predicted[mask[:, p], p].view(-1, 1).cpu()})["acc"]
            for p in range(predicted.shape[1])
        ]
        return torch.tensor(scores, device=predicted.device)

    def _fail(self, failing: Tensor, epoch: int, weights: list[Tensor]) -> None:
        for p in torch.nonzero(failing).flatten().tolist():
            result = self.results[p]
            if result.status == FAILED:
                continue
            bad_weight = any(not bool(torch.isfinite(w[p]).all()) for w in weights)
            what = "Ortho-GConv weight (Newton iteration overflow)" if bad_weight else "loss"
            result.status, result.reason = FAILED, f"non-finite {what} at epoch {epoch}"

    def _remember(self, improved: Tensor, val: Tensor, test: Tensor, epoch: int) -> None:
        packs = torch.nonzero(improved).flatten().tolist()
        if not packs:
            return
        state = self.model.state_dict()
        for key, value in state.items():
            self.best_state[key][packs] = value.detach()[packs]
        for p in packs:
            result = self.results[p]
            result.val_acc, result.test_acc = float(val[p]), float(test[p])
            result.best_epoch = epoch

    def _finish(self) -> None:
        """Steadiness metrics of each run's validation-best model (no dropout)."""
        self.model.load_state_dict(self.best_state)
        self.model.eval()
        out = self.model.run(self.data.x, self.data.adj)
        loss = self._losses(out.logits, self.train_mask)
        norms = layer_gradient_norms(loss.sum(), out.weights)
        m_sig = signal_magnification(out.first, out.last).detach()
        smooth = smoothness(out.last.detach())
        for p, result in enumerate(self.results):
            if result.status != FAILED:
                result.m_sig, result.smoothness = float(m_sig[p]), float(smooth[p])
                result.grad_norms = [float(v) for v in norms[p]]

    def _report(self, epoch, loss, val, test, active) -> EpochReport:
        def per_config(values: Tensor) -> list[list[float]]:
            return [[float(values[p]) for p, o in enumerate(self.owner) if o == i]
                    for i in range(len(self.configs))]

        best = [[r.val_acc for r, o in zip(self.results, self.owner) if o == i]
                for i in range(len(self.configs))]
        alive = per_config(active.float())
        return EpochReport(
            epoch, per_config(loss), per_config(val), per_config(test),
            [_mean_or_zero(b) for b in best], [any(a) for a in alive],
        )

    def _group(self, seconds: float, epochs: int) -> list[ConfigResult]:
        per_epoch = seconds / max(epochs, 1)
        return [
            ConfigResult(
                config,
                [r for r, o in zip(self.results, self.owner) if o == i],
                seconds=seconds, seconds_per_epoch=per_epoch, device=str(self.device),
            )
            for i, config in enumerate(self.configs)
        ]


@lru_cache(maxsize=4)
def _ogb_evaluator(name: str):
    from ogb.nodeproppred import Evaluator

    return Evaluator(name)


def _accuracy(correct: Tensor, mask: Tensor) -> Tensor:
    return (correct * mask).sum(0) / mask.sum(0).clamp_min(1)


def _mean_or_zero(values: list[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return sum(finite) / len(values) if finite else 0.0
