"""An adaptive budget inside one search: how many trainings each cell may be given now.

Each pair (a place's original and Ortho-GConv cells) starts with its first look's trials per
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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from orthotune.search._stopping import ArmTrials, Looks, Stop, StoppingRule, stop_of


@dataclass
class _Pair:
    original: str
    ortho: str
    look: int  # the look the pair is at (or stopped at)
    stop: Stop | None = None


@dataclass
class AdaptiveBudget:
    """``pairs``: pair name -> (original cell, Ortho-GConv cell); ``references``: reference
    cell -> the names of its dataset's pairs."""

    rule: StoppingRule
    looks: Looks
    pairs: Mapping[str, tuple[str, str]]
    references: Mapping[str, Iterable[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._pairs = {name: _Pair(*cells, self.looks.first) for name, cells in self.pairs.items()}
        self._of = {cell: name for name, cells in self.pairs.items() for cell in cells}
        self._references = {cell: tuple(names) for cell, names in self.references.items()}
        self._results: dict[str, dict[Any, tuple[float, float, int]]] = {cell: {} for cell in self._of}

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

    def record(self, cell: str, order: Any, val: float, val_std: float, repeats: int) -> list[tuple[str, Stop]]:
        """A stored trial of ``cell``: its place in the start order (any sortable key, unique
        in the cell; the same key again replaces), its validation mean (NaN: failed), std and
        repeats; returns the pairs this result stopped, with their stops."""
        name = self._of.get(cell)
        if name is None:
            return []
        self._results[cell][order] = (val, val_std, repeats)
        return self._advance(name)

    def stops(self) -> dict[str, Stop]:
        """Every pair's stop so far (open pairs: none)."""
        return {name: pair.stop for name, pair in self._pairs.items() if pair.stop is not None}

    def _advance(self, name: str) -> list[tuple[str, Stop]]:
        pair = self._pairs[name]
        while pair.stop is None:
            ended = [self._ended(cell) for cell in (pair.original, pair.ortho)]
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
        rows = [self._results[cell][key] for key in sorted(self._results[cell])]
        val, std, repeats = (np.array(column, dtype=float) for column in zip(*rows)) if rows else ([], [], [])
        return ArmTrials(np.asarray(val, dtype=float), np.asarray(std, dtype=float), np.asarray(repeats, dtype=float))


def _prefix(arm: ArmTrials, k: int) -> ArmTrials:
    return ArmTrials(arm.val[:k], arm.val_std[:k], np.asarray(arm.repeats)[:k])
