"""The verdict stage, the report's fifth: one line per pair, and the warnings that say when the
verdicts mean little (:func:`judge`). Derived from the earlier stages' products (the summary
with its curves' words, the winners, the missing cells) and the searches' records, here and
nowhere else: ``launch`` ends with these lines, ``best`` prints them and the report opens
with them.

Warnings, each from the data:

- a smoke-test space (``smoke_test: true`` in the space file, as in the ``quick`` preset): short training and a
  small budget to show the tool runs; not evidence for or against Ortho-GConv;
- few trials: a winner chosen among fewer than :data:`FEW_TRIALS` trials of its cell, where
  the tuning curve (``_curve``) says nothing more about its pair;
- the curve's statements (``_curve.curve_notes``): an arm whose winner came in the last
  quarter of its trials, and which way that may move the gain;
- still improving: a winner whose validation-best epoch is its epoch cap (``best_epoch ==
  max_epochs``): more epochs might have changed the result;
- cells without a winner (no trials, or all failed): their pairs have no test.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from orthotune.reports._curve import Curves
from orthotune.reports._load import CELL, PLACE, VARIANT, Loaded
from orthotune.reports._pair import pair_label
from orthotune.reports._select import Selection
from orthotune.search import FEW_TRIALS as SEARCH_FEW_TRIALS

#: Fewer trials than this in a cell and its winner is flagged (``search.FEW_TRIALS``, where
#: an adaptive budget's first look may come no sooner: TPE's first 10 proposals are random,
#: so below 20 trials a winner is close to the best of a few random draws and an arm can lose
#: by being under-tuned).
FEW_TRIALS = SEARCH_FEW_TRIALS


@dataclass(frozen=True)
class Verdicts:
    """One line per pair (``lines``) and the warnings that qualify them (``warnings``)."""

    lines: tuple[str, ...]
    warnings: tuple[str, ...]
    comparisons: tuple[str, ...] = ()  # one line per comparison of named arms (``_arms``)

    def text(self) -> str:
        """The lines and the warnings as the terminal shows them."""
        out = ["verdict per pair (Ortho-GConv − original test accuracy, selected on validation):",
               *(f"  {line}" for line in self.lines)] if self.lines or not self.comparisons else []
        if self.comparisons:
            family = "every comparison, the pairs above included" if self.lines else "every comparison"
            out += ["verdict per comparison (arm − baseline test accuracy, selected on validation; Holm over "
                    f"{family}):", *(f"  {line}" for line in self.comparisons)]
        out += [f"warning: {w}" for w in self.warnings]
        return "\n".join(out)


def judge(loaded: Loaded, selection: Selection, curves: Curves) -> Verdicts:
    """The verdict stage: :func:`verdicts` of the pairs (with their curves' words) and the
    warnings, the searches that ran a smoke-test space read from the loaded records."""
    trials = selection.trials
    searched = sorted(trials["search"].unique()) if len(trials) else []
    return verdicts(curves.summary, selection.winners, selection.missing,
                    smoke_searches(loaded.records, searched), curves.notes)


def verdicts(summary: pd.DataFrame, winners: pd.DataFrame, missing: pd.DataFrame,
             smoke_searches: Iterable[str] = (), notes: Iterable[Any] = ()) -> Verdicts:
    """The verdict lines of ``summary`` (one per row, in its order; each beside the
    structure-agnostic reference, :func:`reference_words`, then with its tuning curve's word
    where the summary has one, ``settled``, and its confirmation on fresh repeats where it has
    one, ``confirm_words``) and the warnings."""
    lines = tuple(f"{pair_label(row)}: {row['verdict']}; {_budget(row)}{reference_words(row)}{_settled(row)}"
                  f"{row.get('confirm_words') or ''}" for _, row in summary.iterrows())
    return Verdicts(lines + adaptive_total(summary), tuple(warnings(winners, missing, smoke_searches, notes)))


def adaptive_total(summary: pd.DataFrame) -> tuple[str, ...]:
    """With pairs of an adaptive budget, one line: the trials their arms trained against the
    maximum (``_stops.with_budgets``' columns)."""
    if "budget" not in summary or not (summary["budget"] == "adaptive").any():
        return ()
    adaptive = summary[summary["budget"] == "adaptive"]
    trained = int(sum(2 * (stop if stop == stop and stop is not None else n)
                      for stop, n in zip(adaptive["stop"], adaptive["trials_per_arm"])))
    most = int(2 * adaptive["maximum"].astype(int).sum())
    return (f"adaptive budget: its {len(adaptive)} pair(s) trained {trained} of {most} trials "
            f"({100 * trained / most:.0f}%), the rest spared by their stops",)


#: How a verdict names the reference (``core.REFERENCE``).
BASELINE = "the structure-agnostic baseline"


def reference_words(row: Mapping[str, Any]) -> str:
    """The reference's test accuracy (mean +- std over its repeats) and, in words, where the
    pair's arms fall against it (:func:`reference_place`)."""
    ref, std = _float(row.get("ref_test_acc")), _float(row.get("ref_test_acc_std"))
    if not math.isfinite(ref):
        return reference_place(row)
    head = f"structure-agnostic baseline {100 * ref:.2f}" + (f" +- {100 * std:.2f}" if math.isfinite(std) else "")
    return f"{head}: {reference_place(row)}"


def reference_place(row: Mapping[str, Any]) -> str:
    """Where the pair's arms fall against the reference, in words: below or above it *beyond
    its 95% confidence interval* (its mean's Student-t interval over its repeats; with one
    repeat, its mean), or within it."""
    ref = _float(row.get("ref_test_acc"))
    if not math.isfinite(ref):
        return (f"no structure-agnostic baseline for {row.get('dataset')} in the store (a space with "
                f"reference: true searches it)")
    low, high = _float(row.get("ref_ci_low")), _float(row.get("ref_ci_high"))
    if not (math.isfinite(low) and math.isfinite(high)):
        low = high = ref
    arms = {"original": _float(row.get("orig_test_acc")), "Ortho-GConv": _float(row.get("ortho_test_acc"))}
    arms = {name: value for name, value in arms.items() if math.isfinite(value)}
    if not arms:
        return "no arm has a winner"
    below = {n: low - v for n, v in arms.items() if v < low}
    above = {n: v - high for n, v in arms.items() if v > high}
    within = [n for n in arms if n not in below and n not in above]
    both = len(arms) == 2
    if both and len(below) == 2:
        gap = ref - max(arms.values())
        gain = _float(row.get("diff_mean"))
        tail = ("the Ortho-GConv gain does not make this backbone useful on this dataset" if gain > 0
                else "neither arm makes this backbone useful on this dataset")
        return f"both arms below {BASELINE} by {100 * gap:.1f} pts: the graph hurts here; {tail}"
    if both and len(above) == 2:
        gap = min(arms.values()) - ref
        return f"both arms above {BASELINE} (by {100 * gap:.1f} pts or more): the graph helps here"
    if both and len(below) == 1:
        (name, _), = below.items()
        other = next(n for n in arms if n != name)
        where = (f"above it by {100 * (arms[other] - ref):.1f} pts" if other in above
                 else "within its 95% CI")
        return (f"only the {name} arm below {BASELINE} (by {100 * (ref - arms[name]):.1f} pts); "
                f"the {other} arm {where}")
    if both and len(above) == 1:
        (name, _), = above.items()
        return (f"only the {name} arm above {BASELINE} (by {100 * (arms[name] - ref):.1f} pts); "
                f"the other within its 95% CI: the graph's help is not shown for both arms")
    if both:
        return f"both arms within the 95% CI of {BASELINE}: the graph neither clearly helps nor hurts here"
    (name, value), = arms.items()
    place = ("below" if name in below else "above" if name in above else "within the 95% CI of")
    gap = f" by {100 * abs(value - ref):.1f} pts" if name not in within else ""
    return f"the {name} arm (the only one with a winner) {place} {BASELINE}{gap}"


def _float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _budget(row: pd.Series) -> str:
    """The pair's budget and, with an adaptive one, why it stopped (``_stops.with_budgets``)."""
    words = row.get("budget_words")
    return f"{words}; " if isinstance(words, str) and words else ""


def _settled(row: pd.Series) -> str:
    word = row.get("settled")
    return f"; tuning curve: {word}" if isinstance(word, str) and word else ""


def warnings(winners: pd.DataFrame, missing: pd.DataFrame, smoke_searches: Iterable[str] = (),
             notes: Iterable[Any] = ()) -> list[str]:
    """What makes the verdicts weak, in words (see the module doc); empty when nothing does.
    ``notes``: the tuning curves' statements (``_curve.CurveNote``: ``text``, and the ``cells``
    it covers, which the few-trials warning then leaves to it)."""
    notes = list(notes)
    covered = {cell for note in notes for cell in note.cells}
    out = []
    smoke = sorted(set(smoke_searches))
    if smoke:
        out.append(f"{', '.join(smoke)}: a smoke-test space (short training, a small budget): it shows that the "
                   f"tool runs, its verdicts are not evidence for or against Ortho-GConv (the paper-full preset "
                   f"follows the paper's protocol)")
    if len(winners):
        few = winners[winners["candidates"].astype(int) < FEW_TRIALS]
        few = few[[key not in covered for key in zip(*(few[c] for c in CELL))]]  # the curve says more there
        if len(few):
            out.append(f"{len(few)} of {len(winners)} cells chose their winner among fewer than {FEW_TRIALS} "
                       f"trials (fewest: {int(few['candidates'].min())}); TPE's first 10 proposals are random, "
                       f"so these winners are barely tuned")
    out += [note.text for note in notes]
    if len(winners):
        capped = [pair_label(_cell_row(r)) + f" {r['arm']}" for _, r in winners.iterrows() if _at_cap(r)]
        if capped:
            out.append(f"{len(capped)} of {len(winners)} winners were still improving at their epoch cap (best "
                       f"epoch = max_epochs): {'; '.join(capped)}; more epochs might change the verdict")
    if len(missing):
        cells = [pair_label(_cell_row(r)) + f" {r['arm']} ({r['reason']})" for _, r in missing.iterrows()]
        out.append(f"{len(missing)} cells have no winner, so their pairs have no test: {'; '.join(cells)}")
    return out


def _cell_row(row: pd.Series) -> dict[str, Any]:
    variant = row["variant_name"] if "variant_name" in row else row[VARIANT]
    return {**{c: row[c] for c in PLACE}, VARIANT: variant}


def _at_cap(winner: pd.Series) -> bool:
    best, cap = winner.get("best_epoch"), winner.get("max_epochs")
    if best is None or cap is None or not all(isinstance(v, (int, float)) for v in (best, cap)):
        return False
    return math.isfinite(float(best)) and math.isfinite(float(cap)) and int(best) >= int(cap)


def smoke_searches(records: Mapping[str, Mapping[str, Any]], names: Iterable[str]) -> list[str]:
    """The searches among ``names`` whose space (as their records hold it) is marked a smoke
    test; a record without a space this version reads counts as not marked."""
    from orthotune.spaces import is_smoke_test

    found = []
    for name in names:
        options = (records.get(name) or {}).get("options")
        if isinstance(options, Mapping) and is_smoke_test(options.get("space")):
            found.append(name)
    return found
