"""Full-batch node-classification training for one or several packed configs.

Selection rule: each run's reported test accuracy is read at its *validation-best epoch*,
the first epoch reaching the highest validation accuracy seen (later epochs must beat it
strictly). Test accuracy never influences anything: not the epoch, not early stopping.
Early stopping: a run stops after ``patience`` epochs without a strictly better validation
accuracy, or at ``epochs``. Packed runs train as one batched model but are selected,
stopped and failed each on their own, so packing does not change any run's result.

Packing: configs that share :func:`pack_key` (dataset, backbone, depth, form, hidden
width, dropout and the backbone switches) train as one model whose every parameter has a
leading pack dimension (nothing is shared between packs; :class:`_PackAdam` checks it).
Each pack keeps its own seed, ``T``, ``beta``, ``lambda``, learning rate, weight decay,
epochs and patience:

- ``T``/``beta``/``lambda`` live in the model (per-matrix Newton steps, per-pack init and
  penalty weight);
- learning rate and weight decay live in :class:`_PackAdam`. Adam without amsgrad, with
  coupled L2 weight decay (``torch.optim.Adam``'s ``weight_decay``), computes moments
  from the gradient alone, so its update is linear in the learning rate. Each pack's L2
  term ``wd_p * w_p`` is added to its own gradient slice, torch's Adam steps with the
  first pack's learning rate, and every other pack's update is rescaled by
  ``lr_p / lr_0``. A pack trained alone takes exactly torch's Adam step; inside a pack
  of mixed rates the rescaling changes only float rounding.

Stopped runs stay in the batch until the whole pack ends (their results are frozen at
their validation-best epoch); they cost compute, not correctness.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Iterable, Sequence
from functools import lru_cache

import torch
import torch.nn.functional as F
from torch import Tensor

from orthotune.core import (
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
from orthotune.models import (
    OrthoGNN,
    adjacency,
    build_node_model,
    layer_gradient_norms,
    node_features,
    signal_magnification,
    smoothness,
)
from orthotune.search.training._data import NodeData
from orthotune.search.training._memory import retain_freed_memory


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
    rate, weight decay, epochs and patience.
    """
    return (
        config.dataset, config.setting, config.backbone, config.depth, config.ortho,
        config.hidden, config.dropout, config.alpha, config.theta, config.jk,
        config.centre_rows, config.norm_groups, config.squared_norm,
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
                             "form, hidden width, dropout and backbone switches")
    retain_freed_memory()
    return _PackTrainer(configs, data, device).fit(on_epoch)


class _PackAdam:
    """``torch.optim.Adam`` with a learning rate and an L2 weight decay per pack.

    See the module docstring: per-pack L2 is added to each pack's gradient slice (as
    Adam's coupled ``weight_decay`` would), and each pack's step is rescaled by
    ``lr_p / lr_0``, since Adam's update is linear in the learning rate.
    """

    def __init__(self, model: OrthoGNN, lr: Tensor, weight_decay: Tensor) -> None:
        self.params = [p for p in model.parameters() if p.requires_grad]
        for param in self.params:  # per-pack rates need every parameter split by pack
            check(param.dim() >= 1 and param.shape[0] == model.packs,
                  f"parameter of shape {tuple(param.shape)} is not split by pack")
        uniform_decay = bool((weight_decay == weight_decay[0]).all())
        self.decay = None if uniform_decay else weight_decay
        self.scale = None if bool((lr == lr[0]).all()) else lr / lr[0]
        self.adam = torch.optim.Adam(
            self.params, lr=float(lr[0]), weight_decay=float(weight_decay[0]) if uniform_decay else 0.0
        )

    def zero_grad(self) -> None:
        self.adam.zero_grad(set_to_none=True)

    @torch.no_grad()
    def step(self) -> None:
        if self.decay is not None:
            for param in self.params:
                if param.grad is not None:
                    param.grad.add_(param * _per_pack(self.decay, param))
        if self.scale is None:
            self.adam.step()
            return
        before = [p.clone() for p in self.params]
        self.adam.step()
        for param, old in zip(self.params, before):  # old + (lr_p / lr_0) * Adam's step
            param.copy_(old.lerp_(param, _per_pack(self.scale, param)))


def _per_pack(values: Tensor, like: Tensor) -> Tensor:
    """``[packs]`` values shaped to broadcast over a ``[packs, ...]`` tensor."""
    return values.view(-1, *([1] * (like.dim() - 1)))


