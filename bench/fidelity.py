"""Does orthotune reproduce the paper? Validation-selected searches per cell, both arms with
equal budgets, next to the paper's numbers; then ASHA against an exhaustive grid.

Part 1: for each dataset (Cora, CiteSeer) and GCN depth (2, 4, 8), full-supervised splits
0-4: a search per cell and arm (the launch gives every cell and arm its own searcher and
``--samples`` trials), the original arm over lr, weight decay and dropout, the Ortho arm over
the same plus T, beta and lambda. Each arm's winner is its validation-best trial (the
report's selection); the table prints test mean +- std over the splits next to the paper's,
the Ortho-minus-original gain with its paired t-test p-value, and the verdict in words.

Part 2: one cell (Cora GCN-8, Ortho arm) as an exhaustive grid (FIFO: every point trains to
its end) and as an ASHA search over the same grid; prints the ASHA winner's validation
accuracy against the grid's best and the share of the grid's epochs ASHA spent (target:
within 0.5 points using at most 25% of the epochs).

Usage (the paper's budget wants a GPU; the defaults are that budget)::

    python bench/fidelity.py --data-root ../shared/data
    python bench/fidelity.py --data-root ../shared/data --cpu-budget   # reduced, says so
    python bench/fidelity.py --data-root ../shared/data --quick        # shape check only
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from typing import Any

#: The paper's Table (full-supervised GCN, test %, mean over 5 splits): original, Ortho.
PAPER = {
    ("cora", 2): (85.77, 87.28), ("cora", 4): (82.37, 86.20), ("cora", 8): (81.13, 85.27),
    ("citeseer", 2): (73.68, 75.59), ("citeseer", 4): (68.03, 74.80), ("citeseer", 8): (53.10, 71.61),
}
#: The paper's std over splits for its Ortho cells lies in 1.6-2.8 points.
PAPER_STD = {("cora", 8): 1.64}

TRAIN_SPACE = {"lr": [0.005, 0.01, 0.02], "weight_decay": [5e-5, 5e-4], "dropout": [0.3, 0.5, 0.7]}
ORTHO_SPACE = {"T": {"low": 1, "high": 6}, "beta": {"low": 0.1, "high": 1.0, "step": 0.1}, "lam": [1e-4, 5e-4]}


def main() -> None:
    args = parse_args()
    import torch

    torch.set_num_threads(1)
    store = args.store or tempfile.mkdtemp(prefix="fidelity-")
    start = time.perf_counter()
    if not args.only_asha:
        reproduce(args, store)
    if not args.skip_asha:
        asha_against_grid(args, store)
    print(f"\nstore: {store}\nwall time: {time.perf_counter() - start:.0f} s")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--store", help="store folder (default: a new temporary folder)")
    parser.add_argument("--datasets", nargs="+", default=["cora", "citeseer"])
    parser.add_argument("--depths", nargs="+", type=int, default=[2, 4, 8])
    parser.add_argument("--splits", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--samples", type=int, default=32, help="trials per cell and arm")
    parser.add_argument("--epochs", type=int, default=1500)
    parser.add_argument("--patience", type=int, default=200)
    parser.add_argument("--grid-T", nargs="+", type=int, default=[2, 4, 6])
    parser.add_argument("--grid-beta", nargs="+", type=float, default=[0.2, 0.4, 0.6, 0.8])
    parser.add_argument("--cpu-budget", action="store_true",
                        help="reduced budget for a 2-core CPU: 8 samples, 400 epochs, patience 100")
    parser.add_argument("--quick", action="store_true", help="shape check: cora depth 2, 2 samples, 20 epochs")
    parser.add_argument("--grid-lr", nargs="+", type=float, default=[0.01], help="part 2's learning rates")
    parser.add_argument("--grid-weight-decay", nargs="+", type=float, default=[5e-5],
                        help="part 2's weight decays")
    parser.add_argument("--grace-period", type=int, default=None,
                        help="ASHA's first rung in epochs (default: the paper-full preset's)")
    parser.add_argument("--reduction-factor", type=int, default=None,
                        help="ASHA's reduction factor (default: the paper-full preset's)")
    parser.add_argument("--skip-asha", action="store_true", help="part 1 only")
    parser.add_argument("--only-asha", action="store_true", help="part 2 only")
    args = parser.parse_args()
    if args.cpu_budget:
        args.samples, args.epochs, args.patience = 8, 400, 100
    if args.quick:
        args.datasets, args.depths, args.samples, args.epochs, args.patience = ["cora"], [2], 2, 20, 20
        args.grid_T, args.grid_beta = [2, 4], [0.4]
    preset = paper_full_asha()
    if args.grace_period is None:
        # the preset's, at every budget: with the loss tie-break ASHA ranks trials that tie
        # on a majority-class plateau, so a first rung inside the plateau cuts late
        # starters (measured: at 20 epochs, 8 trials per cell, the depth-8 cells kept little
        # more than their defaults)
        args.grace_period = 5 if args.quick else preset["grace_period"]
    if args.reduction_factor is None:
        args.reduction_factor = preset["reduction_factor"]
    return args


def paper_full_asha() -> dict[str, int]:
    """ASHA's settings in the ``paper-full`` preset (the search this part stands for)."""
    from orthotune.spaces import resolve_space

    space = resolve_space("paper-full")
    return {"grace_period": space.grace_period, "reduction_factor": space.reduction_factor}


