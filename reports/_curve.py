"""The curve stage, the report's fourth: how much tuning a verdict needs, the paired gain
against the budget, from the stored trials (:func:`trace_curves`, whose :class:`Curves` the
verdict stage takes).

For each pair of the summary, each arm's trials are put in the order they started (see
:func:`start_order`). For k = 1, 2, ... trials per arm, each arm's winner among its first k
trials is chosen by the report's own tie rule (``_select.TIE_RULE``: the order ``select_best``
sorts by, so the k-th point's winner is the one ``select_best`` would pick from those k
trials), and the two winners are compared by the report's own paired test
(``_stats.paired``: matched repeat by repeat, the mean difference, its 95% CI and raw p).
At the full budget the point is the verdict's own comparison. The same is done on a compute
axis: for a budget of E epochs per arm (epochs summed over each trial's repeats, cumulated in
start order), each arm's winner among the trials that fit within E; ASHA stops the arms'
trials at different epochs, so equal trial counts are not equal compute.

The first k trials of a search stand for what a search of k trials with the same seed would
have picked, up to ASHA's concurrency: the searcher proposed those k before the later ones,
but while they ran it had already seen some results of the others running beside them (and
ASHA compared them with the later trials at its rungs), so a real k-trial search can differ.
They do not stand for another seed's search, nor for a k-trial search with another searcher.

Whether a verdict is settled is read off its own curve (:func:`settle`): the rule is stated
in ``docs/reports.md`` and in :data:`SETTLED_RULE`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from orthotune.core import ARMS, OBJECTIVE
from orthotune.reports._load import CELL, LEAD, ORIGINAL, VARIANT
from orthotune.reports._pair import Pairs, pair_label
from orthotune.reports._select import TIE_RULE, Selection, eligible, plain, plain_records, tidy
from orthotune.reports._stats import paired
from orthotune.search import FEW_TRIALS

#: An arm whose winner was found in this last share of its trials was still improving.
LATE_SHARE = 0.25
#: The shortest budget (trials per arm) whose last half holds two points: a shorter curve
#: can show no trend, so it is neither judged nor drawn.
MIN_TRIALS = 3
#: The columns of a curve's points, each arm's winner with its prefix (``orig_``, ``ortho_``).
_ARM_POINT = ("trials", "epochs", "trial_id", OBJECTIVE, "test_acc", "repeat_test_acc")
POINT_COLUMNS = [*(f"{arm.prefix}_{name}" for arm in ARMS for name in _ARM_POINT),
                 "n_pairs", "diff_mean", "ci_low", "ci_high", "p", "note"]
SETTLED_RULE = (
    "A verdict is settled when every gain of its curve over the last half of the budget (the points k > n/2 of n "
    "trials per arm) lies inside the 95% CI of the gain at the full budget; otherwise it is not: 'changed sign "
    "at k = X' when a point of the last half has the other sign and lies outside that CI (X: from where on the "
    "sign is the final one), else 'still shrinking' when the latest point outside the CI is further from zero "
    "than the final gain (more trials brought the gain closer to zero), 'still growing' when nearer. Not judged: "
    f"fewer than {MIN_TRIALS} trials per arm (one point in the last half), or no CI at the full budget; a stable "
    f"curve of fewer than {FEW_TRIALS} trials per arm (winners barely tuned) is not called settled.")


@dataclass(frozen=True)
class Settled:
    """Whether a verdict is settled (None: the curve cannot tell) and why, in words."""

    settled: bool | None
    word: str


@dataclass(frozen=True)
class PairCurve:
    """One pair's curve: ``trials`` has one point per k (trials per arm), ``epochs`` one per
    compute budget E (epochs per arm); ``trials_per_arm`` is each arm's number of trials."""

    pair: dict[str, Any]  # the summary row's place, variant and switches
    label: str  # as the verdict line names the pair
    trials: pd.DataFrame
    epochs: pd.DataFrame
    settled: Settled
    trials_per_arm: dict[str, int] = field(default_factory=dict)
    late: dict[str, tuple[int, int]] = field(default_factory=dict)  # arm: (winner's position, trials)
    cells: tuple[tuple, ...] = ()  # the two arms' cells (``CELL`` keys)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON/YAML-ready values (``best --json --curve``)."""
        return {**{k: tidy(plain(v)) for k, v in self.pair.items()}, "pair": self.label,
                "settled": self.settled.settled, "word": self.settled.word,
                "trials_per_arm": dict(self.trials_per_arm),
                "by_trials": plain_records(self.trials), "by_epochs": plain_records(self.epochs)}