class _PackTrainer:
    def __init__(self, configs: list[TrainConfig], data: NodeData, device: torch.device) -> None:
        self.configs, self.data, self.device = configs, data, device
        self.owner = [i for i, c in enumerate(configs) for _ in c.runs()]
        runs = [run for c in configs for run in c.runs()]
        self.results = [RunResult(split, seed) for split, seed in runs]
        first = configs[0]
        ortho = [c.ortho_settings() for c in configs for _ in c.runs()] if first.ortho else None
        torch.manual_seed(runs[0][1])  # dropout's stream; weights come from per-run seeds
        self.model = build_node_model(first, data.x.shape[1], data.num_classes, [seed for _, seed in runs],
                                      ortho).to(device)
        self.x = node_features(data.x)  # sparse bag-of-words: sparse input projection
        self.adj = adjacency(data.adj)
        per_run = {key: torch.tensor([getattr(configs[i], key) for i in self.owner], device=device)
                   for key in ("lr", "weight_decay", "epochs", "patience")}
        self.optimizer = _PackAdam(self.model, per_run["lr"], per_run["weight_decay"])
        self.max_epochs, self.patience = per_run["epochs"], per_run["patience"]
        self.train_mask, self.val_mask, self.test_mask = data.masks([s for s, _ in runs])
        self.best_state = {k: v.detach().clone() for k, v in self.model.state_dict().items()}
        packs = len(runs)
        self.best_val = torch.full((packs,), -1.0, device=device)
        self.best_test = torch.full((packs,), float("nan"), device=device)
        self.best_epoch = torch.zeros(packs, dtype=torch.long, device=device)
        self.epochs_run = torch.zeros(packs, dtype=torch.long, device=device)
        self.failed = torch.zeros(packs, dtype=torch.bool, device=device)

    def fit(self, on_epoch: EpochCallback | None) -> list[ConfigResult]:
        active = torch.ones(len(self.results), dtype=torch.bool, device=self.device)
        since_best = torch.zeros_like(self.best_epoch)
        start, epoch = time.perf_counter(), 0
        while bool(active.any()):
            epoch += 1
            loss = self._step(active, epoch)
            val, test = self._evaluate(active, epoch)
            improved = active & (val > self.best_val)
            self._remember(improved, val, test, epoch)
            since_best = torch.where(improved, 0, since_best + 1)
            self.epochs_run[active] = epoch
            active &= (since_best < self.patience) & (epoch < self.max_epochs) & ~self.failed
            if on_epoch is not None:
                self._stop(on_epoch(self._report(epoch, loss, val, test, active)) or (), active, epoch)
        seconds = time.perf_counter() - start
        self._finish()
        return self._group(seconds, epoch)

    def _stop(self, configs: Iterable[int], active: Tensor, epoch: int) -> None:
        """Stop every run of these configs where it is; its results stay frozen."""
        for p, owner in enumerate(self.owner):
            if owner in configs and bool(active[p]):
                active[p] = False
                self.results[p].status, self.results[p].reason = Status.STOPPED, f"stopped by ASHA at epoch {epoch}"

    def _step(self, active: Tensor, epoch: int) -> Tensor:
        self.model.train()
        self.optimizer.zero_grad()
        out = self.model.run(self.x, *self.adj)
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
        out = self.model.run(self.x, *self.adj)
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
        failing = failing & ~self.failed
        if not bool(failing.any()):
            return
        self.failed |= failing
        for p in torch.nonzero(failing).flatten().tolist():
            bad_weight = any(not bool(torch.isfinite(w[p]).all()) for w in weights)
            what = "Ortho-GConv weight (Newton iteration overflow)" if bad_weight else "loss"
            self.results[p].status = Status.FAILED
            self.results[p].reason = f"non-finite {what} at epoch {epoch}"

    def _remember(self, improved: Tensor, val: Tensor, test: Tensor, epoch: int) -> None:
        """Keep each improved run's accuracies and weights (only its own pack slice)."""
        if not bool(improved.any()):
            return
        self.best_val = torch.where(improved, val, self.best_val)
        self.best_test = torch.where(improved, test, self.best_test)
        self.best_epoch = torch.where(improved, epoch, self.best_epoch)
        packs = torch.nonzero(improved).flatten()
        for key, value in self.model.state_dict().items():
            self.best_state[key][packs] = value.detach()[packs]

    def _finish(self) -> None:
        """Write each run's result; steadiness metrics of its validation-best model."""
        for p, result in enumerate(self.results):
            result.epochs = int(self.epochs_run[p])
            if int(self.best_epoch[p]) > 0:
                result.best_epoch = int(self.best_epoch[p])
                result.val_acc, result.test_acc = float(self.best_val[p]), float(self.best_test[p])
        self.model.load_state_dict(self.best_state)
        self.model.eval()
        out = self.model.run(self.x, *self.adj)
        loss = self._losses(out.logits, self.train_mask)
        norms = layer_gradient_norms(loss.sum(), out.weights)
        m_sig = signal_magnification(out.first, out.last).detach()
        smooth = smoothness(out.last.detach())
        for p, result in enumerate(self.results):
            if result.status != Status.FAILED:
                result.m_sig, result.smoothness = float(m_sig[p]), float(smooth[p])
                result.grad_norms = [float(v) for v in norms[p]]

    def _report(self, epoch, loss, val, test, active) -> EpochReport:
        def per_config(values: Tensor) -> list[list[float]]:
            flat = values.tolist()
            return [[flat[p] for p, o in enumerate(self.owner) if o == i]
                    for i in range(len(self.configs))]

        best = per_config(torch.where(self.best_epoch > 0, self.best_val, float("nan")))
        alive = per_config(active.float())
        return EpochReport(
            epoch, per_config(loss), per_config(val), per_config(test),
            [mean_or_zero(b) for b in best], [any(a) for a in alive], self._snapshot(),
        )

    def _snapshot(self) -> list[list[RunResult]]:
        """Each run as it stands: accuracies at its validation-best epoch so far."""
        val, test = self.best_val.tolist(), self.best_test.tolist()
        best_epoch, epochs = self.best_epoch.tolist(), self.epochs_run.tolist()
        runs = [dataclasses.replace(r, epochs=epochs[p], best_epoch=best_epoch[p],
                                    val_acc=val[p] if best_epoch[p] else math.nan,
                                    test_acc=test[p] if best_epoch[p] else math.nan)
                for p, r in enumerate(self.results)]
        return [[r for r, o in zip(runs, self.owner) if o == i] for i in range(len(self.configs))]

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
