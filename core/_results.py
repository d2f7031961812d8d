"""Result types every layer shares: a trial's status, a repeat's result, a config's result,
and the store columns they give, declared once.

A *repeat* is one split, seed or fold of a config; a config's objective is the mean
validation value over its repeats (:data:`OBJECTIVE`). Status is one enum (a ``str``, so it
goes to JSON and Parquet as its value).

Each value of a repeat (:class:`RunResult`) and of a config's result (:class:`ConfigResult`)
is a field made by :func:`measure`: its kind and documentation. :data:`RESULT_COLUMNS` lists,
in the store's order, the ``trials`` columns that summarise them (a mean over the repeats,
the list of per-repeat values, ...); the store's schema and its row builder derive from it,
as they derive the config's columns from the config's declarations. An epoch of a repeat
travels from a trial to the driver as an :class:`EpochRow`, whose values are the columns of
the ``epochs`` table.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orthotune.core._config import TrainConfig

#: The kinds of values a result holds (the store maps each to an Arrow type).
KINDS = ("int", "float", "str", "ints", "floats", "strs")
#: The repeat value whose mean over the repeats is a config's objective: what searchers
#: maximise and ASHA ranks (the Tune metric), and the ``trials`` column the reports select by.
OBJECTIVE = "val_acc"


def measure(kind: str, doc: str, default: Any = dataclasses.MISSING, *,
            default_factory: Any = dataclasses.MISSING) -> Any:
    """A dataclass field of a result carrying its kind (one of :data:`KINDS`) and documentation."""
    assert kind in KINDS, kind
    return dataclasses.field(default=default, default_factory=default_factory, metadata={"kind": kind, "doc": doc})


def measures(cls: type) -> dict[str, dataclasses.Field]:
    """The declared values of a result type, by name, in declaration order."""
    return {f.name: f for f in dataclasses.fields(cls) if "kind" in f.metadata}


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


_NAN = float("nan")


@dataclass
class RunResult:
    """One repeat (split, seed or fold) of one config, read at its selected epoch."""

    split: int = measure("int", "its split (full, random), fold (cv10) or the one split (semi, official)")
    seed: int = measure("int", "its seed")
    status: Status = measure("str", "how it ended (a Status value)", Status.COMPLETED)
    reason: str = measure("str", "why it failed or stopped", "")
    val_acc: float = measure("float", "validation accuracy at the selected epoch", _NAN)
    test_acc: float = measure("float", "test accuracy at the selected epoch (read there only)", _NAN)
    val_loss: float = measure("float", "validation loss at the selected epoch", _NAN)
    best_epoch: int = measure("int", "the selected epoch", 0)
    epochs: int = measure("int", "epochs trained", 0)
    m_sig: float = measure("float", "M_sig of the trained model (last hidden state's norm over the input's)", _NAN)
    smoothness: float = measure("float", "smoothness D of the last hidden state", _NAN)
    grad_norms: list[float] = measure("floats", "per-layer gradient norms ||dL/dW(l)||_F",
                                      default_factory=list)


@dataclass
class ConfigResult:
    """A config's repeats; its objective is the mean validation accuracy over them."""

    config: TrainConfig
    runs: list[RunResult]
    seconds: float = measure("float", "wall-clock seconds the config trained", 0.0)
    seconds_per_epoch: float = measure("float", "seconds per epoch", 0.0)
    device: str = measure("str", "the device it trained on", "cpu")

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


class Summary(StrEnum):
    """How a ``trials`` column summarises one value over a config's repeats."""

    MEAN = "mean"  # the mean over every repeat (NaN when one is NaN: a failed repeat counts)
    STD = "std"  # the sample std over every repeat (ddof = 1)
    REPEATS = "repeats"  # every repeat's value, in repeat order
    MOST = "most"  # the largest over the repeats (0 for none)
    USABLE_MEAN = "usable_mean"  # the mean over the repeats that did not fail
    LAYER_MEAN = "layer_mean"  # per layer, the mean over the repeats that did not fail and measured it
    LAYER_RATIO = "layer_ratio"  # of LAYER_MEAN: first layer over last (null when undefined)
    CONFIG = "config"  # a value of the config's result itself (ConfigResult), as it is

    @property
    def words(self) -> str:
        return _SUMMARY_WORDS[self]


_SUMMARY_WORDS = {
    Summary.MEAN: "mean over the repeats of", Summary.STD: "sample std (ddof 1) over the repeats of",
    Summary.REPEATS: "per repeat,", Summary.MOST: "most over the repeats of",
    Summary.USABLE_MEAN: "mean over the repeats that did not fail of",
    Summary.LAYER_MEAN: "per layer, mean over the repeats that did not fail of",
    Summary.LAYER_RATIO: "first layer over last layer of the mean", Summary.CONFIG: "",
}


