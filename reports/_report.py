"""The report as a pipeline the data walks once, strung together here and nowhere else.

Each stage is one module that takes the previous stages' products and returns its own:

1. load (``_load.load``): the store's trials, filtered, the reference's rows apart: ``Loaded``;
2. select (``_select.select``): each cell's winner, the expected and missing cells: ``Selection``;
3. pair and test (``_pair.pair_and_test``): the pairs, their references and tests, the
   ablations: ``Pairs``; beside it the comparisons of a space's named arms
   (``_arms.compare_arms``), both one Holm family (``_family.one_family``);
4. curve (``_curve.trace_curves``): each pair's tuning curve and settled word: ``Curves``;
   with it each pair's budget and, for an adaptive search, its stop (``_stops.with_stops``),
   and its confirmation on fresh repeats where ``orthotune confirm`` stored one (``_confirmed``);
5. verdict (``_verdict.judge``): one line per pair and the warnings: ``Verdicts``;
6. lay out (``_formats.write_report``): the :class:`Report` as md, csv, latex or html.

Beside stages 1-5 a report computes what it alone shows, from the same products: the
hyperparameter tables (``_hyperparameters``) and the figures (``_plots``, ``_curve_plot``).
``best`` walks stages 1-5 (:func:`best_answer`); a report is computed once (:func:`build_report`)
and the formats only lay it out.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import pandas as pd

from orthotune.reports._arms import ArmComparisons, compare_arms
from orthotune.reports._confirmed import with_confirmations
from orthotune.reports._curve import Curves, PairCurve, trace_curves
from orthotune.reports._curve_plot import curve_figures
from orthotune.reports._family import one_family
from orthotune.reports._hyperparameters import start_importance, t_effect, winners_table
from orthotune.reports._load import CELL, LISTS, SCALARS, Filters, Loaded, load, load_trials, open_store
from orthotune.reports._pair import Pairs, pair_and_test
from orthotune.reports._plots import Figure, epoch_grad_norms, figures
from orthotune.reports._select import TIE_RULE_TEXT, Selection, complete_rows, select, select_best
from orthotune.reports._stats import ALPHA, TEST_NAME
from orthotune.reports._stops import with_stops
from orthotune.reports._verdict import Verdicts, judge, reference_words, smoke_searches, warnings
from orthotune.store import Store

#: The most worker processes a report forks (each fits cells' importance forests).
WORKERS = 8
#: The trials columns a verdict reads for every trial: the scalars and the per-repeat lists
#: (the tuning curve pairs the first k trials' winners repeat by repeat); not the per-layer
#: gradient norms, which only the winners' rows show.
CURVE_COLUMNS = (*SCALARS, *(name for name in LISTS if name.startswith("repeat_")))
#: The trials columns a report reads for every trial: the verdict's (each repeat's selected
#: epoch tells whether a trial was stuck, for the effect of T); the winners' rows are read whole.
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
    arms: ArmComparisons = ArmComparisons()  # a space's named arms: their comparisons and table

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
    arms: ArmComparisons = ArmComparisons()


def best_answer(store: Store | str, filters: Filters | None = None) -> BestAnswer:
    """:func:`best_configs`, :func:`pair_verdicts`, the pairs and their curves from one read:
    stages 1 to 5."""
    loaded = load(store, filters, CURVE_COLUMNS)
    selection = select(loaded)
    tested, arms = _tested(loaded, selection)
    curves = _confirmed(loaded, with_stops(loaded, selection, trace_curves(selection, tested)))
    verdicts = _with_arms(judge(loaded, selection, curves), loaded, arms)
    pairs = curves.summary.assign(reference=[reference_words(row) for _, row in curves.summary.iterrows()])
    return BestAnswer(_every_winner(selection, arms), verdicts, pairs,
                      tuple(curve for curve in curves.curves if curve is not None), arms)


def _tested(loaded: Loaded, selection: Selection) -> tuple[Pairs, ArmComparisons]:
    """The pairs and the named arms' comparisons, tested: one Holm family over both (``_family``)."""
    return one_family(pair_and_test(selection), compare_arms(loaded, selection.reference_winners))


def _confirmed(loaded: Loaded, curves: Curves) -> Curves:
    """The curves' summary with each pair's confirmation on fresh repeats, where the store has one."""
    return replace(curves, summary=with_confirmations(curves.summary, loaded.store))


