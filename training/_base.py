"""The trainers' shared base (PyG's ``BasicGNN`` pattern: the base runs, a task fills hooks).

A task's trainer derives from :class:`BaseTrainer` and says how its runs become packs
(:meth:`~BaseTrainer.packs`); the base runs them through the one loop (:mod:`._loop`) under
the execution switches and gathers one result per config. A task's pack derives from
:class:`BasePack` and supplies a training step and an evaluation; the base runs an epoch
(the step on the pack's own dropout stream, the evaluation, the first failure of the two,
the wall time). :class:`OneRunPack` is a pack of one slot (a graph fold, a PyG model or a
user's factory): its selected weights and its optimiser come from the base as well.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import Tensor, nn

from orthotune.core import ConfigResult, EpochCallback, TrainConfig
from orthotune.training._loop import (
    LOSS,
    OUTPUT,
    LoopResult,
    Outcome,
    Pack,
    Rng,
    Run,
    Step,
    TrainingLoop,
    adam_groups,
    fault_codes,
    faults_of,
    runs_of,
)
from orthotune.training._options import DEFAULT_OPTIONS, TrainOptions, execution

#: Eager epochs a pack trains before its epoch is captured as a CUDA graph
#: (``TrainOptions.cuda_graph``): Adam's state and cuBLAS's and cuSPARSE's handles and
#: workspaces exist before capture, as CUDA graphs require.
GRAPH_WARM_UP = 2


class EpochGraph(NamedTuple):
    """A pack's captured epoch: the graph, its input (the active slots) and its outputs,
    which every replay overwrites (the loop copies what it keeps before the next)."""

    graph: torch.cuda.CUDAGraph
    active: Tensor
    outcome: Outcome

    def replay(self, active: Tensor) -> Outcome:
        self.active.copy_(active)
        self.graph.replay()
        return self.outcome


class BasePack:
    """A batched model training ``runs`` (the call's run indices, one per slot), as the loop
    drives it (:class:`~._loop.Pack`). Hooks: :meth:`train_step`, :meth:`evaluate`, and the
    loop's ``keep_best``, ``finish`` and ``drop``; a pack that sets ``graphing`` (CUDA graphs,
    ``TrainOptions.cuda_graph``) also :meth:`before_capture` and :meth:`captured_evaluation`,
    and calls :meth:`forget_graph` when its model changes."""

    graphing = False  # capture the epoch as a CUDA graph after GRAPH_WARM_UP eager epochs

    def __init__(self, runs: list[int], seed: int, device: torch.device) -> None:
        self.runs, self.seconds = runs, 0.0  # seconds: host wall time spent in its epochs
        self.rng = Rng(seed, device)  # dropout's stream; weights come from per-run seeds
        self.graph: EpochGraph | None = None
        self.eager_epochs = 0  # since the model was built

    def epoch(self, epoch: int, active: Tensor, record_grads: bool = False) -> Outcome:
        """Train one epoch on the pack's own random stream, then evaluate; ``active`` marks the
        slots still training; with ``record_grads`` the outcome carries the training step's
        per-layer gradient norms. A graphing pack replays its captured epoch instead (an
        epoch that records gradient norms stays eager)."""
        if self.graphing and not record_grads:
            out = self._graph_epoch(active)
            if out is not None:
                return out
        start = time.perf_counter()
        with self.rng.active():
            step = self.train_step(active, record_grads)
        val_acc, val_loss, test_acc, eval_fault = self.evaluate()
        self.seconds += time.perf_counter() - start
        return Outcome(step.loss, val_acc, val_loss, test_acc, first_fault(step.fault, eval_fault), step.grad_norms,
                       step.pass_val_loss)

    def _graph_epoch(self, active: Tensor) -> Outcome | None:
        """A replay of the captured epoch, capturing it first once the warm-up is over; None
        where this epoch is eager (the warm-up, or a capture that failed)."""
        if self.graph is None:
            if self.eager_epochs < GRAPH_WARM_UP:
                self.eager_epochs += 1
                return None
            self.graph = self._capture(active)
            if self.graph is None:
                self.graphing = False
                return None
        start = time.perf_counter()
        out = self.graph.replay(active)
        self.seconds += time.perf_counter() - start
        return out

    def _capture(self, active: Tensor) -> EpochGraph | None:
        """The epoch captured as a CUDA graph (nothing runs while capturing), or None with a
        warning where some operation cannot be captured. Dropout in the graph draws from the
        pack's :meth:`random_streams` where it has them, registered with the graph (each replay
        advances them; torch without the registration fails the capture: eager), else from
        the process's CUDA generator (graphs replay the default one), not the pack's stream."""
        self.before_capture()
        static_active = active.clone()
        graph = torch.cuda.CUDAGraph()
        register = getattr(graph, "register_generator_state", None)
        for stream in self.random_streams():
            if register is not None:
                register(stream)
        try:
            with torch.cuda.graph(graph):
                step = self.train_step(static_active, False)
                val_acc, val_loss, test_acc, eval_fault = self.captured_evaluation()
                outcome = Outcome(step.loss, val_acc, val_loss, test_acc, first_fault(step.fault, eval_fault),
                                  None, step.pass_val_loss)
        except RuntimeError as error:
            message = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            warnings.warn(f"cuda_graph: the epoch could not be captured, training eagerly ({message})",
                          RuntimeWarning, stacklevel=3)
            return None
        return EpochGraph(graph, static_active, outcome)

    def random_streams(self) -> list[torch.Generator]:
        """Generators the pack's step draws from besides torch's default one (a captured
        epoch registers them)."""
        return []

    def before_capture(self) -> None:
        """Drop what an eager epoch left for the next one (a captured epoch computes its own)."""

    def captured_evaluation(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """The evaluation as the captured epoch runs it (:meth:`evaluate` unless a pack says)."""
        return self.evaluate()

    def forget_graph(self) -> None:
        """The model changed (a compaction): capture again after a new warm-up."""
        self.graph, self.eager_epochs = None, 0

    def train_step(self, active: Tensor, record_grads: bool) -> Step:
        """Per slot: the training loss, the failure code (:meth:`loss_fault`), with
        ``record_grads`` the ``[slots, layers]`` gradient norms, and where a slot selects by it
        (``selection: train_pass_val_loss``) the training pass's validation loss."""
        raise NotImplementedError

    def evaluate(self) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """Per slot: validation accuracy and loss, test accuracy, failure code (:meth:`output_fault`)."""
        raise NotImplementedError

    def loss_fault(self, bad: Tensor, weights: Sequence[Tensor]) -> Tensor:
        """The failure code of a non-finite training loss (``bad`` per slot), or of its weights."""
        return fault_codes(bad, faults_of(weights, len(self.runs)), LOSS)

    def output_fault(self, bad: Tensor, weights: Sequence[Tensor]) -> Tensor:
        """The failure code of a non-finite evaluation output (``bad`` per slot), or of its weights."""
        return fault_codes(bad, faults_of(weights, len(self.runs)), OUTPUT)


