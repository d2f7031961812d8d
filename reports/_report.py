"""Everything a report shows, computed once; the formats only lay it out."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pandas as pd

from orthotune.reports._curve import PairCurve, curve_notes, pair_curves, with_settled
from orthotune.reports._curve_plot import curve_figures
from orthotune.reports._load import (
    CELL,
    LISTS,
    SCALARS,
    Filters,
    complete_rows,
    load_trials,
    open_store,
    split_reference,
)
from orthotune.reports._plots import Figure, figures
from orthotune.reports._select import TIE_RULE_TEXT, select_best
from orthotune.reports._stops import with_budgets
from orthotune.reports._tables import (
    ALPHA,
    TEST_NAME,
    ablation,
    expected_cells,
    missing_cells,
    reference_table,
    start_importance,
    summary,
    t_effect,
    winners_table,
)
from orthotune.reports._verdict import Verdicts, reference_words, smoke_searches, verdicts
from orthotune.store import Store

#: The most worker processes a report forks (each fits cells' importance forests).
WORKERS = 8
#: The epochs-table column of per-layer gradient norms (recorded every k epochs), if the
#: store has it; the paper's Figure 1(b, c) is drawn from it.
EPOCH_GRAD_NORMS = "grad_norms"
#: The trials columns a report reads for every trial: the scalars, and each repeat's selected
#: epoch (whether a trial was stuck, for the effect of T); the winners' rows are read whole.
#: The trials columns a verdict reads for every trial: the scalars and the per-repeat lists
#: (the tuning curve pairs the first k trials' winners repeat by repeat); not the per-layer
#: gradient norms, which only the winners' rows show.
CURVE_COLUMNS = (*SCALARS, *(name for name in LISTS if name.startswith("repeat_")))
REPORT_COLUMNS = CURVE_COLUMNS


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
    hyperparameters: pd.DataFrame = field(default_factory=pd.DataFrame)  # the winners table
    ablation: pd.DataFrame = field(default_factory=pd.DataFrame)
    importance: pd.DataFrame = field(default_factory=pd.DataFrame)
    figures: list[Figure] = field(default_factory=list)
    references: pd.DataFrame = field(default_factory=pd.DataFrame)  # the structure-agnostic reference's
    verdicts: Verdicts = Verdicts((), ())  # the summary the report opens with
    curves: list[PairCurve | None] = field(default_factory=list)  # per summary row, its tuning curve

    selection_rule: str = TIE_RULE_TEXT
    test_name: str = TEST_NAME
    alpha: float = ALPHA


def best_configs(store: Store | str, filters: Filters | None = None) -> pd.DataFrame:
    """The validation-best trial of every cell that matches ``filters`` (one row per cell)."""
    store = open_store(store)
    return complete_rows(store, select_best(load_trials(store, filters, SCALARS)))


def pair_verdicts(store: Store | str, filters: Filters | None = None) -> Verdicts:
    """The verdict line of every pair that matches ``filters`` and the warnings on them (what
    ``launch`` ends with and ``best`` prints; the report opens with the same)."""
    return best_answer(store, filters).verdicts


@dataclass(frozen=True)
class BestAnswer:
    """What ``best`` answers, from one read of the trials: every cell's winner (the
    structure-agnostic reference's too), the verdicts, one row per pair (each arm's winner,
    the paired test, the verdict, the reference's ``ref_*`` columns and its words
    ``reference``, the tuning curve's ``settled`` word) and the pairs' tuning curves."""

    winners: pd.DataFrame
    verdicts: Verdicts
    pairs: pd.DataFrame
    curves: tuple[PairCurve, ...]


def best_answer(store: Store | str, filters: Filters | None = None) -> BestAnswer:
    """:func:`best_configs`, :func:`pair_verdicts`, the pairs and their curves from one read."""
    store, filters = open_store(store), filters or Filters()
    frame = load_trials(store, filters, CURVE_COLUMNS)
    trials, winners, table, missing, curves, reference_winners = _pairs(store, frame, filters)
    pairs = table.assign(reference=[reference_words(row) for _, row in table.iterrows()])
    # the table shows the reference's winners too: the arms' and the reference's (their cells
    # are apart, so these are select_best's winners of the whole frame), not selected again
    every = winners if reference_winners.empty else pd.concat([winners, reference_winners]).sort_values(
        list(CELL), kind="stable").reset_index(drop=True)
    return BestAnswer(every,
                      _verdicts(store, trials, winners, table, missing, curves), pairs,
                      tuple(curve for curve in curves if curve is not None))


def tuning_curves(store: Store | str, filters: Filters | None = None) -> list[PairCurve]:
    """The tuning curve of every pair that matches ``filters`` and has a winner in both arms
    (``best --curve``; the report draws the same)."""
    store, filters = open_store(store), filters or Filters()
    curves = _pairs(store, load_trials(store, filters, CURVE_COLUMNS), filters)[4]
    return [curve for curve in curves if curve is not None]


def _pairs(store: Store, frame: pd.DataFrame, filters: Filters) -> tuple[
        pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame, list[PairCurve | None], pd.DataFrame]:
    """The arms' trials (of ``frame``, read by :func:`load_trials`), their winners, the pairs'
    summary (with each pair's settled word and its reference), the missing cells, the
    pairs' tuning curves and the reference's winners (whole rows)."""
    trials, references, reference_winners = _arms_and_reference(store, frame)
    winners = complete_rows(store, select_best(trials))
    expected = expected_cells(trials, _arms(filters))
    table, curves = _with_curves(trials, summary(winners, expected, references))
    table = with_budgets(table, trials, curves, store.searches())
    return trials, winners, table, missing_cells(trials, winners, expected), curves, reference_winners


def _with_curves(trials: pd.DataFrame, table: pd.DataFrame) -> tuple[pd.DataFrame, list[PairCurve | None]]:
    """The summary with each pair's settled word, and the curves it was read from."""
    curves = pair_curves(trials, table)
    return with_settled(table, curves), curves


def _arms_and_reference(store: Store, frame: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The arms' trials of ``frame``, the structure-agnostic reference of each setting,
    dataset and split rule (``reference_table``, from its winners' whole rows: ``frame`` may
    hold only the columns selection reads), and those winners."""
    arms, reference = split_reference(frame)
    winners = complete_rows(store, select_best(reference)) if len(reference) else reference
    return arms, reference_table(winners), winners


def _arms(filters: Filters) -> tuple[bool, ...]:
    return (False, True) if filters.ortho is None else (filters.ortho,)


def _verdicts(store: Store, trials: pd.DataFrame, winners: pd.DataFrame, table: pd.DataFrame,
              missing: pd.DataFrame, curves: list[PairCurve | None]) -> Verdicts:
    searched = sorted(trials["search"].unique()) if len(trials) else []
    return verdicts(table, winners, missing, smoke_searches(store.searches(), searched), curve_notes(curves))


def build_report(store: Store | str, filters: Filters | None = None, plots: bool = True) -> Report:
    """Select the winners of ``store`` and compute the tables (and, with ``plots``, figures)."""
    store, filters = open_store(store), filters or Filters()
    trials, references, _ = _arms_and_reference(store, load_trials(store, filters, REPORT_COLUMNS))
    winners = complete_rows(store, select_best(trials))
    expected = expected_cells(trials, _arms(filters))
    table, curves = _with_curves(trials, summary(winners, expected, references))
    table = with_budgets(table, trials, curves, store.searches())
    missing = missing_cells(trials, winners, expected)
    effect = t_effect(trials)
    drawn = plots and not winners.empty
    with _workers() as pool:  # the importance's forests fitted while the figures are drawn
        fitted = start_importance(trials, pool)
        drawings = [*figures(table, winners, effect, trials, _epoch_grad_norms(store, winners)),
                    *curve_figures(curves, list(table["stop"]))] if drawn else []
        shares = fitted()
    return Report(
        store=store.uri,
        searches=sorted(trials["search"].unique()),
        filters=filters,
        generated_at=datetime.now(UTC),
        trials=len(trials),
        failed=int((trials["status"] == "failed").sum()),
        winners=winners,
        summary=table,
        missing=missing,
        t_effect=effect,
        hyperparameters=winners_table(winners),
        ablation=ablation(winners),
        importance=shares,
        figures=drawings,
        verdicts=_verdicts(store, trials, winners, table, missing, curves),
        curves=curves,
        references=references,
    )


def _workers() -> contextlib.AbstractContextManager[Executor | None]:
    """Processes for a report's independent work (each cell's fANOVA forest): up to
    :data:`WORKERS`, forked (a spawned or forkserver child would import and run the CLI module
    that started it); None where processes cannot be forked (then the work runs in this one)."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return contextlib.nullcontext()
    workers = max(1, min(WORKERS, os.cpu_count() or 1))
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))


def _epoch_grad_norms(store: Store, winners: pd.DataFrame) -> pd.DataFrame | None:
    """The winners' per-epoch per-layer gradient norms (their epochs rows alone), or None where
    the store has none."""
    if winners.empty:
        return None
    columns = ["search", "trial_id", "repeat", "epoch", EPOCH_GRAD_NORMS]
    frame = store.read("epochs", columns=columns, trials=zip(winners["search"], winners["trial_id"])).to_pandas()
    return frame[frame[EPOCH_GRAD_NORMS].notna()]
