"""The one training loop: epochs, selection, patience, failure, stopping, packing.

Both tasks plug in here. A task splits its runs (the repeats of its configs) into
:class:`Pack` objects: a batched model whose *slots* each train one run (node
classification puts many runs in one pack; graph classification one run per pack). The
loop drives every pack one epoch at a time, in lock-step, and keeps the bookkeeping of
every run on the device, so that no epoch waits for the host:

- selection: ``val_acc`` (the first epoch with the highest validation accuracy: later
  epochs must beat it strictly), ``val_loss`` (the first epoch with the lowest validation
  loss) or ``train_pass_val_loss`` (that of the training pass, dropout and DropEdge on:
  DropEdge's code); test accuracy and the evaluation's validation loss are read at that
  epoch and never influence anything;
- patience: a run stops after ``patience`` epochs without a strictly better selection
  metric, or at ``epochs``;
- failure: the first non-finite loss, output or Ortho-GConv weight fails the run (its
  result stays frozen at its selected epoch, with the reason);
- stopping: the epoch callback may return configs to stop (ASHA's verdicts).

The host looks at the device only at *sync points*: after every epoch when a callback
wants a report, else every ``sync_every`` epochs (and the last). There it ends training
when no run is active and *compacts* packs: once at most ``compact_below`` of a pack's
slots are active, the finished slots get their steadiness metrics and leave the batch,
so their compute stops. Between sync points a finished run may keep computing for a
few epochs; its bookkeeping is frozen by the device-side ``active`` mask, so results
never depend on the sync cadence.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import torch
from torch import Tensor, nn

from orthotune.core import (
    LOSS_SELECTIONS,
    PASS_SELECTION,
    EpochCallback,
    EpochReport,
    EpochValues,
    RunResult,
    Status,
    TrainConfig,
    mean_or_zero,
)
from orthotune.training._options import DEFAULT_OPTIONS, TrainOptions

#: Failure codes a pack reports per slot (0: none); the loop keeps the first.
LOSS, OUTPUT, WEIGHT = 1, 2, 3
_FAULTS = {LOSS: "loss", OUTPUT: "output", WEIGHT: "Ortho-GConv weight (Newton iteration overflow)"}


class Outcome(NamedTuple):
    """One epoch of a pack, per slot, on the device."""

    loss: Tensor  # training loss (with the Ortho-GConv penalty)
    val_acc: Tensor
    val_loss: Tensor
    test_acc: Tensor
    fault: Tensor  # long: 0, or the first of LOSS/OUTPUT/WEIGHT seen this epoch
    grad_norms: Tensor | None = None  # [slots, layers] ||dL/dW(l)||_F, when asked to record
    pass_val_loss: Tensor | None = None  # the training pass's validation loss (selection train_pass_val_loss)


class Step(NamedTuple):
    """A pack's training step, per slot, on the device: loss, failure code, gradient norms when
    recorded, and the pass's own validation loss where a slot selects by it."""

    loss: Tensor
    fault: Tensor
    grad_norms: Tensor | None = None
    pass_val_loss: Tensor | None = None


@dataclass(frozen=True)
class Steadiness:
    """Steadiness metrics of a run's selected weights."""

    m_sig: float
    smoothness: float
    grad_norms: list[float]


class Pack(Protocol):
    """A batched model training ``runs`` (one per slot, in slot order)."""

    runs: list[int]
    seconds: float  # host wall time spent in its epochs

    def epoch(self, epoch: int, active: Tensor, record_grads: bool = False) -> Outcome:
        """Train one epoch and evaluate; ``active`` marks the slots still training; with
        ``record_grads`` the outcome carries the training step's per-layer gradient norms."""

    def keep_best(self, improved: Tensor) -> None:
        """Remember the current weights of the ``improved`` slots as their selected ones."""

    def finish(self, slots: Sequence[int]) -> list[Steadiness]:
        """Steadiness metrics of the selected weights of these slots."""

    def drop(self, keep: Sequence[int]) -> None:
        """Keep only these slots (compaction); the others' compute stops."""


@dataclass(frozen=True)
class Run:
    """One repeat of one config, as the loop sees it."""

    owner: int  # index of its config in the call
    config: TrainConfig
    split: int
    seed: int


class Rng:
    """A pack's own global random stream (dropout), swapped in while the pack computes, so
    packs trained in lock-step do not draw from each other's streams."""

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