@dataclass(frozen=True)
class CurveNote:
    """What a curve says about tuning that the budget alone would not: ``text``, about the
    cells (``CELL`` keys) it covers."""

    text: str
    cells: frozenset[tuple] = frozenset()


@dataclass(frozen=True)
class Curves:
    """The curve stage's product: the pairs' summary with each pair's ``settled`` word, the
    pairs' curves (per summary row; None where a pair lacks an arm's winner) and what they add
    to the warnings."""

    summary: pd.DataFrame
    curves: list[PairCurve | None]
    notes: list[CurveNote]


def trace_curves(selection: Selection, pairs: Pairs) -> Curves:
    """The curve stage: each pair's tuning curve from the arms' trials; the summary with each
    pair's settled word (empty where it has no curve); the curves' notes."""
    curves = pair_curves(selection.trials, pairs.summary)
    settled = pairs.summary.assign(settled=[c.settled.word if c is not None else "" for c in curves])
    return Curves(settled, curves, curve_notes(curves))


# -- order -----------------------------------------------------------------------------------

def start_order(trials: pd.DataFrame) -> pd.DataFrame:
    """``trials`` sorted into the order they started, with ``position`` (1, 2, ... within the
    cell) and ``trained_epochs`` (epochs summed over its repeats).

    The store does not hold when a trial started, nor the searcher's proposal number (Tune's
    trial ids are random), so the start is read as ``finished_at`` minus ``seconds`` (the
    trial's training time; a missing one counts as 0, ordering by the finish); ties go to the
    earlier finish, then search name and trial id. A search resumed after an interruption
    continues in the same order, and several searches of one cell follow each other in time."""
    if trials.empty:
        return trials.assign(position=pd.Series(dtype=int), trained_epochs=pd.Series(dtype=int))
    finished = pd.to_datetime(trials["finished_at"], utc=True)
    seconds = pd.to_numeric(trials["seconds"], errors="coerce").fillna(0.0).clip(lower=0.0)
    frame = trials.assign(_start=finished - pd.to_timedelta(seconds, unit="s"), _finished=finished,
                          trained_epochs=_trained_epochs(trials["repeat_epochs"], trials["epochs"]))
    frame = frame.sort_values(["_start", "_finished", "search", "trial_id"], na_position="last", kind="stable")
    frame["position"] = frame.groupby(list(CELL), sort=False, dropna=False).cumcount() + 1
    return frame.drop(columns=["_start", "_finished"])


def _trained_epochs(repeat_epochs: pd.Series, most: pd.Series) -> list[int]:
    """:func:`_trained` of every trial; the whole integer arrays (what a stored list without
    nulls reads as) are summed together in one call (a call per trial was most of the start
    order at 10^5 trials), anything else goes through :func:`_trained`."""
    arrays = repeat_epochs.tolist()
    whole = [i for i, r in enumerate(arrays) if isinstance(r, np.ndarray) and r.dtype.kind in "iu" and len(r)]
    out = [_trained(r, e) for r, e in zip(arrays, most.tolist())] if len(whole) < len(arrays) else [0] * len(arrays)
    if whole:
        lengths = np.array([len(arrays[i]) for i in whole], dtype=np.int64)
        flat = np.concatenate([arrays[i] for i in whole]).astype(np.int64)
        for i, total in zip(whole, np.add.reduceat(flat, np.cumsum(lengths) - lengths).tolist()):
            out[i] = total
    return out


def _trained(repeat_epochs: object, most: object) -> int:
    """Epochs a trial trained, summed over its repeats (its ``epochs`` column, the most over
    the repeats, where the per-repeat values are missing)."""
    values = [int(v) for v in (repeat_epochs if repeat_epochs is not None else []) if _finite(v)]
    if values:
        return sum(values)
    return int(most) if _finite(most) else 0