@dataclass(frozen=True)
class ResultColumn:
    """A ``trials`` column: ``summary`` of the value ``of`` (a :class:`RunResult` field, or a
    :class:`ConfigResult` one for :attr:`Summary.CONFIG`)."""

    name: str
    of: str
    summary: Summary

    @property
    def measure(self) -> dataclasses.Field:
        return measures(ConfigResult if self.summary is Summary.CONFIG else RunResult)[self.of]

    @property
    def kind(self) -> str:
        """The column's kind (one of :data:`KINDS`)."""
        own = self.measure.metadata["kind"]
        if self.summary in (Summary.MEAN, Summary.STD, Summary.USABLE_MEAN, Summary.LAYER_RATIO):
            return "float"
        return own + "s" if self.summary is Summary.REPEATS else own

    @property
    def doc(self) -> str:
        return f"{self.summary.words} {self.measure.metadata['doc']}".strip()


def result_column(of: str, summary: Summary, name: str | None = None) -> ResultColumn:
    """A :class:`ResultColumn`, named ``of`` (``of_std`` for the std, ``repeat_of`` per repeat)
    unless ``name`` says otherwise."""
    default = {Summary.STD: f"{of}_std", Summary.REPEATS: f"repeat_{of}"}.get(summary, of)
    return ResultColumn(name or default, of, summary)


_M, _S, _R = Summary.MEAN, Summary.STD, Summary.REPEATS
#: The ``trials`` columns of a config's result, in the store's order (``store.TRIALS_SCHEMA``
#: puts them after the config's columns): the objective and what the reports read (test at
#: the validation-best epoch), each repeat's values, steadiness, cost.
RESULT_COLUMNS: tuple[ResultColumn, ...] = (
    result_column(OBJECTIVE, _M), result_column(OBJECTIVE, _S),
    result_column("test_acc", _M), result_column("test_acc", _S),
    *(result_column(name, _R) for name in ("split", "seed", "status", OBJECTIVE, "test_acc", "val_loss",
                                           "best_epoch", "epochs")),
    result_column("epochs", Summary.MOST), result_column("best_epoch", Summary.MOST),
    result_column("m_sig", Summary.USABLE_MEAN), result_column("smoothness", Summary.USABLE_MEAN),
    result_column("grad_norms", Summary.LAYER_MEAN),
    result_column("grad_norms", Summary.LAYER_RATIO, name="grad_norm_ratio"),
    *(result_column(name, Summary.CONFIG) for name in ("seconds", "seconds_per_epoch", "device")),
)


def result_column_name(of: str, summary: Summary) -> str:
    """The name of the declared ``trials`` column that gives ``summary`` of ``of`` (the
    objective's std: ``val_acc_std``); a column not declared is an error."""
    return next(c.name for c in RESULT_COLUMNS if c.of == of and c.summary is summary)


@dataclass(frozen=True)
class EpochRow:
    """One repeat's values at one epoch of a trial: what the trial reports (a plain list on
    the wire, :meth:`to_list`, so Tune's results stay plain data) and a row of the store's
    ``epochs`` table (:meth:`values` after its repeat and epoch)."""

    member: int = measure("int", "the config within the trial (its place in a trial group)")
    repeat: int = measure("int", "the repeat of that config (its index in the config's runs)")
    epoch: int = measure("int", "the epoch, counted from 1")
    train_loss: float = measure("float", "training loss")
    val_acc: float = measure("float", "validation accuracy")
    test_acc: float = measure("float", "test accuracy")
    val_loss: float | None = measure("float", "validation loss (null: not measured)", None)
    grad_norms: list[float] | None = measure("floats", "per-layer gradient norms ||dL/dW(l)||_F, at the "
                                             "report epochs (null at the others)", None)

    #: The fields that say whose values these are; the rest are the values.
    KEY = ("member", "repeat", "epoch")

    def to_list(self) -> list[Any]:
        """The row as the trial reports it: its fields in order."""
        return [getattr(self, f.name) for f in dataclasses.fields(self)]

    @classmethod
    def from_list(cls, row: Sequence[Any]) -> EpochRow:
        """A reported row. Rows of earlier versions (replayed on ``--resume``) end early: the
        values after their end, like an optional value reported NaN or empty, were not
        measured (None)."""
        given = dict(zip((f.name for f in dataclasses.fields(cls)), row))
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            value = given.get(f.name)
            if f.name in cls.KEY:
                value = int(value)
            elif f.default is None and (value is None or value != value or value == []):
                value = None
            values[f.name] = value
        return cls(**values)

    def values(self) -> dict[str, Any]:
        """The values, by name (the ``epochs`` table's columns after repeat and epoch)."""
        return {name: getattr(self, name) for name in epoch_values()}

    def scalars(self) -> dict[str, Any]:
        """The values that are single numbers (all but the per-layer ones), by name."""
        kinds = measures(EpochRow)
        return {name: value for name, value in self.values().items() if kinds[name].metadata["kind"] == "float"}


def epoch_values() -> tuple[str, ...]:
    """The names of an :class:`EpochRow`'s values (its fields after :attr:`EpochRow.KEY`)."""
    return tuple(name for name in measures(EpochRow) if name not in EpochRow.KEY)


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
