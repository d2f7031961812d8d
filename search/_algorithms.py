"""The search algorithms and trial schedulers by name (``--searcher``, ``--scheduler``).

Each entry declares what it can do, and the rest of the search reads those fields, never a
name (as Ray Tune's controller knows searchers and schedulers only by their base types, and
PyG's ``BasicGNN`` reads ``supports_edge_weight``): adding a searcher or a scheduler is one
entry here. Light to import: the registries are what the CLI lists and the options validate;
each factory imports Ray and Optuna (and the per-cell wrappers built on them) only when called.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from orthotune.core import OBJECTIVE, Registry
from orthotune.search._objective import RUNG_SCORE, TIME_ATTR
from orthotune.spaces import SearchSpace


@dataclass(frozen=True)
class Searcher:
    """A search algorithm: how it is made and what it can do.

    A sampled searcher's ``make`` is ``(space, seed, storage=None, study_name=None, replay=())``
    -> a Tune searcher over ``space`` (one cell's: each cell gets its own, ``samples`` trials
    each); ``storage`` is an Optuna storage, ``replay`` the configs a previous session stored
    (proposed first, in order). A finite searcher has no per-cell searcher: ``points(space,
    seed)`` lists every config it trains, in order, and ``size(cell)`` counts a cell's without
    building them."""

    make: Callable[..., Any] | None = None
    #: trains a fixed list of points (the space's, or ``--points`` given): its budget is their
    #: count, not ``samples``, and it is the kind that takes explicit points
    finite: bool = False
    points: Callable[[SearchSpace, int], list[dict[str, Any]]] | None = None
    size: Callable[[SearchSpace], int] | None = None
    #: keeps one Optuna study per cell in the search's Optuna storage (``--resume`` rebuilds it)
    keeps_study: bool = False


@dataclass(frozen=True)
class Scheduler:
    """A trial scheduler: ``make(space)`` -> a Tune scheduler, and what it needs."""

    make: Callable[[SearchSpace], Any]
    #: stops trials at rungs (ASHA): needs every cell to train past its first rung, is given
    #: stored trials' curves on ``--resume``, and decides per config on the rung board when
    #: trials train groups of configs
    stops_at_rungs: bool = False


SEARCHERS: Registry[Searcher] = Registry("search algorithm")
SCHEDULERS: Registry[Scheduler] = Registry("scheduler")


def _optuna(space: SearchSpace, seed: int, storage: Any = None, study_name: str | None = None,
            replay: Sequence[dict[str, Any]] = ()):
    return _optuna_search(space, "TPESampler", storage, study_name, replay, seed=seed)


def _random(space: SearchSpace, seed: int, storage: Any = None, study_name: str | None = None,
            replay: Sequence[dict[str, Any]] = ()):
    return _optuna_search(space, "RandomSampler", storage, study_name, replay, seed=seed)


def _grid_points(space: SearchSpace, seed: int) -> list[dict[str, Any]]:
    return shuffled_grid(space.grid(), seed)


def _grid_size(cell: SearchSpace) -> int:
    return cell.grid_size()


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


def _asha(space: SearchSpace):
    """One ASHA per cell: trials are compared only within their cell."""
    from orthotune.search._cells import CellScheduler

    return CellScheduler(CellASHA(space))


class CellASHA:
    """Makes a cell's ASHA, ``max_t`` from that cell's own space (a picklable factory)."""

    def __init__(self, space: SearchSpace) -> None:
        self.space = space
        self.cells = {cell.key: cell for cell in space.cells()}

    def __call__(self, cell: str):
        from ray.tune.schedulers import ASHAScheduler

        space = self.cells.get(cell, self.space)  # explicit grid points may lie outside
        # stop_last_trials=False: a trial that reaches max_t completes on its own report
        return ASHAScheduler(time_attr=TIME_ATTR, metric=RUNG_SCORE, mode="max", max_t=space.max_epochs(),
                             grace_period=space.grace_period, reduction_factor=space.reduction_factor,
                             stop_last_trials=False)


def _fifo(space: SearchSpace):
    from ray.tune.schedulers import FIFOScheduler

    return FIFOScheduler()


SEARCHERS.add("optuna", Searcher(_optuna, keeps_study=True))
SEARCHERS.add("random", Searcher(_random, keeps_study=True))
SEARCHERS.add("grid", Searcher(finite=True, points=_grid_points, size=_grid_size))
SCHEDULERS.add("asha", Scheduler(_asha, stops_at_rungs=True))
SCHEDULERS.add("fifo", Scheduler(_fifo))
