"""Result types every layer shares: a trial's status, a repeat's result, a config's result.

A *repeat* is one split, seed or fold of a config; a config's objective is the mean
validation value over its repeats. Status is one enum (a ``str``, so it goes to JSON and
Parquet as its value).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from orthotune.core._config import TrainConfig


class Status(StrEnum):
    """How a trial (or one repeat of it) ended. Failure outranks stopping outranks completion."""

    COMPLETED = "completed"
    STOPPED = "stopped"  # by the scheduler (ASHA) before its own end
    FAILED = "failed"  # non-finite loss or weight, or an error

    @classmethod
    def worst(cls, statuses: Iterable[Status | str]) -> Status:
        """The status of a whole from its parts: failed, else stopped, else completed."""
        present = {cls(s) for s in statuses}
        return next((s for s in (cls.FAILED, cls.STOPPED) if s in present), cls.COMPLETED)


class SearchState(StrEnum):
    """Where a whole search stands, as its record in the store says."""

    RUNNING = "running"  # a driver holds its lease (``status`` tells a live one from a dead one)
    FINISHED = "finished"  # every planned trial ended
    INTERRUPTED = "interrupted"  # Ctrl-C or SIGTERM: ``launch --resume NAME`` continues it
    CRASHED = "crashed"  # the driver raised; the record says why


@dataclass
class RunResult:
    """One repeat (split, seed or fold) of one config, read at its selected epoch."""

    split: int
    seed: int
    status: Status = Status.COMPLETED
    reason: str = ""
    val_acc: float = float("nan")
    test_acc: float = float("nan")
    val_loss: float = float("nan")
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
    def status(self) -> Status:
        return Status.worst(r.status for r in self.runs)

    @property
    def reason(self) -> str:
        return next((r.reason for r in self.runs if r.status != Status.COMPLETED), "")

    def mean(self, key: str) -> float:
        return mean([getattr(r, key) for r in self.runs])

    def std(self, key: str) -> float:
        return std([getattr(r, key) for r in self.runs])


@dataclass
class EpochValues:
    """One epoch's values, per config and run (``[config][run]``). ``trained`` marks the runs
    that trained in that epoch (the others' values are their last ones); ``grad_norms`` holds
    each run's per-layer gradient norms ``||dL/dW(l)||_F`` where they were recorded (every
    ``grad_norms_every`` epochs), else an empty list."""

    epoch: int
    train_loss: list[list[float]]
    val_acc: list[list[float]]
    test_acc: list[list[float]]
    val_loss: list[list[float]]
    trained: list[list[bool]]
    grad_norms: list[list[list[float]]]


@dataclass
class EpochReport:
    """What a callback sees at each report: one entry per config in the call; ``history``
    holds every epoch since the previous report (the host reads them in one copy)."""

    epoch: int
    train_loss: list[list[float]]  # [config][run]
    val_acc: list[list[float]]
    test_acc: list[list[float]]
    best_val: list[float]  # per config: mean over runs of the selected validation accuracy so far
    active: list[bool]  # per config: still training
    runs: list[list[RunResult]] = field(default_factory=list)  # per config and run, so far
    val_loss: list[list[float]] = field(default_factory=list)  # [config][run], validation loss
    history: list[EpochValues] = field(default_factory=list)  # the epochs since the last report


#: Called at each report (every ``report_every`` epochs); may return the indices of configs
#: to stop now (ASHA's verdicts).
EpochCallback = Callable[[EpochReport], Iterable[int] | None]


def mean(values: Sequence[float]) -> float:
    """The mean, NaN for no values (one helper for every layer)."""
    return float(statistics.fmean(values)) if len(values) else math.nan


def std(values: Sequence[float]) -> float:
    """Sample std over repeats (ddof = 1), as the papers' mean +- std; NaN for fewer than two
    values or when any is NaN (a repeat that failed before its first measurement).
    ``statistics.stdev`` raises on NaN rather than returning it, hence the guard."""
    if len(values) < 2 or any(math.isnan(v) for v in values):
        return math.nan
    return float(statistics.stdev(values))


def mean_or_zero(values: Sequence[float]) -> float:
    """Mean counting NaN (not yet selected) repeats as 0; 0 if none is selected yet."""
    finite = [v for v in values if not math.isnan(v)]
    return sum(finite) / len(values) if finite else 0.0