def space(name: str, args: argparse.Namespace, datasets: list[str], depths: list[int],
          original: bool = True, ortho: dict | None = None, train: dict | None = None) -> Any:
    from orthotune.spaces import parse_space

    values = {"asha": {"grace_period": args.grace_period, "reduction_factor": args.reduction_factor},
              "name": name, "datasets": datasets, "setting": "full", "repeats": list(args.splits),
              "backbones": ["gcn"], "depths": depths, "original": original,
              "train": {**(TRAIN_SPACE if train is None else train), "epochs": args.epochs,
                        "patience": args.patience},
              "samples": args.samples}
    if ortho is not None:
        values["ortho"] = ortho
    return parse_space(values)


def run(store: str, name: str, search_space: Any, args: argparse.Namespace, **options: Any) -> Any:
    from orthotune.search import LaunchOptions, launch

    launch_options = LaunchOptions(store=store, name=name, space=search_space, data_root=args.data_root,
                                   report_every=10, **options)
    return launch(launch_options, progress=False)


def reproduce(args: argparse.Namespace, store: str) -> None:
    from orthotune.reports import Filters, build_report

    name = f"fidelity-{int(time.time())}"
    began = time.perf_counter()
    run(store, name, space(name, args, args.datasets, args.depths, ortho=ORTHO_SPACE), args)
    seconds = time.perf_counter() - began
    table = build_report(store, Filters(searches=(name,)), plots=False).summary
    print(f"Part 1: {len(args.datasets)} datasets x GCN depths {args.depths}, splits {args.splits}, "
          f"{args.samples} trials per cell and arm, up to {args.epochs} epochs (patience {args.patience}); "
          f"search took {seconds:.0f} s")
    print("| cell | original (paper) | Ortho-GConv (paper) | gain (pts) | paired p | verdict |")
    print("|---|---|---|---|---|---|")
    for _, row in table.iterrows():
        key = (row["dataset"], int(row["depth"]))
        paper = PAPER.get(key, (math.nan, math.nan))
        print(f"| {row['dataset']} GCN-{key[1]} | {_arm(row, 'orig')} ({paper[0]}) | {_arm(row, 'ortho')} "
              f"({paper[1]}) | {_points(row['diff_mean'])} | {_p(row['p'])} | {verdict(row)} |")


def verdict(row: Any) -> str:
    """The per-cell verdict in words, whichever way it points (significance at 0.05)."""
    diff, p = row["diff_mean"], row["p"]
    if diff is None or p is None or not (math.isfinite(diff) and math.isfinite(p)):
        return "no paired test (a cell is missing)"
    if p >= 0.05:
        return "no significant difference"
    return "Ortho-GConv gains significantly" if diff > 0 else "reversed: the original is significantly better"


def asha_against_grid(args: argparse.Namespace, store: str) -> None:
    from orthotune.store import Store

    stamp = int(time.time())
    grid_space = space(f"grid-{stamp}", args, ["cora"], [max(args.depths)], original=False,
                       ortho={"T": args.grid_T, "beta": args.grid_beta, "lam": [5e-4]},
                       train={"lr": args.grid_lr, "weight_decay": args.grid_weight_decay, "dropout": [0.5]})
    grid, asha = f"grid-{stamp}", f"asha-{stamp}"
    seconds = {}
    for name, scheduler in ((grid, "fifo"), (asha, "asha")):
        began = time.perf_counter()
        run(store, name, grid_space, args, searcher="grid", scheduler=scheduler)
        seconds[name] = time.perf_counter() - began
    trials = Store.open(store).read("trials").to_pandas()
    best_grid = trials[trials["search"] == grid]["val_acc"].max()
    asha_rows = trials[trials["search"] == asha]
    best_asha = asha_rows["val_acc"].max()
    epochs = {s: int(trials[trials["search"] == s]["repeat_epochs"].map(sum).sum()) for s in (grid, asha)}
    share = epochs[asha] / epochs[grid] if epochs[grid] else math.nan
    stopped = int((asha_rows["status"] == "stopped").sum())
    print(f"\nPart 2: Cora GCN-{max(args.depths)} Ortho arm, grid of {len(asha_rows)} points "
          f"(T {args.grid_T} x beta {args.grid_beta} x lr {args.grid_lr} x weight decay {args.grid_weight_decay}), "
          f"splits {args.splits}, up to {args.epochs} epochs (patience {args.patience}); ASHA grace period "
          f"{args.grace_period}, reduction factor {args.reduction_factor}; grid {seconds[grid]:.0f} s, "
          f"ASHA {seconds[asha]:.0f} s")
    print(f"grid best val {best_grid * 100:.2f}; ASHA winner val {best_asha * 100:.2f} "
          f"(gap {(best_grid - best_asha) * 100:.2f} pts, target <= 0.5); ASHA stopped {stopped} trials and "
          f"spent {epochs[asha]} of the grid's {epochs[grid]} repeat-epochs ({share:.1%}, target <= 25%)")


def _arm(row: Any, prefix: str) -> str:
    mean, std = row[f"{prefix}_test_acc"], row[f"{prefix}_test_acc_std"]
    if mean is None or not math.isfinite(mean):
        return "-"
    return f"{mean * 100:.2f} +- {std * 100:.2f}"


def _points(value: Any) -> str:
    """A difference of accuracies (fractions) in percentage points."""
    return f"{value * 100:+.2f}" if value is not None and math.isfinite(value) else "-"


def _p(value: Any) -> str:
    return f"{value:.3g}" if value is not None and math.isfinite(value) else "-"


if __name__ == "__main__":
    main()