def _with_arms(verdicts: Verdicts, loaded: Loaded, arms: ArmComparisons) -> Verdicts:
    """The pairs' verdicts with the comparisons' lines, and the warnings on the named arms'
    winners (few trials, the epoch cap) and their searches (a smoke-test space)."""
    if arms.empty:
        return verdicts
    searched = sorted(arms.winners["search"].unique())
    extra = warnings(arms.winners, arms.winners.iloc[:0], smoke_searches(loaded.records, searched))
    return replace(verdicts, comparisons=arms.lines(),
                   warnings=(*verdicts.warnings, *(w for w in extra if w not in verdicts.warnings)))


def _every_winner(selection: Selection, arms: ArmComparisons) -> pd.DataFrame:
    """The arms' winners (the named arms' too) and the reference's, in cell order: their cells
    are apart, so these are :func:`select_best`'s winners of the whole frame, not selected again."""
    frames = [f for f in (selection.winners, arms.winners, selection.reference_winners) if not f.empty]
    if len(frames) <= 1:
        return frames[0] if frames else selection.winners
    return pd.concat(frames).sort_values(list(CELL), kind="stable").reset_index(drop=True)


def tuning_curves(store: Store | str, filters: Filters | None = None) -> list[PairCurve]:
    """The tuning curve of every pair that matches ``filters`` and has a winner in both arms
    (``best --curve``; the report draws the same): stages 1 to 4."""
    selection = select(load(store, filters, CURVE_COLUMNS))
    curves = trace_curves(selection, pair_and_test(selection))
    return [curve for curve in curves.curves if curve is not None]


def build_report(store: Store | str, filters: Filters | None = None, plots: bool = True) -> Report:
    """Walk stages 1 to 5 over ``store`` and compute what the report alone shows beside them:
    the hyperparameter tables and (with ``plots``) the figures."""
    loaded = load(store, filters, REPORT_COLUMNS)
    selection = select(loaded)
    pairs, arms = _tested(loaded, selection)
    curves = _confirmed(loaded, with_stops(loaded, selection, trace_curves(selection, pairs)))
    verdicts = _with_arms(judge(loaded, selection, curves), loaded, arms)
    trials, winners = selection.trials, selection.winners
    effect = t_effect(trials)
    with _workers() as pool:  # the importance's forests fitted while the figures are drawn
        fitted = start_importance(trials, pool)
        drawings = _figures(loaded, selection, curves, effect, arms) if plots else []
        shares = fitted()
    return Report(
        store=loaded.store.uri,
        searches=sorted({*trials["search"].unique(), *loaded.named.get("search", pd.Series(dtype=str)).unique()}),
        filters=loaded.filters,
        generated_at=datetime.now(UTC),
        trials=len(trials) + len(loaded.named),
        failed=int((trials["status"] == "failed").sum()) + int((loaded.named.get("status") == "failed").sum()),
        winners=winners,
        summary=curves.summary,
        missing=selection.missing,
        t_effect=effect,
        hyperparameters=winners_table(winners),
        ablation=pairs.ablation,
        importance=shares,
        figures=drawings,
        verdicts=verdicts,
        curves=curves.curves,
        references=pairs.references,
        arms=arms,
    )


def _figures(loaded: Loaded, selection: Selection, curves: Curves, effect: pd.DataFrame,
             arms: ArmComparisons) -> list[Figure]:
    """Per (dataset, setting) the report's plots, then each pair's tuning curve, then each
    comparison's of named arms."""
    winners = selection.winners
    pairs = [*figures(curves.summary, winners, effect, selection.trials, epoch_grad_norms(loaded.store, winners)),
             *curve_figures(curves.curves, list(curves.summary["stop"]))] if not winners.empty else []
    return [*pairs, *curve_figures(list(arms.curves))]


def _workers() -> contextlib.AbstractContextManager[Executor | None]:
    """Processes for a report's independent work (each cell's fANOVA forest): up to
    :data:`WORKERS`, forked (a spawned or forkserver child would import and run the CLI module
    that started it); None where processes cannot be forked (then the work runs in this one)."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return contextlib.nullcontext()
    workers = max(1, min(WORKERS, os.cpu_count() or 1))
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))