def runs_of(configs: Sequence[TrainConfig]) -> list[Run]:
    return [Run(i, c, split, seed) for i, c in enumerate(configs) for split, seed in c.runs()]


def faults_of(weights: Sequence[Tensor], slots: int) -> Tensor:
    """Per slot: does any ``[slots, ...]`` weight hold a non-finite value (3 kernels)."""
    if not weights:
        return torch.zeros(slots, dtype=torch.bool)
    flat = torch.cat([w.detach().reshape(slots, -1) for w in weights], dim=1)
    return ~torch.isfinite(flat).all(dim=1)


def fault_codes(bad: Tensor, weights_bad: Tensor, code: int) -> Tensor:
    """``code`` where ``bad`` (``WEIGHT`` when the weights are the cause), else 0."""
    return torch.where(bad, torch.where(weights_bad.to(bad.device), WEIGHT, code), 0)


class _Book:
    """Every run's selection, patience and failure state, as device tensors."""

    def __init__(self, runs: Sequence[Run], device: torch.device) -> None:
        def per_run(values, dtype=torch.float32) -> Tensor:
            return torch.tensor(values, dtype=dtype, device=device)

        count = len(runs)
        self.by_loss = per_run([r.config.selection in LOSS_SELECTIONS for r in runs], torch.bool)
        self.by_pass_loss = per_run([r.config.selection == PASS_SELECTION for r in runs], torch.bool)
        self.max_epochs = per_run([r.config.epochs for r in runs], torch.long)
        self.patience = per_run([r.config.patience for r in runs], torch.long)
        self.active = torch.ones(count, dtype=torch.bool, device=device)
        self.score = per_run([-math.inf] * count)
        nan = [math.nan] * count
        self.best_val, self.best_val_loss, self.best_test = per_run(nan), per_run(nan), per_run(nan)
        self.loss, self.val, self.val_loss, self.test = per_run(nan), per_run(nan), per_run(nan), per_run(nan)
        zeros = [0] * count
        self.best_epoch, self.since, self.epochs = (per_run(zeros, torch.long) for _ in range(3))
        self.fault_epoch, self.fault = per_run(zeros, torch.long), per_run(zeros, torch.long)

    def update(self, index: Tensor, out: Outcome, epoch: int) -> Tensor:
        """Account one epoch of the runs ``index``; returns which improved (device)."""
        active, failed_before = self.active[index], self.fault_epoch[index] > 0
        new_fault = active & ~failed_before & (out.fault > 0)
        self._set("fault_epoch", index, torch.where(new_fault, epoch, self.fault_epoch[index]))
        self._set("fault", index, torch.where(new_fault, out.fault, self.fault[index]))
        healthy = active & ~failed_before & ~new_fault
        loss = out.val_loss if out.pass_val_loss is None else \
            torch.where(self.by_pass_loss[index], out.pass_val_loss, out.val_loss)
        score = torch.where(self.by_loss[index], -loss, out.val_acc)
        improved = healthy & (score > self.score[index])
        for name, value in (("score", score), ("best_val", out.val_acc), ("best_val_loss", out.val_loss),
                            ("best_test", out.test_acc)):
            self._set(name, index, torch.where(improved, value, getattr(self, name)[index]))
        self._set("best_epoch", index, torch.where(improved, epoch, self.best_epoch[index]))
        since = torch.where(improved, 0, self.since[index] + active.long())
        self._set("since", index, since)
        self._set("epochs", index, torch.where(active, epoch, self.epochs[index]))
        for name, value in (("loss", out.loss), ("val", out.val_acc), ("val_loss", out.val_loss),
                            ("test", out.test_acc)):
            self._set(name, index, torch.where(active, value.detach(), getattr(self, name)[index]))
        still = healthy & (since < self.patience[index]) & (epoch < self.max_epochs[index])
        self._set("active", index, still)
        return improved

    def trace(self, epoch: int) -> Tensor:
        """This epoch's values of every run, ``[5, runs]`` on the device (no host sync): loss,
        validation accuracy, test accuracy, validation loss, and 1 where the run trained."""
        trained = (self.epochs == epoch).to(self.loss.dtype)
        return torch.stack([self.loss, self.val, self.test, self.val_loss, trained])

    def _set(self, name: str, index: Tensor, values: Tensor) -> None:
        getattr(self, name).index_copy_(0, index, values.to(getattr(self, name).dtype))

    def host(self) -> dict[str, list]:
        """Everything the host needs, in one device-to-host copy."""
        names = ("loss", "val", "val_loss", "test", "best_val", "best_val_loss", "best_test",
                 "best_epoch", "epochs", "active", "fault_epoch", "fault")
        stacked = torch.stack([getattr(self, n).to(torch.float64) for n in names]).tolist()
        values = dict(zip(names, stacked))
        for name in ("best_epoch", "epochs", "fault_epoch", "fault"):
            values[name] = [int(v) for v in values[name]]
        values["active"] = [bool(v) for v in values["active"]]
        return values


