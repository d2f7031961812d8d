"""How ASHA would have done on a stored exhaustive grid, over many arrival orders.

Replays Ray's own ``ASHAScheduler`` over the per-epoch curves a grid search stored (e.g. the
grid of ``bench/fidelity.py``'s part 2): ``--workers`` trials at a time, a report every
``--report-every`` epochs, the rung score orthotune's trainable reports (or the plain
objective with ``--no-tie-break``). Prints, over ``--orders`` seeded random orders (and the
grid's nested order), the share of the grid's repeat-epochs ASHA would spend and the gap
between the grid's best validation accuracy and the best ASHA would have seen. A real ASHA
run is one draw from this distribution; this shows how far that draw can land from it.

    python bench/asha_replay.py --store STORE --max-epochs 1500 --grace-period 50
"""

from __future__ import annotations

import argparse
import random
import statistics
from typing import Any

import numpy as np
from ray.tune.schedulers import ASHAScheduler, TrialScheduler

from orthotune.search import rung_score
from orthotune.store import Store


def main() -> None:
    args = parse_args()
    curves, nested = grid_curves(args.store, args.search)
    for tie_break in (False, True) if args.compare else (args.tie_break,):
        label = "rung score (loss tie-break)" if tie_break else "objective only"
        draws = [replay(curves, random.Random(seed).sample(sorted(curves), len(curves)), args, tie_break)
                 for seed in range(args.orders)]
        shares, gaps = [d[0] for d in draws], [d[1] for d in draws]
        met = sum(share <= 0.25 and gap <= 0.5 for share, gap in draws) / len(draws)
        nested_share, nested_gap = replay(curves, nested, args, tie_break)
        print(f"{label}: {args.orders} random orders: share mean {statistics.fmean(shares):.1%}, median "
              f"{statistics.median(shares):.1%}, max {max(shares):.1%}; gap mean {statistics.fmean(gaps):.2f}, max "
              f"{max(gaps):.2f} pts; both targets (<= 25%, <= 0.5 pts) in {met:.0%}; nested order: share "
              f"{nested_share:.1%}, gap {nested_gap:.2f} pts")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--store", required=True)
    parser.add_argument("--search", help="the grid search (default: the store's only search named grid-*)")
    parser.add_argument("--max-epochs", type=int, required=True, help="ASHA's max_t: the grid's epochs")
    parser.add_argument("--grace-period", type=int, default=50)
    parser.add_argument("--reduction-factor", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--report-every", type=int, default=10)
    parser.add_argument("--orders", type=int, default=40)
    parser.add_argument("--no-tie-break", dest="tie_break", action="store_false")
    parser.add_argument("--compare", action="store_true", help="both scores, one line each")
    return parser.parse_args()


Curves = dict[str, list[tuple[np.ndarray, np.ndarray]]]


def grid_curves(store_path: str, search: str | None) -> tuple[Curves, list[str]]:
    """Per trial: each repeat's validation accuracy and loss by epoch; and the trials in the
    grid's nested order (its dimensions sorted)."""
    store = Store.open(store_path)
    trials = store.read("trials").to_pandas()
    if search is None:
        grids = sorted(n for n in trials["search"].unique() if n.startswith("grid"))
        if len(grids) != 1:
            raise SystemExit(f"asha_replay: name the grid search with --search (found {grids or 'none'})")
        search = grids[0]
    epochs = store.read("epochs", search=search).to_pandas().sort_values("epoch")
    curves = {trial: [(rows["val_acc"].to_numpy(), rows["val_loss"].to_numpy())
                      for _, rows in by_trial.groupby("repeat")]
              for trial, by_trial in epochs.groupby("trial_id")}
    grid = trials[trials["search"] == search].sort_values(["T", "beta", "lr", "weight_decay"])
    return curves, [t for t in grid["trial_id"] if t in curves]


def score(repeats: list[tuple[np.ndarray, np.ndarray]], epoch: int, tie_break: bool) -> float:
    objective = float(np.mean([acc[:epoch].max() for acc, _ in repeats]))
    if not tie_break:
        return objective
    return rung_score(objective, [float(np.nanmin(loss[:epoch])) for _, loss in repeats])


def replay(curves: Curves, order: list[str], args: argparse.Namespace, tie_break: bool) -> tuple[float, float]:
    """(share of the grid's repeat-epochs spent, gap to the grid's best in points) of one order."""
    asha = ASHAScheduler(time_attr="epoch", metric="score", mode="max", max_t=args.max_epochs,
                         grace_period=args.grace_period, reduction_factor=args.reduction_factor,
                         stop_last_trials=False)
    length = {t: max(len(acc) for acc, _ in repeats) for t, repeats in curves.items()}
    queue, running, spent = list(order), {}, {}
    while queue or running:
        while len(running) < args.workers and queue:
            trial = queue.pop(0)
            asha.on_trial_add(None, _Trial(trial))
            running[trial] = 0
        for trial in list(running):
            epoch = running[trial] + args.report_every
            if epoch >= length[trial]:
                spent[trial] = length[trial]
                del running[trial]
                continue
            running[trial] = epoch
            result = {"epoch": epoch, "score": score(curves[trial], epoch, tie_break)}
            if asha.on_trial_result(None, _Trial(trial), result) == TrialScheduler.STOP:
                spent[trial] = epoch
                del running[trial]
    used = sum(spent[t] * len(curves[t]) for t in spent)
    total = sum(length[t] * len(curves[t]) for t in curves)
    best = max(score(r, length[t], False) for t, r in curves.items())
    seen = max(score(curves[t], spent[t], False) for t in spent)
    return used / total, (best - seen) * 100


class _Trial:
    """What Ray's ASHA reads of a trial."""

    def __init__(self, trial_id: str) -> None:
        self.trial_id: str = trial_id
        self.config: dict[str, Any] = {}


if __name__ == "__main__":
    main()
