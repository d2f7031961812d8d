"""Per-cell searches: each cell its own searcher, its own budget and its own ASHA.

A *cell* is one (dataset, backbone, depth, arm) of a space (``Space.cells()``). One
Optuna study spanning every cell spends its budget where it likes (``--datasets cora
texas --samples 6`` sent 5 of 6 trials to Texas) and one ASHA bracket lets a Texas trial
stop a Cora trial. So:

- :class:`CellSearcher` wraps one inner searcher per cell, like Ray Tune's
  ``search/repeater.py`` wraps one: ``suggest`` goes round-robin over the cells that still
  have budget (``samples`` trainings each), ``on_trial_result``/``on_trial_complete`` go to
  the cell that proposed the trial. A resumed search rebuilds each cell from the store's
  rows (``_replay``): the stored trials are told to the cell's searcher, and count against
  its budget. Nothing is pickled: Tune's checkpoints of this searcher are JSON summaries.
  It also answers repeats: when a cell's searcher proposes a config that cell already
  trained (finite spaces: TPE proposed one config three times in a 16-trial search), the
  searcher is told the known result under the repeat's own id and asked again; nothing
  trains twice. A repeat of a config still training is answered when that trial ends.
- :class:`CellScheduler` keeps one scheduler (Ray's ASHA) per cell and dispatches each
  trial's events to its cell's, so trials are compared only within their cell.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

from ray.tune.schedulers import FIFOScheduler, TrialScheduler
from ray.tune.search import Searcher

from orthotune.search._cell_key import cell_key
from orthotune.search._checkpoints import save_summary, stored_state_refused
from orthotune.search._identity import config_identity

#: How many repeats in a row one ``suggest`` answers before it decides that the cell's
#: searcher has nothing new to propose (it keeps returning configs already trained).
MAX_REPEATS = 50


class CellSearcher(Searcher):
    """One inner searcher per cell, ``samples`` trainings each, repeats answered from results.

    Args:
        searchers: cell key -> that cell's searcher (e.g. an ``OptunaSearch`` over the cell).
        samples: trainings per cell (repeats answered from known results do not count).
        sizes: cell key -> how many distinct configs the cell has (None: unbounded); a cell
            whose every config has been tried is finished.
    """

    def __init__(self, searchers: Mapping[str, Searcher], samples: int,
                 sizes: Mapping[str, int | None] | None = None, metric: str | None = None,
                 mode: str | None = None, max_repeats: int = MAX_REPEATS) -> None:
        super().__init__(metric=metric, mode=mode)
        self.searchers = dict(searchers)
        self.samples, self.max_repeats = samples, max_repeats
        self.sizes = {cell: (sizes or {}).get(cell) for cell in self.searchers}
        self.given = dict.fromkeys(self.searchers, 0)  # trainings handed out per cell
        self.finished: set[str] = set()
        self.turn = 0
        self.routes: dict[str, tuple[str, str, str]] = {}  # trial id -> (cell, inner id, identity)
        self.running: dict[str, dict[str, str]] = {cell: {} for cell in self.searchers}  # identity -> trial
        self.known: dict[str, dict[str, tuple[float | None, bool]]] = {c: {} for c in self.searchers}
        self.waiting: dict[str, list[str]] = {}  # trial id -> inner ids of repeats waiting on it
        self.answered = 0  # repeats answered without training

    # -- Tune's Searcher interface ----------------------------------------------------------

    def set_search_properties(self, metric, mode, config, **spec) -> bool:
        super().set_search_properties(metric, mode, config, **spec)
        accepted = [inner.set_search_properties(metric, mode, config, **spec) for inner in self.searchers.values()]
        return all(accepted)

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        cells = list(self.searchers)
        for _ in range(len(cells)):
            cell = cells[self.turn % len(cells)]
            self.turn += 1
            if cell in self.finished:
                continue
            config = self._propose(cell, trial_id)
            if config == Searcher.FINISHED:
                self.finished.add(cell)
            elif config is not None:
                self.given[cell] += 1
                return config
        return Searcher.FINISHED if len(self.finished) == len(cells) else None

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        if trial_id not in self.routes:
            return
        cell, inner_id, _ = self.routes[trial_id]
        # After --resume, Tune reruns trials from its last checkpoint, while a persistent Optuna
        # study (the dashboard's storage) may already hold their steps or their end.
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="The reported value is ignored")
            try:
                self.searchers[cell].on_trial_result(inner_id, result)
            except RuntimeError as error:
                if type(error).__name__ != "UpdateFinishedTrialError":
                    raise

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        if trial_id not in self.routes:
            return
        cell, inner_id, identity = self.routes.pop(trial_id)
        self.running[cell].pop(identity, None)
        value = (result or {}).get(self.metric)
        self.known[cell][identity] = (value, error)
        self.searchers[cell].on_trial_complete(inner_id, result, error=error)
        for repeat_id in self.waiting.pop(trial_id, []):
            self._answer(cell, repeat_id, value, error)

    def tell_stored(self, cell: str, inner_id: str, config: dict[str, Any], value: float | None,
                    error: bool) -> None:
        """A trial a previous session of this search stored: the cell's searcher proposed
        ``config`` under ``inner_id`` (its enqueued point); it counts against the budget."""
        self.known[cell][config_identity(config)] = (value, error)
        self.given[cell] += 1
        result = None if value is None else {self.metric: value}
        self.searchers[cell].on_trial_complete(inner_id, result, error=error)

    # -- state: Tune checkpoints searchers; orthotune resumes from the store instead ---------

    def save(self, checkpoint_path: str) -> None:
        save_summary({"given": self.given, "finished": sorted(self.finished), "answered": self.answered,
                      "known": {cell: len(known) for cell, known in self.known.items()}}, checkpoint_path)

    def restore(self, checkpoint_path: str) -> None:
        stored_state_refused(checkpoint_path)

    # -- internals ---------------------------------------------------------------------------

    def _propose(self, cell: str, trial_id: str) -> dict[str, Any] | str | None:
        """A config the cell has not trained yet, FINISHED when the cell is spent."""
        inner = self.searchers[cell]
        for attempt in range(self.max_repeats + 1):
            if self._spent(cell):
                return Searcher.FINISHED
            inner_id = trial_id if attempt == 0 else f"{trial_id}~repeat{attempt}"
            config = inner.suggest(inner_id)
            if config is None or config == Searcher.FINISHED:
                return config
            identity = config_identity(config)
            if identity in self.known[cell]:
                self._answer(cell, inner_id, *self.known[cell][identity])
                self.answered += 1
            elif identity in self.running[cell]:
                self.waiting.setdefault(self.running[cell][identity], []).append(inner_id)
                self.answered += 1
            else:
                self.routes[trial_id] = (cell, inner_id, identity)
                self.running[cell][identity] = trial_id
                return config
        return Searcher.FINISHED  # it keeps proposing what the cell already tried

    def _spent(self, cell: str) -> bool:
        tried = len(self.known[cell]) + len(self.running[cell])
        size = self.sizes.get(cell)
        return self.given[cell] >= self.samples or (size is not None and tried >= size)

    def _answer(self, cell: str, inner_id: str, value: float | None, error: bool) -> None:
        """Tell the cell's searcher a repeat's result: the known one, nothing trained."""
        mark_repeat(self.searchers[cell], inner_id)
        result = None if value is None else {self.metric: value}
        self.searchers[cell].on_trial_complete(inner_id, result, error=error)


#: The Optuna user attribute that marks a trial of a cell's study as a repeated proposal.
REPEAT_ATTR = "orthotune_repeat"


def mark_repeat(searcher: Any, inner_id: str) -> None:
    """Mark a repeat in the cell's Optuna study. Ray's OptunaSearch asks the study for a trial
    at every proposal, a repeat too, so the study holds one trial per proposal; the marked
    ones were answered with the result of the same config, not trained (the store holds the
    trained ones). OptunaSearch keeps its Optuna trials by Tune id in ``_ot_trials``, its only
    handle on them; other searchers have none and are left alone."""
    trial = getattr(searcher, "_ot_trials", {}).get(inner_id)
    if trial is not None:
        trial.set_user_attr(REPEAT_ATTR, "a repeated proposal: told the result of the same config, not trained")


class CellScheduler(FIFOScheduler):
    """One scheduler per cell (made on first sight by ``make(cell)``); a trial's events go to
    its cell's, so ASHA compares trials only within a cell.

    ``key`` maps a trial's config to its cell; a trial may instead carry a ``cell``
    attribute (the rung board's configs inside packs do).
    """

    def __init__(self, make: Callable[[str], TrialScheduler], key: Callable[[Mapping], str] = cell_key) -> None:
        super().__init__()
        self.make, self.key = make, key
        self.schedulers: dict[str, TrialScheduler] = {}
        self.cells: dict[str, str] = {}  # trial id -> cell
        self._properties: tuple[Any, Any, dict] | None = None

    def scheduler(self, cell: str) -> TrialScheduler:
        if cell not in self.schedulers:
            self.schedulers[cell] = self.make(cell)
            if self._properties is not None:
                metric, mode, spec = self._properties
                self.schedulers[cell].set_search_properties(metric, mode, **spec)
        return self.schedulers[cell]

    def _for(self, trial) -> TrialScheduler:
        cell = self.cells.get(trial.trial_id) or getattr(trial, "cell", None) or self.key(trial.config)
        self.cells[trial.trial_id] = cell
        return self.scheduler(cell)

    def set_search_properties(self, metric: str | None, mode: str | None, **spec) -> bool:
        self._properties = (metric, mode, spec)
        return all([s.set_search_properties(metric, mode, **spec) for s in self.schedulers.values()])

    def on_trial_add(self, tune_controller, trial) -> None:
        self._for(trial).on_trial_add(tune_controller, trial)

    def on_trial_result(self, tune_controller, trial, result: dict) -> str:
        if trial.trial_id not in self.cells:  # restored and never added: add it first
            self.on_trial_add(tune_controller, trial)
        return self._for(trial).on_trial_result(tune_controller, trial, result)

    def on_trial_complete(self, tune_controller, trial, result: dict) -> None:
        if trial.trial_id in self.cells:
            self._for(trial).on_trial_complete(tune_controller, trial, result)
            self.cells.pop(trial.trial_id, None)

    def on_trial_error(self, tune_controller, trial) -> None:
        if trial.trial_id in self.cells:
            self._for(trial).on_trial_error(tune_controller, trial)
            self.cells.pop(trial.trial_id, None)

    def on_trial_remove(self, tune_controller, trial) -> None:
        if trial.trial_id in self.cells:
            self._for(trial).on_trial_remove(tune_controller, trial)
            self.cells.pop(trial.trial_id, None)

    def debug_string(self) -> str:
        return "\n".join(f"{cell}: {s.debug_string()}" for cell, s in sorted(self.schedulers.items()))

    def save(self, checkpoint_path: str) -> None:
        save_summary({"cells": sorted(self.schedulers), "trials": len(self.cells)}, checkpoint_path)

    def restore(self, checkpoint_path: str) -> None:
        stored_state_refused(checkpoint_path)