@dataclass
class LoopResult:
    """Each run's result, with the wall time and the epochs the loop ran."""

    results: list[RunResult]
    seconds: float
    epochs: int


class TrainingLoop:
    """Drives packs to the end; see the module docstring for the protocol."""

    def __init__(self, runs: Sequence[Run], packs: Sequence[Pack], device: torch.device,
                 options: TrainOptions = DEFAULT_OPTIONS, sync_every: int | None = None) -> None:
        self.runs, self.packs, self.device, self.options = list(runs), list(packs), device, options
        self.sync_every = sync_every or options.sync_every
        self.results = [RunResult(r.split, r.seed) for r in self.runs]
        self.configs = max((r.owner for r in self.runs), default=-1) + 1
        self.book = _Book(self.runs, device)
        self.index = {id(p): self._index(p) for p in self.packs}
        self.stopped: dict[int, int] = {}  # run -> epoch ASHA stopped it
        self.trace: list[tuple[int, Tensor, Tensor | None]] = []  # epochs since the last report

    def _index(self, pack: Pack) -> Tensor:
        return torch.tensor(pack.runs, dtype=torch.long, device=self.device)

    def run(self, on_epoch: EpochCallback | None = None) -> LoopResult:
        start, epoch = time.perf_counter(), 0
        last = max(r.config.epochs for r in self.runs)
        cadence = self.options.report_every if on_epoch is not None else self.sync_every
        every = self.options.grad_norms_every
        while self.packs and epoch < last:
            epoch += 1
            record = on_epoch is not None and every > 0 and epoch % every == 0
            grads = None
            for pack in self.packs:
                index = self.index[id(pack)]
                out = pack.epoch(epoch, self.book.active[index], record)
                pack.keep_best(self.book.update(index, out, epoch))
                if record and out.grad_norms is not None:
                    if grads is None:  # NaN for runs whose pack did not record
                        grads = torch.full((len(self.runs), out.grad_norms.shape[1]), math.nan, device=self.device)
                    grads.index_copy_(0, index, out.grad_norms.to(grads))
            if on_epoch is not None:
                self.trace.append((epoch, self.book.trace(epoch), grads))
            if epoch % cadence == 0 or epoch == last:
                self._sync(epoch, on_epoch)
        seconds = time.perf_counter() - start
        self._close(self.packs, self.book.host())
        self.packs = []
        self._write(self.book.host())
        return LoopResult(self.results, seconds, epoch)

    def _sync(self, epoch: int, on_epoch: EpochCallback | None) -> None:
        """The host's look: report, apply stops, end finished packs, compact the rest."""
        values = self.book.host()
        if on_epoch is not None:
            stops = on_epoch(self._report(epoch, values)) or ()
            if self._stop(set(stops), epoch, values):
                values = self.book.host()
        active = values["active"]
        for pack in list(self.packs):
            live = [s for s, run in enumerate(pack.runs) if active[run]]
            if not live:
                self._close([pack], values)
                self.packs.remove(pack)
            elif len(live) <= self.options.compact_below * len(pack.runs):
                self._finish(pack, [s for s in range(len(pack.runs)) if not active[pack.runs[s]]], values)
                pack.drop(live)
                pack.runs = [pack.runs[s] for s in live]
                self.index[id(pack)] = self._index(pack)

    def _stop(self, configs: set[int], epoch: int, values: dict[str, list]) -> bool:
        """The scheduler stopped these configs: their active runs stop where they are."""
        runs = [i for i, r in enumerate(self.runs) if r.owner in configs and values["active"][i]]
        for i in runs:
            self.stopped[i] = epoch
        if runs:
            self.book.active[torch.tensor(runs, device=self.device)] = False
        return bool(runs)

    def _close(self, packs: Sequence[Pack], values: dict[str, list]) -> None:
        for pack in packs:
            self._finish(pack, range(len(pack.runs)), values)

    def _finish(self, pack: Pack, slots: Sequence[int], values: dict[str, list]) -> None:
        """Steadiness metrics of the selected weights of these slots (not of failed runs)."""
        healthy = [s for s in slots if values["fault_epoch"][pack.runs[s]] == 0]
        if not healthy:
            return
        for slot, metrics in zip(healthy, pack.finish(healthy)):
            result = self.results[pack.runs[slot]]
            result.m_sig, result.smoothness, result.grad_norms = metrics.m_sig, metrics.smoothness, metrics.grad_norms

    def _write(self, values: dict[str, list]) -> None:
        for i, result in enumerate(self.results):
            self._fill(result, i, values)

    def _fill(self, result: RunResult, i: int, values: dict[str, list]) -> RunResult:
        result.epochs = values["epochs"][i]
        if values["best_epoch"][i] > 0:
            result.best_epoch = values["best_epoch"][i]
            result.val_acc, result.test_acc = values["best_val"][i], values["best_test"][i]
            result.val_loss = values["best_val_loss"][i]
        if values["fault_epoch"][i] > 0:
            result.status = Status.FAILED
            result.reason = f"non-finite {_FAULTS[values['fault'][i]]} at epoch {values['fault_epoch'][i]}"
        elif i in self.stopped:
            result.status, result.reason = Status.STOPPED, f"stopped by ASHA at epoch {self.stopped[i]}"
        return result

    def _history(self, per_config) -> list[EpochValues]:
        """The epochs since the last report, read from the device in one copy each."""
        if not self.trace:
            return []
        epochs = [epoch for epoch, _, _ in self.trace]
        values = torch.stack([v for _, v, _ in self.trace]).tolist()  # [epochs, 5, runs]
        grads = [g.tolist() if g is not None else None for _, _, g in self.trace]
        self.trace = []
        history = []
        for epoch, (loss, val, test, val_loss, trained), norms in zip(epochs, values, grads):
            rows = norms if norms is not None else [[]] * len(loss)
            layers = [row if row and not math.isnan(row[0]) else [] for row in rows]  # NaN: not recorded
            history.append(EpochValues(epoch, per_config(loss), per_config(val), per_config(test),
                                       per_config(val_loss), per_config([t > 0 for t in trained]),
                                       per_config(layers)))
        return history

    def _report(self, epoch: int, values: dict[str, list]) -> EpochReport:
        def per_config(items: list) -> list[list]:
            grouped: list[list] = [[] for _ in range(self.configs)]
            for run, item in zip(self.runs, items):
                grouped[run.owner].append(item)
            return grouped

        selected = [v if e > 0 else math.nan for v, e in zip(values["best_val"], values["best_epoch"])]
        snapshot = [self._fill(dataclasses.replace(r), i, values) for i, r in enumerate(self.results)]
        return EpochReport(
            epoch, per_config(values["loss"]), per_config(values["val"]), per_config(values["test"]),
            [mean_or_zero(b) for b in per_config(selected)], [any(a) for a in per_config(values["active"])],
            per_config(snapshot), val_loss=per_config(values["val_loss"]), history=self._history(per_config),
        )


