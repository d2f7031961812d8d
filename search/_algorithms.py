"""The search algorithms and trial schedulers by name (``--searcher``, ``--scheduler``).

Light to import: the registries are what the CLI lists and the options validate; each
factory imports Ray and Optuna (and the per-cell wrappers built on them) only when called.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any

from orthotune.core import OBJECTIVE, Registry
from orthotune.search._objective import RUNG_SCORE, TIME_ATTR
from orthotune.spaces import SearchSpace

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
        self.space = space
        self.cells = {cell.key: cell for cell in space.cells()}

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
