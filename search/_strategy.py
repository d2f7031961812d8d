"""A session's strategy: the search algorithm, the Tune-level scheduler and the number of
Tune trials, one searcher and one ASHA per cell, with the trials an earlier session stored
replayed into them (``--resume``). (What a search will cost is the ``plan`` layer's.)"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from orthotune.core import OBJECTIVE, OrthotuneError
from orthotune.search._algorithms import SCHEDULERS, SEARCHERS, grid_search
from orthotune.search._budget import budgeted_configs, grid_size
from orthotune.search._cells import CellSearcher
from orthotune.search._grouping import GroupSearcher, group_points
from orthotune.search._identity import config_identity
from orthotune.search._options import LaunchOptions
from orthotune.search._replay import (
    StoredTrial,
    by_cell,
    remaining_points,
    replay_points,
    replay_rungs,
)

log = logging.getLogger(__name__)

#: Stored trials' objective curves: trial id -> [(epoch, objective)] (``objective_curves``).
Curves = dict[str, list[tuple[int, float]]]


@dataclass
class Strategy:
    """What Tune runs: the search algorithm, the Tune-level scheduler, the number of Tune
    trials, and the number of configs that makes (the progress display's total)."""

    search_alg: Any
    scheduler: Any
    num_samples: int
    configs: int


def strategy(options: LaunchOptions, storage: Any = None, stored: list[StoredTrial] | None = None,
             curves: Curves | None = None) -> Strategy:
    """Search algorithm, Tune-level scheduler and number of Tune trials.

    Sampled searches get one searcher per cell (``samples`` trainings each); ``storage`` is
    the Optuna storage their studies are written to (one study per cell, named
    ``SEARCH/cell``). With several configs per trial (a trial group, trained as one packed
    model), Tune runs the groups FIFO and ASHA decides per config on the rung board (one
    ASHA per cell there too). ``stored``: trials an earlier session of the search stored,
    replayed into the searchers (and, with their ``curves``, into ASHA), never trained again.
    """
    space, group, stored = options.space, options.configs_per_trial, stored or []
    searcher = SEARCHERS.get(options.searcher)
    if searcher.finite:
        # the searcher's points (the grid's in a seeded random order); given points as given
        points = list(options.points) if options.points is not None else searcher.points(space, options.seed)
        points = remaining_points(points, stored)
        if group == 1:
            scheduler = replayed(SCHEDULERS.get(options.scheduler).make(space), stored, curves)
            return Strategy(grid_search(points), scheduler, len(points), len(points))
        groups = group_points(points, group)
        return Strategy(grid_search(groups), _groups_scheduler(space), len(groups), len(points))
    cells = space.cells()
    samples = options.samples or space.samples
    make = searcher.make
    mine = by_cell(stored)
    searchers = {cell.key: make(cell, options.seed + index, storage=storage, study_name=f"{options.name}/{cell.key}",
                                replay=replay_points(mine.get(cell.key, [])))
                 for index, cell in enumerate(cells)}
    sizes = {cell.key: grid_size(cell) for cell in cells}
    per_cell = CellSearcher(searchers, samples, sizes, metric=OBJECTIVE, mode="max")
    for cell, trials in mine.items():
        if cell in searchers:
            _replay_cell(per_cell, cell, trials)
    configs = max(0, budgeted_configs(options) - len(stored))
    if group == 1:
        scheduler = replayed(SCHEDULERS.get(options.scheduler).make(space), stored, curves)
        return Strategy(per_cell, scheduler, configs, configs)
    grouped = GroupSearcher(per_cell, group, configs, metric=OBJECTIVE, mode="max")
    return Strategy(grouped, _groups_scheduler(space), configs, configs)


def _groups_scheduler(space: Any) -> Any:
    """Tune's scheduler when trials train groups of configs: the groups run first in, first
    out, and a scheduler that stops at rungs decides per config on the rung board instead."""
    return SCHEDULERS.get("fifo").make(space)


def _replay_cell(searcher: CellSearcher, cell: str, trials: list[StoredTrial]) -> None:
    """Ask the cell's searcher for its enqueued stored points and tell it their results."""
    for trial in trials:
        inner_id = f"stored-{trial.trial_id}"
        config = searcher.searchers[cell].suggest(inner_id)
        if not isinstance(config, dict):
            raise OrthotuneError(f"cannot resume: the searcher of cell {cell} did not take back stored trial "
                                 f"{trial.trial_id}")
        if config_identity(config) != config_identity(trial.config):
            log.warning("stored trial %s of cell %s is not a config of the search's space; its result is told "
                        "to the searcher for the config it proposed in its place", trial.trial_id, cell)
        searcher.tell_stored(cell, inner_id, config, trial.objective, trial.failed)


def replayed(scheduler: Any, stored: list[StoredTrial], curves: Curves | None) -> Any:
    """A per-cell scheduler (ASHA) given the stored trials' reports (their rungs)."""
    if stored and curves and hasattr(scheduler, "schedulers"):  # a CellScheduler, not FIFO
        replay_rungs(scheduler, stored, curves)
    return scheduler
