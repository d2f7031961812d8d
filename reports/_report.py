"""Everything a report shows, computed once; the formats only lay it out."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

import pandas as pd

from orthotune.reports._load import Filters, load_trials, open_store
from orthotune.reports._plots import Figure, figures
from orthotune.reports._select import TIE_RULE_TEXT, select_best
from orthotune.reports._tables import TEST_NAME, expected_cells, missing_cells, summary, t_effect
from orthotune.search.store import Store


@dataclass(frozen=True)
class Report:
    store: str
    searches: list[str]
    filters: Filters
    generated_at: datetime
    trials: int
    failed: int
    winners: pd.DataFrame
    summary: pd.DataFrame
    missing: pd.DataFrame
    t_effect: pd.DataFrame
    figures: list[Figure] = field(default_factory=list)

    selection_rule: str = TIE_RULE_TEXT
    test_name: str = TEST_NAME


def best_configs(store: Store | str, filters: Filters | None = None) -> pd.DataFrame:
    """The validation-best trial of every cell that matches ``filters`` (one row per cell)."""
    return select_best(load_trials(store, filters))


def build_report(store: Store | str, filters: Filters | None = None, plots: bool = True) -> Report:
    """Select the winners of ``store`` and compute the tables (and, with ``plots``, figures)."""
    store, filters = open_store(store), filters or Filters()
    trials = load_trials(store, filters)
    winners = select_best(trials)
    arms = (False, True) if filters.ortho is None else (filters.ortho,)
    expected = expected_cells(trials, arms)
    table = summary(winners, expected)
    effect = t_effect(trials)
    return Report(
        store=store.uri,
        searches=sorted(trials["search"].unique()),
        filters=filters,
        generated_at=datetime.now(UTC),
        trials=len(trials),
        failed=int((trials["status"] == "failed").sum()),
        winners=winners,
        summary=table,
        missing=missing_cells(trials, winners, expected),
        t_effect=effect,
        figures=figures(table, winners, effect) if plots and not winners.empty else [],
    )

