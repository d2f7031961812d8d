"""Oracle lower bound on the trials any stopping rule needs to keep the fixed budget's
verdicts (issue 47, the replay target: >= 90% of the verdicts kept with <= 60% of the trials).

For every pair of the searches and every look k (first, first + step, ..., the maximum), the
pair's gain and raw p-value at k are its tuning curve's point at k, the point the replay reads
(checked: with every pair stopped at k, the verdicts equal ``adaptive_replay(rule="never",
maximum=k)``'s). Then, over every assignment of one stop per pair, Holm is applied over the
pairs' p-values at their own stops (one family, as the replay does), and the cheapest
assignment that keeps at least ceil(keep x pairs) fixed-budget verdicts (sign and Holm
significance) is printed. It reads test verdicts, so no rule could use it: it is a bound. If it
spends more than 60% of the trials, no stopping rule meets the target on that corpus. Beyond
10^6 assignments the Holm coupling is dropped (a pair's Holm p lies between its raw p and
pairs x raw p): still a lower bound, a looser one. Nothing trains.

    python bench/verdict_oracle.py --store runs/store --search replay-citeseer --keep 0.9
"""

from __future__ import annotations

import argparse
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from orthotune.cli import default_store, run_script
from orthotune.reports import Filters, PairCurve, adaptive_replay, holm, tuning_curves, verdict_word
from orthotune.search import FEW_TRIALS, LOOK_STEP

LIMIT = 10**6  # assignments searched exhaustively
TARGET = 0.60  # the share of the fixed budget's trials


def verdicts(gains: Sequence[float], pvalues: Sequence[float]) -> list[str]:
    """The verdicts of one family: the pairs' raw p-values adjusted together."""
    return [verdict_word(g, a) for g, a in zip(gains, holm(pvalues))]


@dataclass(frozen=True)
class Bound:
    """The cheapest assignment found: ``stops[i]`` trials per arm for pair i, ``kept`` pairs
    keeping their verdict there; ``exact`` False when Holm's coupling was relaxed (then
    ``kept`` counts the pairs that could keep theirs, and the bound may be unattainable)."""

    stops: tuple[int, ...]
    kept: int
    exact: bool


def oracle(looks: Sequence[int], gains: Sequence[Sequence[float]], pvalues: Sequence[Sequence[float]],
           fixed: Sequence[str], need: int, limit: int = LIMIT) -> Bound | None:
    """The fewest total trials (``gains[i][j]``, ``pvalues[i][j]``: pair i at ``looks[j]``) with
    at least ``need`` of the ``fixed`` verdicts kept; ties go to more kept; None: unreachable."""
    if len(looks) ** len(fixed) > limit:
        return relaxed(looks, gains, pvalues, fixed, need)
    best: Bound | None = None
    cost = math.inf
    for choice in itertools.product(range(len(looks)), repeat=len(fixed)):
        total = sum(looks[j] for j in choice)
        if total > cost:  # Holm is the costly part: skip what cannot beat the best
            continue
        at = verdicts([g[j] for g, j in zip(gains, choice)], [p[j] for p, j in zip(pvalues, choice)])
        kept = sum(a == f for a, f in zip(at, fixed))
        if kept >= need and (total < cost or best is None or kept > best.kept):
            best, cost = Bound(tuple(looks[j] for j in choice), kept, True), total
    return best


def relaxed(looks: Sequence[int], gains: Sequence[Sequence[float]], pvalues: Sequence[Sequence[float]],
            fixed: Sequence[str], need: int) -> Bound | None:
    """A lower bound without the coupling: in any family of these pairs a pair's Holm p lies in
    [p, pairs x p], so a pair may keep its verdict at a look only if one end gives it; each
    pair then keeps at its first such look or stops at the first look."""
    n = len(fixed)
    could = [next((k for k, g, p in zip(looks, gs, ps)
                   if f in {verdict_word(g, p), verdict_word(g, min(1.0, n * p))}), None)
             for gs, ps, f in zip(gains, pvalues, fixed)]
    extra = sorted((k - looks[0], i) for i, k in enumerate(could) if k is not None)
    if len(extra) < need:
        return None
    keep = {i for _, i in extra[:need]} | {i for i, k in enumerate(could) if k == looks[0]}
    return Bound(tuple(could[i] if i in keep else looks[0] for i in range(n)), len(keep), False)


