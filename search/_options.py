"""What a search is asked to do, light enough for the CLI to import at once: the searcher
and scheduler registries (their factories import Ray and Optuna only when called), the
launch options and the outcome. The heavy machinery lives in ``_launch``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from orthotune.core import OrthotuneError, Registry, check
from orthotune.search._space import SearchSpace
from orthotune.store import check_search_name

#: ``--optuna-storage`` value that turns the cells' Optuna studies off.
NO_STORAGE = "off"
#: Progress display modes (``--progress``): a bar on a terminal or plain lines elsewhere.
MODES = ("auto", "bar", "plain")
#: How trials get GPUs: ``fixed`` (``gpus_per_trial`` each) or ``auto`` (each cell's share of
#: a GPU decided from its measured cost on the cluster: ``_gpu_share``).
GPU_SHARES = ("fixed", "auto")
#: The objective every report carries and ASHA's time attribute.
OBJECTIVE = "val_acc"
TIME_ATTR = "epoch"
#: What ASHA ranks trials by: the objective, ties broken by validation loss (``rung_score``).
RUNG_SCORE = "rung_score"
#: Weight of the tie-break: below the smallest step between two distinct objectives (a mean
#: over R repeats of accuracies over n validation items moves in steps of 1 / (n R), at least
#: 1e-6 for every dataset and repeat count orthotune runs), so it never reorders those.
_TIE_WEIGHT = 1e-7


def rung_score(objective: float, min_val_losses: Sequence[float]) -> float:
    """``objective`` with ties broken by the lower mean of each repeat's lowest validation loss.

    A deep model predicts the majority class for its first tens of epochs, so at ASHA's early
    rungs whole cells tie on validation accuracy; ASHA stops only trials strictly below its
    cutoff, so on a tie it stops none and the early rungs save nothing (measured on Cora
    GCN-8: no trial stopped before epoch 90). The loss still tells them apart. It is squashed
    into [0, 1) so the tie-break stays below any step of the objective; no loss yet (or a
    non-finite one) counts as the worst.
    """
    finite = [v for v in min_val_losses if math.isfinite(v)]
    loss = sum(finite) / len(finite) if finite and len(finite) == len(min_val_losses) else math.inf
    squashed = loss / (1.0 + loss) if math.isfinite(loss) and loss >= 0 else 1.0
    return objective - _TIE_WEIGHT * squashed

#: A searcher factory: ``(space, seed, storage=None, study_name=None, replay=())`` -> a Tune
#: searcher over ``space`` (one cell's, in per-cell searches); ``storage`` is an Optuna
#: storage; ``replay`` the configs a previous session stored (proposed first, in order).
SEARCHERS: Registry[Callable[..., Any]] = Registry("search algorithm")
SCHEDULERS: Registry[Callable[[SearchSpace], Any]] = Registry("scheduler")


@SEARCHERS.register("optuna")
def _optuna(space: SearchSpace, seed: int, storage: Any = None, study_name: str | None = None,
            replay: Sequence[dict[str, Any]] = ()):
    return _optuna_search(space, "TPESampler", storage, study_name, replay, seed=seed)


@SEARCHERS.register("random")
def _random(space: SearchSpace, seed: int, storage: Any = None, study_name: str | None = None,
            replay: Sequence[dict[str, Any]] = ()):
    return _optuna_search(space, "RandomSampler", storage, study_name, replay, seed=seed)


@SEARCHERS.register("grid")
def _grid(space: SearchSpace, seed: int, storage: Any = None, study_name: str | None = None,
          replay: Sequence[dict[str, Any]] = ()):
    return grid_search(shuffled_grid(space.grid(), seed))


def shuffled_grid(points: list[dict[str, Any]], seed: int) -> list[dict[str, Any]]:
    """A grid's points in a seeded random order. ASHA ranks a trial against the trials that
    reached its rung before it, so in nested-loop order one corner of the grid (the first
    value of every dimension) would set every early cutoff; any order trains the same points."""
    order = list(points)
    random.Random(seed).shuffle(order)
    return order


def grid_search(points: list[dict[str, Any]]):
    from orthotune.search._grouping import PointSearcher

    return PointSearcher(points, metric=OBJECTIVE, mode="max")


def _optuna_search(space: SearchSpace, sampler: str, storage: Any, study_name: str | None,
                   replay: Sequence[dict[str, Any]], **kwargs):
    """Ray's OptunaSearch over a cell. ``replay``: the configs a previous session of the search
    stored, enqueued first (``_replay`` asks for and tells each), so the study continues."""
    import optuna
    from ray.tune.search.optuna import OptunaSearch

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    # each cell starts from orthotune's defaults (one trial of its budget), whichever arm
    default = space.default_point()
    tried = any(all(point.get(k) == v for k, v in default.items()) for point in replay)
    points = [*replay, *([default] if default and not tried else [])]
    return OptunaSearch(space=space.define_by_run, metric=OBJECTIVE, mode="max", storage=storage,
                        study_name=study_name, sampler=getattr(optuna.samplers, sampler)(**kwargs),
                        points_to_evaluate=points or None)


@SCHEDULERS.register("asha")
def _asha(space: SearchSpace):
    """One ASHA per cell: trials are compared only within their cell."""
    from orthotune.search._cells import CellScheduler

    return CellScheduler(CellASHA(space))


class CellASHA:
    """Makes a cell's ASHA, ``max_t`` from that cell's own space (a picklable factory)."""

    def __init__(self, space: SearchSpace) -> None:
        from orthotune.search._cells import space_cell_key

        self.space = space
        self.cells = {space_cell_key(cell): cell for cell in space.cells()}

    def __call__(self, cell: str):
        from ray.tune.schedulers import ASHAScheduler

        space = self.cells.get(cell, self.space)  # explicit grid points may lie outside
        # stop_last_trials=False: a trial that reaches max_t completes on its own report
        return ASHAScheduler(time_attr=TIME_ATTR, metric=RUNG_SCORE, mode="max", max_t=space.max_epochs(),
                             grace_period=space.grace_period, reduction_factor=space.reduction_factor,
                             stop_last_trials=False)


@SCHEDULERS.register("fifo")
def _fifo(space: SearchSpace):
    from ray.tune.schedulers import FIFOScheduler

    return FIFOScheduler()


@dataclass(frozen=True)
class LaunchOptions:
    """How to run one search; validated here, typed afterwards."""

    store: str
    name: str
    space: SearchSpace
    samples: int | None = None  # trainings per cell and arm (default: the space's)
    searcher: str = "optuna"
    scheduler: str = "asha"
    address: str | None = None
    cpus_per_trial: float = 1.0
    gpus_per_trial: float = 0.0
    concurrency: int | None = None
    data_root: str | None = None
    seed: int = 0
    report_every: int = 10
    configs_per_trial: int = 1
    points: tuple[dict[str, Any], ...] | None = None  # explicit configs for the grid searcher
    # Optuna storage of the cells' studies (optuna-dashboard): None for a journal file beside
    # a local store (<store>/optuna/NAME.journal), an RDB URL, a journal file path, or "off"
    optuna_storage: str | None = None
    tensorboard: bool = True  # TensorBoard event files per config under <store>/tensorboard/NAME
    download: bool = False  # fetch datasets missing from data_root into it (never without asking)
    # times Ray Tune restarts a trial whose worker died (killed, node lost); a trial that
    # raises is stored as failed at once instead (its error would only repeat)
    retries: int = 2
    # "auto": each cell's fraction of a GPU measured on the cluster before trials start
    # (gpus_per_trial stays 0; ``_gpu_share``); "fixed": gpus_per_trial for every trial
    gpu_share: str = "fixed"

    def __post_init__(self) -> None:
        check_search_name(self.name)
        SEARCHERS.get(self.searcher)
        SCHEDULERS.get(self.scheduler)
        check(self.samples is None or self.samples >= 1, f"samples={self.samples!r} must be >= 1")
        # each cell's sampler is seeded seed + its index, and NumPy takes seeds below 2**32
        check(isinstance(self.seed, int) and 0 <= self.seed < 2**31,
              f"seed={self.seed!r} must be an integer in [0, {2**31 - 1}]")
        check(self.cpus_per_trial > 0, f"cpus_per_trial={self.cpus_per_trial!r} must be > 0")
        check(math.isfinite(self.cpus_per_trial), f"cpus_per_trial={self.cpus_per_trial!r} must be a finite number")
        check(self.gpu_share in GPU_SHARES,
              f"gpu_share={self.gpu_share!r} must be one of {', '.join(GPU_SHARES)}")
        check(self.gpu_share == "fixed" or self.gpus_per_trial == 0,
              f"gpus_per_trial={self.gpus_per_trial!r} must be 0 with gpu_share='auto' (each cell's share is "
              f"measured)")
        check(self.gpus_per_trial >= 0, f"gpus_per_trial={self.gpus_per_trial!r} must be >= 0")
        check(math.isfinite(self.gpus_per_trial), f"gpus_per_trial={self.gpus_per_trial!r} must be a finite number")
        check(self.gpus_per_trial <= 1 or float(self.gpus_per_trial).is_integer(),
              f"gpus_per_trial={self.gpus_per_trial!r} must be a fraction <= 1 or a whole number")
        check(self.concurrency is None or self.concurrency >= 1,
              f"concurrency={self.concurrency!r} must be >= 1")
        check(self.report_every >= 1, f"report_every={self.report_every!r} must be >= 1")
        check(isinstance(self.configs_per_trial, int) and self.configs_per_trial >= 1,
              f"configs_per_trial={self.configs_per_trial!r} must be an integer >= 1")
        check(self.points is None or self.searcher == "grid",
              f"explicit points need searcher='grid', got searcher={self.searcher!r}")
        check(self.optuna_storage is None or (isinstance(self.optuna_storage, str) and self.optuna_storage),
              f"optuna_storage={self.optuna_storage!r} must be an RDB URL, a journal file path or {NO_STORAGE!r}")
        check(isinstance(self.tensorboard, bool), f"tensorboard={self.tensorboard!r} must be true or false")
        check(isinstance(self.download, bool), f"download={self.download!r} must be true or false")
        check(isinstance(self.retries, int) and 0 <= self.retries <= 100,
              f"retries={self.retries!r} must be an integer from 0 to 100")
        if self.scheduler == "asha":  # Ray's ASHA asserts on this; say it in one line instead
            shortest = min(cell.max_epochs() for cell in self.space.cells())
            check(self.space.grace_period <= shortest,
                  f"asha.grace_period={self.space.grace_period} must be <= the fewest epochs a cell "
                  f"trains ({shortest}); lower it or use --scheduler fifo")

    def to_meta(self) -> dict[str, Any]:
        values = asdict(self)
        values["space"] = self.space.to_dict()
        return values

    @classmethod
    def from_meta(cls, values: dict[str, Any], parse_space: Callable[[dict[str, Any]], SearchSpace]) -> LaunchOptions:
        """Options saved by :meth:`to_meta`; ``parse_space`` reads the space back (the spaces
        layer sits above this one, so it is handed in)."""
        values = dict(values)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown or "space" not in values:  # written by another orthotune version
            what = f"unknown option(s) {', '.join(unknown)}" if unknown else "no space"
            raise OrthotuneError(f"search {values.get('name')!r} was launched by an orthotune whose record this "
                                 f"version cannot read ({what}); resume it with that version, or launch it again "
                                 f"under a new name")
        values["space"] = parse_space(values["space"])
        if values.get("points") is not None:
            values["points"] = tuple(values["points"])
        return cls(**values)


@dataclass
class SearchOutcome:
    """What a finished (or interrupted) search left: counts by status and the best trials.

    ``best_by_cell`` maps each cell (``dataset/backbone/depth/arm``) to its best objective and
    config; ``best_config``/``best_objective`` are the best over all cells.
    """

    name: str
    counts: dict[str, int] = field(default_factory=dict)
    best_config: dict[str, Any] | None = None
    best_objective: float | None = None
    best_by_cell: dict[str, tuple[float, dict[str, Any]]] = field(default_factory=dict)