def _finite(value: object) -> bool:
    try:
        return value is not None and math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


# -- first-k winners -------------------------------------------------------------------------

def _tie_ranks(trials: pd.DataFrame) -> pd.Series:
    """Each eligible trial's place in the tie rule's order (lower wins; ineligible: absent).
    The same sort as ``select_best``'s, so the best rank among any set of a cell's trials is
    the trial ``select_best`` picks from that set."""
    columns, ascending = zip(*TIE_RULE)
    ordered = eligible(trials).sort_values(list(columns), ascending=list(ascending), na_position="last",
                                           kind="stable")
    return pd.Series(np.arange(len(ordered)), index=ordered.index)


@dataclass(frozen=True)
class _Arm:
    """One cell's trials in start order: the winner among the first k (index or None) and the
    cumulative epochs after k trials, for k = 1 .. n."""

    winners: list[Any]
    epochs: np.ndarray

    @property
    def n(self) -> int:
        return len(self.winners)

    def winner(self, count: int) -> Any:
        return self.winners[count - 1] if count > 0 else None


def _arm(cell: pd.DataFrame, ranks: pd.Series) -> _Arm:
    rank = ranks.reindex(cell.index).to_numpy(dtype=float)
    rank = np.where(np.isnan(rank), np.inf, rank)  # not eligible: never a winner
    best = np.minimum.accumulate(rank) if len(rank) else rank
    by_rank = {r: i for i, r in zip(cell.index, rank.tolist()) if math.isfinite(r)}
    winners = [by_rank.get(b) if math.isfinite(b) else None for b in best.tolist()]
    return _Arm(winners, np.cumsum(cell["trained_epochs"].to_numpy(dtype=np.int64)))


# -- curves ----------------------------------------------------------------------------------

def pair_curves(trials: pd.DataFrame, summary: pd.DataFrame) -> list[PairCurve | None]:
    """One curve per summary row (None where the pair lacks a winner in an arm), in its order."""
    if trials.empty or summary.empty:
        return [None] * len(summary)
    # the columns the curves read, alone: sorting and filtering a frame takes every column it holds
    ordered = start_order(trials[[c for c in trials.columns if c in _CURVE_READS]])
    ranks = _tie_ranks(ordered)
    # the summary's winners' places in ``ordered`` (a lookup of its few rows, not of every trial)
    ids = {row[f"{arm.prefix}_trial_id"] for _, row in summary.iterrows() for arm in ARMS}
    few = ordered[ordered["trial_id"].isin([i for i in ids if isinstance(i, str)])]
    where = {(s, t): i for i, s, t in zip(few.index, few["search"], few["trial_id"])}
    # the narrow frames the arms and the comparisons read (a wide frame's rows are slow to take)
    cells = {key: group for key, group in ordered[[*CELL, "trained_epochs"]].groupby(list(CELL), sort=False,
                                                                                      dropna=False)}
    compared = _Rows(ordered[list(_COMPARED)])
    arms: dict[tuple, _Arm] = {}
    out: list[PairCurve | None] = []
    for _, row in summary.iterrows():
        found = [where.get((row[f"{arm.prefix}_search"], row[f"{arm.prefix}_trial_id"])) for arm in ARMS]
        if any(index is None for index in found):
            out.append(None)
            continue
        keys = [tuple(ordered.loc[index, c] for c in CELL) for index in found]
        for key in keys:
            if key not in arms:
                arms[key] = _arm(cells[key], ranks)
        out.append(_curve(row, compared, arms[keys[0]], arms[keys[1]], tuple(keys)))
    return out