def decay_groups(model: nn.Module, params: Sequence[nn.Parameter], configs: Sequence[TrainConfig],
                 ) -> list[tuple[list[nn.Parameter], list[float]]]:
    """``params`` split into the hidden, input and output layers' (the model's
    ``input_parameters()``/``output_parameters()``), each with its weight decay per config:
    ``weight_decay``, ``weight_decay_io`` and ``weight_decay_output`` (each unset one falls
    back to the one before it)."""
    inputs = {id(p) for p in model.input_parameters()}
    outputs = {id(p) for p in model.output_parameters()}
    io = [c.weight_decay if c.weight_decay_io is None else c.weight_decay_io for c in configs]
    out = [d if c.weight_decay_output is None else c.weight_decay_output for c, d in zip(configs, io)]
    return [
        ([p for p in params if id(p) not in inputs and id(p) not in outputs], [c.weight_decay for c in configs]),
        ([p for p in params if id(p) in inputs], io),
        ([p for p in params if id(p) in outputs], out),
    ]


def adam_groups(model: nn.Module, config: TrainConfig) -> list[dict]:
    """Adam's parameter groups of a one-config model (a pack of one slot): the hidden layers
    take ``weight_decay``, the input layer ``weight_decay_io``, the output layer
    ``weight_decay_output`` (:func:`decay_groups`); empty groups left out."""
    trained = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": params, "weight_decay": decays[0]}
              for params, decays in decay_groups(model, trained, [config])]
    return [g for g in groups if g["params"]]

