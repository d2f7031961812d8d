"""The replay of an adaptive budget on stored searches (``bench/adaptive_replay.py``): each
pair's stop under a rule, and its verdict there against the fixed budget's (``_stops``)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from orthotune.reports._curve import trace_curves
from orthotune.reports._load import Filters, load
from orthotune.reports._pair import pair_and_test
from orthotune.reports._report import CURVE_COLUMNS
from orthotune.reports._select import select
from orthotune.reports._stops import pair_stops, replay_table
from orthotune.search import FEW_TRIALS, LOOK_STEP, Looks, stopping_rule
from orthotune.store import Store


@dataclass(frozen=True)
class Replay:
    """Per pair (``table``, :func:`_stops.replay_table`'s columns) and the totals."""

    rule: str
    looks: tuple[int, ...]
    table: pd.DataFrame

    @property
    def trial_fraction(self) -> float:
        """Trials the stops train, as a share of the fixed budget's (both arms alike)."""
        stops = self.table["stop"].fillna(self.table["trials"])
        return float(stops.sum() / self.table["trials"].sum()) if len(self.table) else float("nan")

    @property
    def seconds_fraction(self) -> float:
        """Training seconds of the stops' trials, as a share of all the stored trials'."""
        if not len(self.table):
            return float("nan")
        return float(self.table["seconds"].sum() / self.table["seconds_fixed"].sum())


def adaptive_replay(store: Store | str, filters: Filters | None = None, rule: str = "flat", first: int = FEW_TRIALS,
                    step: int = LOOK_STEP, maximum: int | None = None) -> Replay:
    """Each pair of ``store`` (as ``filters`` selects) stopped by ``rule`` at looks ``first``,
    ``first + step``, ... ``maximum`` (default: the fewest trials an arm of a pair holds), and
    its verdict there beside the fixed budget's."""
    chosen = stopping_rule(rule)
    selection = select(load(store, filters, CURVE_COLUMNS))
    trials, curves = selection.trials, trace_curves(selection, pair_and_test(selection)).curves
    whole = [curve for curve in curves if curve is not None]
    most = maximum if maximum is not None else min((min(c.trials_per_arm.values()) for c in whole), default=first)
    looks = Looks(first, step, most)
    return Replay(chosen.name, looks.at(), replay_table(whole, pair_stops(trials, whole, chosen, looks)))
