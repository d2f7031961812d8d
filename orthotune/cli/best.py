"""Print the validation-best config of each cell; --json/--yaml feed `orthotune train --config`."""

from __future__ import annotations

import argparse
import json

import pandas as pd
import yaml

from orthotune.core import OrthotuneError
from orthotune.reports import Filters, best_configs, config_dict

#: Columns of the table view, in order (accuracies as mean ± std over the repeats).
TABLE = ("dataset", "setting", "backbone", "depth", "arm", "val_acc", "test_acc", "repeats", "T", "beta",
         "lam", "hidden", "lr", "weight_decay", "dropout", "max_epochs", "candidates", "status", "search",
         "trial_id")


def add_filter_arguments(parser: argparse.ArgumentParser) -> None:
    """The store and the filters `best` and `report` share (lists: any of the values)."""
    parser.add_argument("--store", required=True, help="store path or URI (as given to `orthotune launch`)")
    parser.add_argument("--search", nargs="+", action="extend", default=[], metavar="NAME",
                        help="only these searches (default: every search in the store)")
    parser.add_argument("--dataset", nargs="+", action="extend", default=[])
    parser.add_argument("--setting", nargs="+", action="extend", default=[])
    parser.add_argument("--backbone", nargs="+", action="extend", default=[])
    parser.add_argument("--depth", type=int, nargs="+", action="extend", default=[])
    parser.add_argument("--ortho", action=argparse.BooleanOptionalAction, default=None,
                        help="only Ortho-GConv (--ortho) or only the original backbone (--no-ortho)")


def filters_from_args(args: argparse.Namespace) -> Filters:
    return Filters(searches=tuple(args.search), datasets=tuple(args.dataset), settings=tuple(args.setting),
                   backbones=tuple(args.backbone), depths=tuple(args.depth), ortho=args.ortho)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_filter_arguments(parser)
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="a JSON list of configs (TrainConfig keys)")
    output.add_argument("--yaml", action="store_true", help="a YAML list of configs (TrainConfig keys)")


def run(args: argparse.Namespace) -> int:
    filters = filters_from_args(args)
    winners = best_configs(args.store, filters)
    if winners.empty:
        raise OrthotuneError(f"no trial in store {args.store!r} can win with filters {filters.describe()} "
                             f"(none match, or all failed)")
    configs = [config_dict(row) for _, row in winners.iterrows()]
    if args.json:
        print(json.dumps(configs, indent=2))
    elif args.yaml:
        print(yaml.safe_dump(configs, sort_keys=False), end="")
    else:
        print(format_table(winners))
    return 0


def format_table(winners: pd.DataFrame) -> str:
    view = winners.assign(
        val_acc=[_pm(m, s) for m, s in zip(winners["val_acc"], winners["val_acc_std"])],
        test_acc=[_pm(m, s) for m, s in zip(winners["test_acc"], winners["test_acc_std"])],
        repeats=[len(r) for r in winners["repeat_test_acc"]],
        T=winners["T"].astype("Int64"),  # null for the original arm turned it into floats
    )
    view = view[list(TABLE)].astype(object).where(view[list(TABLE)].notna(), "-")
    return view.to_string(index=False)


def _pm(mean: float, std: float) -> str:
    return f"{mean:.4f} ± {std:.4f}"