def first_fault(fault: Tensor, new: Tensor) -> Tensor:
    """The first failure code seen."""
    return torch.where(fault > 0, fault, new)


class OneRunPack(BasePack):
    """One run as a pack of one slot: its model (``self.model``, built by the task), its
    selected weights and its Adam (the hidden, input and output layers each with their own
    weight decay). Never compacted: it ends."""

    model: nn.Module

    def __init__(self, run: Run, index: int, device: torch.device) -> None:
        super().__init__([index], run.seed, device)

    def adam(self, config: TrainConfig, **options) -> torch.optim.Adam:
        return torch.optim.Adam(adam_groups(self.model, config), lr=config.lr, **options)

    def state(self) -> dict[str, Tensor]:
        """The tensors the selected weights keep (the model's state dict unless a task says)."""
        return self.model.state_dict()

    def snapshot(self) -> dict[str, Tensor]:
        """A copy of :meth:`state`: the selected weights before the first epoch."""
        return {k: v.detach().clone() for k, v in self.state().items()}

    @torch.no_grad()
    def keep_best(self, improved: Tensor) -> None:
        """The current weights become the selected ones if ``improved`` (no host sync)."""
        for key, value in self.state().items():
            self.best[key].copy_(torch.where(improved[0], value, self.best[key]))

    def drop(self, keep: Sequence[int]) -> None:
        raise AssertionError("a pack of one slot ends, it is never compacted")


class BaseTrainer:
    """A task's trainer: its runs in packs (:meth:`packs`), driven to the end by the one loop
    under the execution switches (precision, determinism), one result per config
    (:meth:`results`). ``sync_every``: the loop's host checks; 1 for packs of one run (their
    mini-batches or models come from the host anyway, so finished runs stop at once), None
    for the options' cadence."""

    sync_every: int | None = 1

    def __init__(self, device: torch.device, options: TrainOptions = DEFAULT_OPTIONS) -> None:
        self.device, self.options = device, options

    def train(self, configs: Sequence[TrainConfig], on_epoch: EpochCallback | None = None) -> list[ConfigResult]:
        runs = runs_of(configs)
        with execution(self.options, self.device):
            packs = self.packs(runs)
            outcome = TrainingLoop(runs, packs, self.device, self.options, self.sync_every).run(on_epoch)
        return self.results(configs, runs, packs, outcome)

    def packs(self, runs: list[Run]) -> list[Pack]:
        """The packs that train ``runs``."""
        raise NotImplementedError

    def results(self, configs: Sequence[TrainConfig], runs: Sequence[Run], packs: Sequence[Pack],
                outcome: LoopResult) -> list[ConfigResult]:
        """One :class:`ConfigResult` per config from packs of one slot each (a run per pack,
        with its own ``seconds``); ``seconds_per_epoch`` is per run-epoch, train and evaluation."""
        seconds = {p.runs[0]: p.seconds for p in packs}
        results = []
        for i, config in enumerate(configs):
            members = [k for k, run in enumerate(runs) if run.owner == i]
            total = sum(seconds[k] for k in members)
            epochs = sum(outcome.results[k].epochs for k in members)
            results.append(ConfigResult(config, [outcome.results[k] for k in members], seconds=total,
                                        seconds_per_epoch=total / max(epochs, 1), device=str(self.device)))
        return results