def _point(curve: PairCurve, k: int, column: str) -> float:
    """The curve's value at k; NaN where it has no point there (as the replay reads it)."""
    row = curve.trials[curve.trials["k"] == k]
    value = row.iloc[0][column] if len(row) else None
    return float(value) if value is not None and math.isfinite(float(value)) else math.nan


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default=default_store(),
                        help="the results store (default: $ORTHOTUNE_STORE, else runs/store)")
    parser.add_argument("--search", nargs="+", required=True, help="the fixed-budget searches (one Holm family)")
    parser.add_argument("--keep", type=float, default=0.9, help="share of verdicts to keep (default: 0.9)")
    parser.add_argument("--first", type=int, default=FEW_TRIALS, help=f"first look (default: {FEW_TRIALS})")
    parser.add_argument("--step", type=int, default=LOOK_STEP, help=f"trials between looks (default: {LOOK_STEP})")
    args = parser.parse_args(argv)
    filters = Filters(searches=tuple(args.search))
    replay = adaptive_replay(args.store, filters, rule="never", first=args.first, step=args.step)
    table, looks = replay.table, replay.looks
    curves = tuning_curves(args.store, filters)  # the replay's curves: the raw p it does not tabulate
    labels = list(table["pair"])
    if [c.label for c in curves] != labels:
        raise RuntimeError("the tuning curves' pairs are not the replay's")
    if not labels:
        print("no pairs with a winner in both arms")
        return 0
    gains = [[_point(c, k, "diff_mean") for k in looks] for c in curves]
    pvalues = [[_point(c, k, "p") for k in looks] for c in curves]
    uniform = []  # per look, the verdicts with every pair stopped there: the replay's, or this bench is wrong
    for j, k in enumerate(looks):
        at_k = verdicts([g[j] for g in gains], [p[j] for p in pvalues])
        at_replay = list(adaptive_replay(args.store, filters, rule="never", first=args.first, step=args.step,
                                         maximum=k).table["adaptive_verdict"])
        if at_k != at_replay:
            raise RuntimeError(f"look {k}: verdicts {at_k} differ from the replay's {at_replay}")
        uniform.append(at_k)
    fixed = list(table["fixed_verdict"])
    print(f"looks {', '.join(map(str, looks))} trials per arm; per look: gain (points), raw p, "
          f"S when significant after Holm with every pair stopped there")
    print((f"{'pair':<40} {'fixed verdict':<32} " + " ".join(f"{'k=' + str(k):<16}" for k in looks)).rstrip())
    for i, row in enumerate(table.to_dict("records")):
        cells = [f"{100 * gains[i][j]:+6.2f} {pvalues[i][j]:.4f} {'S' if 'not' not in uniform[j][i] else '-'}"
                 for j in range(len(looks))]
        fixed_words = f"{row['fixed_verdict']} ({100 * row['fixed_gain']:+.2f})"
        print(f"{row['pair']:<40} {fixed_words:<32} " + " ".join(f"{c:<16}" for c in cells).rstrip())
    need = math.ceil(args.keep * len(labels) - 1e-9)  # 0.9 x 10 is 9, not 9.000000000000002
    budget = int(table["trials"].sum())  # as Replay.trial_fraction: each pair's fixed trials per arm
    bound = oracle(looks, gains, pvalues, fixed, need)
    if bound is None:
        print(f"oracle: no assignment of stops keeps {need} of {len(labels)} verdicts")
        return 0
    if not bound.exact:
        print(f"{len(looks)}^{len(labels)} assignments > {LIMIT:.0e}: Holm's coupling relaxed (a looser lower bound)")
    spent = sum(bound.stops)
    print(f"oracle: keeps {bound.kept} of {len(labels)} with {spent} of {budget} trials ({spent / budget:.1%})")
    index = [looks.index(k) for k in bound.stops]
    at = verdicts([g[j] for g, j in zip(gains, index)], [p[j] for p, j in zip(pvalues, index)])
    for label, k, a, f in zip(labels, bound.stops, at, fixed):
        print(f"  {label:<40} stop {k:>3}  {a:<24} {'kept' if a == f else 'changed'}")
    gap = 100 * (spent / budget - TARGET)
    print(f"target {TARGET:.0%} of the trials: the bound is {abs(gap):.1f} points "
          + ("above it: no stopping rule meets the target here" if gap > 0 else "below it (or at it)"))
    return 0


if __name__ == "__main__":
    run_script(main)  # a store or search that is not there: one line and exit 2, as the CLI's
