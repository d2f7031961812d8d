"""An adaptive budget inside one search: how many trainings each cell may be given now.

Each pair (a place's original and Ortho-GConv cells; with a space's named arms, the group of
every arm's cell on one dataset and variant) starts with its first look's trials per
arm; when both arms' first k trials have ended, the stopping rule (``_stopping``) reads them:
the pair stops at k, or both arms may go on to the next look. A pair at a look waits (its
cells propose nothing) until both arms' first k have ended, so the arms stay in lockstep. A
structure-agnostic reference cell trains as far as its dataset's furthest pair. Pure
bookkeeping: the cell searcher asks :meth:`AdaptiveBudget.allowed`, and each stored row is
told with its place in the tuning curve's start order (its start time, then its finish, name
and id), so the first k trials of an arm are the same ones live, on ``--resume`` (the stored
rows told at once) and in the report's replay: the stops are a function of the stored rows.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from orthotune.core import ARMS, OBJECTIVE, RESERVED_ARM_NAMES, Status, Summary, result_column_name
from orthotune.search._stopping import ArmTrials, Looks, Stop, StoppingRule, stop_of

#: The stored objective's std over the repeats (the rule's standard error is it over their root).
OBJECTIVE_STD = result_column_name(OBJECTIVE, Summary.STD)
#: The ``trials`` columns :meth:`AdaptiveBudget.record_row` reads.
STOP_READS = ("search", "trial_id", "status", OBJECTIVE, OBJECTIVE_STD, "repeat_status", "seconds", "finished_at")


@dataclass
class _Pair:
    cells: tuple[str, ...]  # its arms' cells (the default pair: original, then Ortho-GConv)
    look: int  # the look the pair is at (or stopped at)
    stop: Stop | None = None


@dataclass
class AdaptiveBudget:
    """``pairs``: pair name -> its arms' cells (original, Ortho-GConv; or a group of named
    arms, which move in lockstep alike); ``references``: reference cell -> the names of its
    dataset's pairs."""

    rule: StoppingRule
    looks: Looks
    pairs: Mapping[str, tuple[str, ...]]
    references: Mapping[str, Iterable[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._pairs = {name: _Pair(tuple(cells), self.looks.first) for name, cells in self.pairs.items()}
        self._of = {cell: name for name, cells in self.pairs.items() for cell in cells}
        self._references = {cell: tuple(names) for cell, names in self.references.items()}
        # per cell: trial id -> (start-order key, validation mean, std, repeats)
        self._results: dict[str, dict[str, tuple[Any, float, float, float]]] = {cell: {} for cell in self._of}

    def allowed(self, cell: str) -> int | None:
        """Trainings ``cell`` may be given so far (None: a cell the budget does not know)."""
        if cell in self._references:
            return max((self._pairs[name].look for name in self._references[cell]), default=self.looks.maximum)
        name = self._of.get(cell)
        return None if name is None else self._pairs[name].look

    def done(self, cell: str) -> bool:
        """Whether ``cell`` will never be allowed more: its pair (every pair of a reference's
        dataset) stopped."""
        names = self._references.get(cell, (self._of[cell],) if cell in self._of else ())
        return all(self._pairs[name].stop is not None for name in names)

    def record(self, cell: str, order: Any, val: float, val_std: float, repeats: int,
               trial_id: str | None = None) -> list[tuple[str, Stop]]:
        """A stored trial of ``cell``: its place in the start order (any sortable key), its
        validation mean (NaN: failed), std and repeats (``trial_id``: a trial written again
        replaces its earlier row); returns the pairs this result stopped, with their stops."""
        name = self._of.get(cell)
        if name is None:
            return []
        self._results[cell][trial_id if trial_id is not None else repr(order)] = (order, val, val_std, repeats)
        return self._advance(name)

    def record_row(self, cell: str, row: Mapping[str, Any]) -> list[tuple[str, Stop]]:
        """:meth:`record` of a stored ``trials`` row: its start-order key (:func:`start_key`),
        its objective (NaN where it failed), the objective's std and its repeats."""
        val = row.get(OBJECTIVE)
        usable = row.get("status") != Status.FAILED and val is not None and math.isfinite(float(val))
        std = row.get(OBJECTIVE_STD)
        return self.record(cell, start_key(row), float(val) if usable else math.nan,
                           float(std) if std is not None else math.nan, max(len(row.get("repeat_status") or []), 1),
                           str(row.get("trial_id")))

    def stops(self) -> dict[str, Stop]:
        """Every pair's stop so far (open pairs: none)."""
        return {name: pair.stop for name, pair in self._pairs.items() if pair.stop is not None}

    def _advance(self, name: str) -> list[tuple[str, Stop]]:
        pair = self._pairs[name]
        while pair.stop is None:
            ended = [self._ended(cell) for cell in pair.cells]
            if min(arm.n for arm in ended) < pair.look:
                return []
            stop = stop_of(self.rule, self.looks, *(_prefix(arm, pair.look) for arm in ended))
            if stop.k is not None:
                pair.stop = stop
                return [(name, stop)]
            pair.look = stop.next_look or self.looks.maximum
        return []

    def _ended(self, cell: str) -> ArmTrials:
        """The cell's ended trials in start order. A look at k reads the first k: live, a cell
        is given no more than its look, so they are every trial it was given."""
        rows = [values[1:] for values in sorted(self._results[cell].values(), key=lambda values: values[0])]
        val, std, repeats = (np.array(column, dtype=float) for column in zip(*rows)) if rows else ([], [], [])
        return ArmTrials(np.asarray(val, dtype=float), np.asarray(std, dtype=float), np.asarray(repeats, dtype=float))


def _prefix(arm: ArmTrials, k: int) -> ArmTrials:
    return ArmTrials(arm.val[:k], arm.val_std[:k], np.asarray(arm.repeats)[:k])


def start_key(row: Mapping[str, Any]) -> tuple:
    """A stored row's place in the tuning curve's start order (``reports``' ``start_order``):
    its finish less its training seconds, then its finish, search name and trial id."""
    finished = row.get("finished_at")
    seconds = row.get("seconds")
    seconds = float(seconds) if seconds is not None and math.isfinite(float(seconds)) and seconds > 0 else 0.0
    if not isinstance(finished, datetime):
        return (1, datetime.max, datetime.max, str(row.get("search")), str(row.get("trial_id")))
    return (0, finished - timedelta(seconds=seconds), finished, str(row.get("search")), str(row.get("trial_id")))


def budget_of(cells: Iterable[str], rule: StoppingRule, looks: Looks) -> AdaptiveBudget:
    """The adaptive budget of a search's cells (their keys, ``dataset/backbone/depth[/variant]/
    arm``): each place and variant with both default arms is a pair, named by that place; the
    named arms (``core.named_arm``) of a dataset and variant are one group, named by the
    dataset and variant, whose cells all move in lockstep; every other cell (a reference, an
    arm without its partner) follows its dataset's furthest pair."""
    cells = list(cells)
    arms: dict[str, dict[str, str]] = {}
    named: dict[str, list[str]] = {}
    for key in cells:
        place, _, arm = key.rpartition("/")
        if arm in RESERVED_ARM_NAMES:
            arms.setdefault(place, {})[arm] = key
        else:  # dataset/backbone/depth[/variant]/arm: grouped by dataset and variant
            dataset, _, _, *variant = place.split("/")
            named.setdefault("/".join([dataset, *variant, "arms"]), []).append(key)
    both = [arm.key for arm in ARMS]  # original, then Ortho-GConv
    pairs = {place: (keys[both[0]], keys[both[1]]) for place, keys in arms.items() if set(both) <= set(keys)}
    pairs.update({name: tuple(keys) for name, keys in named.items() if len(keys) >= 2})
    paired = {key for keys in pairs.values() for key in keys}
    followers = {key: tuple(name for name in pairs if name.split("/")[0] == key.split("/")[0])
                 for key in cells if key not in paired}
    return AdaptiveBudget(rule, looks, pairs, followers)