def _curve(row: pd.Series, ordered: _Rows, original: _Arm, ortho: _Arm, cells: tuple) -> PairCurve:
    setting = row["setting"]
    cache: dict[tuple, dict[str, Any]] = {}
    n = max(original.n, ortho.n)
    k = np.arange(1, n + 1, dtype=np.int64)
    trials_frame = _points("k", k, np.minimum(k, original.n), np.minimum(k, ortho.n), original, ortho,
                           lambda winners: _compare(setting, ordered, winners), cache)
    budgets = np.array(sorted(set(original.epochs.tolist()) | set(ortho.epochs.tolist())), dtype=np.int64)
    counts = [np.searchsorted(arm.epochs, budgets, side="right").astype(np.int64) for arm in (original, ortho)]
    fits = (counts[0] > 0) & (counts[1] > 0)
    epochs_frame = _points("epochs", budgets[fits], counts[0][fits], counts[1][fits], original, ortho,
                           lambda winners: _compare(setting, ordered, winners), cache)
    pair = {c: row[c] for c in (*LEAD, VARIANT, "switches")}
    sizes = {arm.name: arm_trials.n for arm, arm_trials in zip(ARMS, (original, ortho))}
    late = {arm.name: spot for arm, arm_trials in zip(ARMS, (original, ortho)) if (spot := _late(arm_trials))}
    return PairCurve(pair, pair_label(row), trials_frame, epochs_frame, settle(trials_frame), sizes, late, cells)


def _points(axis: str, values: np.ndarray, first: np.ndarray, second: np.ndarray, original: _Arm, ortho: _Arm,
            compare: Any, cache: dict[tuple, dict[str, Any]]) -> pd.DataFrame:
    """A curve's points: per ``values`` (k, or an epoch budget), each arm's winner among its
    first ``first``/``second`` trials (counts >= 1) compared. Each distinct pair of winners is
    compared once (``cache``) and its columns repeated over the points it holds for."""
    columns = [axis, *POINT_COLUMNS]
    if not len(values):
        return pd.DataFrame([], columns=columns)
    pairs = list(zip([original.winners[c - 1] for c in first.tolist()],
                     [ortho.winners[c - 1] for c in second.tolist()]))
    codes: dict[tuple, int] = {}
    index = np.array([codes.setdefault(p, len(codes)) for p in pairs], dtype=np.int64)
    for winners in codes:
        if winners not in cache:
            cache[winners] = compare(winners)
    # built from the distinct comparisons' dicts: each column's type is inferred from the same
    # values as a frame of one dict per point would be
    compared = pd.DataFrame([cache[w] for w in codes]).take(index).reset_index(drop=True)
    sizes = {axis: values, f"{ARMS[0].prefix}_trials": first, f"{ARMS[0].prefix}_epochs": original.epochs[first - 1],
             f"{ARMS[1].prefix}_trials": second, f"{ARMS[1].prefix}_epochs": ortho.epochs[second - 1]}
    return pd.concat([pd.DataFrame(sizes), compared], axis=1)[columns]


#: The columns of a winner's row that :func:`_compare` reads (``paired`` reads the repeats).
_COMPARED = ("search", "trial_id", OBJECTIVE, "test_acc", "repeat_test_acc", "repeat_split", "repeat_seed",
             "repeat_status")


#: The columns :func:`pair_curves` reads: the cell, the start order's, the tie rule's and
#: eligibility's, and the comparisons'.
_CURVE_READS = frozenset({*CELL, "finished_at", "seconds", "repeat_epochs", "epochs", "status",
                          *(c for c, _ in TIE_RULE), *_COMPARED})


class _Rows(dict):
    """A frame's rows by index label, each taken once: a winner is compared in many pairs, and
    a row of Arrow-backed columns is a take per column (most of `best`'s curves at 10^5 trials)."""

    def __init__(self, frame: pd.DataFrame) -> None:
        super().__init__()
        self.frame = frame

    def __missing__(self, index: Any) -> pd.Series:
        row = self[index] = self.frame.loc[index]
        return row


def _compare(setting: str, ordered: _Rows, winners: tuple[Any, Any]) -> dict[str, Any]:
    rows = [None if index is None else ordered[index] for index in winners]
    values: dict[str, Any] = {}
    for arm, winner in zip(ARMS, rows):
        for name in ("trial_id", OBJECTIVE, "test_acc", "repeat_test_acc"):
            value = None if winner is None else winner[name]
            values[f"{arm.prefix}_{name}"] = list(value) if name == "repeat_test_acc" and value is not None else value
    test = paired(setting, rows[0], rows[1])
    return {**values, **{name: getattr(test, name) for name in ("n_pairs", "diff_mean", "ci_low", "ci_high", "p",
                                                                  "note")}}


