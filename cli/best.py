"""Print the validation-best config of each cell and the verdict of each pair; --json/--yaml
feed `orthotune train --config` (configs only)."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from orthotune.cli._common import add_store_argument
from orthotune.core import (
    DATASETS,
    OBJECTIVE,
    SETTINGS,
    OrthotuneError,
    Summary,
    all_backbones,
    cell_names,
    result_column_name,
)

if TYPE_CHECKING:  # pandas and the reports layer are imported inside run: --help stays fast
    import pandas as pd

    from orthotune.reports import Filters

#: Columns of the table view, in order: the cell's coordinates, then its winner (accuracies as
#: mean ± std over the repeats).
TABLE = (*cell_names(), OBJECTIVE, "test_acc", "repeats", "T", "beta", "lam", "hidden", "lr", "weight_decay",
         "dropout", "max_epochs", "candidates", "status", "search", "trial_id")


def add_filter_arguments(parser: argparse.ArgumentParser) -> None:
    """The store and the filters `best` and `report` share (lists: any of the values)."""
    add_store_argument(parser)
    parser.add_argument("--search", nargs="+", action="extend", default=[], metavar="NAME",
                        help="only these searches (default: every search in the store)")
    for flag, names in (("dataset", DATASETS.names()), ("setting", SETTINGS.names()), ("backbone", all_backbones())):
        parser.add_argument(f"--{flag}", nargs="+", action="extend", default=[], metavar=flag.upper(),
                            help=f"only these {flag}s, any of: {', '.join(names)} (default: all)")
    parser.add_argument("--depth", type=int, nargs="+", action="extend", default=[], metavar="N",
                        help="only these depths (default: all)")
    parser.add_argument("--ortho", action=argparse.BooleanOptionalAction, default=None,
                        help="only Ortho-GConv (--ortho) or only the original backbone (--no-ortho) "
                             "(default: both)")
    parser.add_argument("--variant", nargs="+", action="extend", default=[], metavar="LABEL",
                        help="only these variant labels (profiles or ablations, e.g. default, official, "
                             "no-reg; default: all)")


def filters_from_args(args: argparse.Namespace) -> Filters:
    from orthotune.reports import Filters

    return Filters(searches=tuple(args.search), datasets=tuple(args.dataset), settings=tuple(args.setting),
                   backbones=tuple(args.backbone), depths=tuple(args.depth), ortho=args.ortho,
                   variants=tuple(args.variant))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_filter_arguments(parser)
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="a JSON list of configs (TrainConfig keys)")
    output.add_argument("--yaml", action="store_true", help="a YAML list of configs (TrainConfig keys)")


def run(args: argparse.Namespace) -> int:
    import yaml

    from orthotune.reports import best_and_verdicts, best_configs, config_dict
    from orthotune.store import Store

    filters = filters_from_args(args)
    store = Store.open(args.store)  # once: an unreadable file is then named once, not once per table read
    if args.json or args.yaml:
        winners, verdicts = best_configs(store, filters), None
    else:  # the table and the verdicts from one read of the trials
        winners, verdicts = best_and_verdicts(store, filters)
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
        print()
        print(verdicts.text())
    return 0


def format_table(winners: pd.DataFrame) -> str:
    view = winners.assign(
        **{OBJECTIVE: [_pm(m, s) for m, s in zip(winners[OBJECTIVE],
                                                  winners[result_column_name(OBJECTIVE, Summary.STD)])]},
        test_acc=[_pm(m, s) for m, s in zip(winners["test_acc"], winners["test_acc_std"])],
        repeats=[len(r) for r in winners["repeat_test_acc"]],
        T=winners["T"].astype("Int64"),  # null for the original arm turned it into floats
    )
    view = view[list(TABLE)].astype(object).where(view[list(TABLE)].notna(), "-")
    return view.to_string(index=False)


def _pm(mean: float, std: float) -> str:
    return f"{mean:.4f} ± {std:.4f}"