def _late(arm: _Arm) -> tuple[int, int] | None:
    """(winner's position, trials) where the arm's final winner came in its last
    :data:`LATE_SHARE` of trials and improved on an earlier one; else None (and for fewer than
    :data:`MIN_TRIALS` trials, which the budget warning covers)."""
    final = arm.winner(arm.n)
    if final is None or arm.n < MIN_TRIALS:
        return None
    position = arm.winners.index(final) + 1  # where it first became the winner
    improved = position > 1 and any(w is not None for w in arm.winners[:position - 1])
    return (position, arm.n) if improved and position > arm.n * (1 - LATE_SHARE) else None


# -- the rule --------------------------------------------------------------------------------

def settle(points: pd.DataFrame) -> Settled:
    """Whether the verdict of a curve (its ``k`` points, the last at the full budget) is
    settled, by :data:`SETTLED_RULE`."""
    if points.empty:
        return Settled(None, "no curve")
    n = int(points["k"].max())
    final = points.iloc[-1]
    low, high, gain = (float(final[c]) if _finite(final[c]) else math.nan for c in ("ci_low", "ci_high", "diff_mean"))
    if not (math.isfinite(low) and math.isfinite(high)):
        return Settled(None, "not judged: no CI at the full budget")
    diffs = points["diff_mean"].astype(float)
    half = points[(2 * points["k"] > n) & np.isfinite(diffs)]
    if n < MIN_TRIALS or len(half) < 2:
        return Settled(None, f"not judged: {n} trial(s) per arm, too few for a curve")
    values = half["diff_mean"].astype(float)
    outside = half[(values < low) | (values > high)]
    if outside.empty:
        stable = f"stable over the last half of the budget (k = {int(half['k'].min())}..{n})"
        if n < FEW_TRIALS:  # winners barely tuned: a flat curve of random draws is no all-clear
            return Settled(None, f"not judged: {n} trials per arm, fewer than the {FEW_TRIALS} a settled word needs "
                                 f"({stable})")
        return Settled(True, stable)
    sign = np.sign(gain)
    flipped = outside[np.sign(outside["diff_mean"].astype(float)) == -sign] if sign != 0 else outside.iloc[:0]
    if len(flipped):
        opposite = half[np.sign(values) == -sign]
        after = half[half["k"] > int(opposite["k"].max())]
        return Settled(False, f"changed sign at k = {int(after['k'].min())}")
    latest = outside.iloc[-1]
    further = abs(float(latest["diff_mean"])) > abs(gain)
    word = "still shrinking" if further else "still growing"
    return Settled(False, f"{word} ({100 * float(latest['diff_mean']):+.2f} pts at k = {int(latest['k'])}, outside "
                          f"the 95% CI at k = {n})")


# -- what the curves add to the warnings -----------------------------------------------------

def curve_notes(curves: Sequence[PairCurve | None]) -> list[CurveNote]:
    """Per pair with an arm whose winner came late (:func:`_late`), what that means for the
    gain; each note covers the pair's two cells."""
    notes = []
    for curve in curves:
        if curve is None or not curve.late:
            continue
        gain = curve.trials["diff_mean"].iloc[-1]
        noun = "loss" if _finite(gain) and float(gain) < 0 else "gain"
        notes.append(CurveNote(f"{curve.label}: {_late_words(curve.late, noun)}", frozenset(curve.cells)))
    return notes


def _late_words(late: dict[str, tuple[int, int]], noun: str) -> str:
    where = "; ".join(f"{arm}: trial {position} of {n}" for arm, (position, n) in late.items())
    share = f"the last {round(100 * LATE_SHARE)}%"
    if len(late) > 1:
        return (f"both arms' winners improved in {share} of their trials ({where}): more trials may move the "
                f"{noun} either way")
    (arm,) = late
    # the gain is Ortho-GConv minus original: an original arm still improving pulls it down
    down = arm == ORIGINAL
    change = ("shrink" if down else "grow") if noun == "gain" else ("grow" if down else "shrink")
    return f"the {arm} arm's winner improved in {share} of its trials ({where}): the {noun} may {change} with more"
