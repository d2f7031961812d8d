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
    CellRole,
    OrthotuneError,
    Summary,
    all_backbones,
    cell_names,
    result_column_name,
)

if TYPE_CHECKING:  # pandas and the reports layer are imported inside run: --help stays fast
    import pandas as pd

    from orthotune.reports import Filters, PairCurve
    from orthotune.store import Store

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
    parser.add_argument("--curve", action="store_true",
                        help="each pair's tuning curve too: the gain of the winners among each arm's first k "
                             "trials; with --json/--yaml the output becomes {configs: [...], curves: [...]}")
    output.add_argument("--pairs-json", action="store_true",
                        help="a JSON list of the pairs: each arm's winner, the verdict, and the "
                             "structure-agnostic baseline's test accuracy (ref_test_acc, ref_test_acc_std, "
                             "its 95%% CI) with the verdict's words on it (reference)")


def run(args: argparse.Namespace) -> int:
    import yaml

    from orthotune.reports import best_and_verdicts, best_configs, config_dict, tuning_curves
    from orthotune.store import Store

    filters = filters_from_args(args)
    store = Store.open(args.store)  # once: an unreadable file is then named once, not once per table read
    if args.pairs_json:
        print(json.dumps(pair_rows(store, filters), indent=2))
        return 0
    if args.json or args.yaml:
        winners, verdicts = best_configs(store, filters), None
    else:  # the table and the verdicts from one read of the trials
        winners, verdicts = best_and_verdicts(store, filters)
    if winners.empty:
        raise OrthotuneError(f"no trial in store {args.store!r} can win with filters {filters.describe()} "
                             f"(none match, or all failed)")
    configs = [config_dict(row) for _, row in winners.iterrows()]
    curves = tuning_curves(store, filters) if args.curve else []
    # a list of configs alone, as `train --config` reads it; with the curves, one mapping
    data = {"configs": configs, "curves": [c.to_dict() for c in curves]} if args.curve else configs
    if args.json:
        print(json.dumps(data, indent=2))
    elif args.yaml:
        print(yaml.safe_dump(data, sort_keys=False), end="")
    else:
        print(format_table(winners))
        print()
        print(verdicts.text())
        for curve in curves:
            print()
            print(format_curve(curve))
    return 0


def format_curve(curve: PairCurve) -> str:
    """One pair's tuning curve as a table: per k, each arm's winner's test accuracy, the gain
    and its 95% CI (points), and the epochs each arm's first k trials trained."""
    from orthotune.core import ARMS

    lines = [f"tuning curve of {curve.label}: {curve.settled.word}"]
    header = ["k", *(f"{arm.name} test %" for arm in ARMS), "gain (pts)", "95% CI (pts)",
              *(f"{arm.name} epochs" for arm in ARMS)]
    rows = [header]
    for point in curve.trials.to_dict("records"):
        rows.append([str(point["k"]), *(_pct(point[f"{arm.prefix}_test_acc"]) for arm in ARMS),
                     _pct(point["diff_mean"], "+.2f"), f"[{_pct(point['ci_low'], '+.2f')}, "
                     f"{_pct(point['ci_high'], '+.2f')}]", *(str(point[f"{arm.prefix}_epochs"]) for arm in ARMS)])
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines += ["  " + "  ".join(cell.rjust(width) for cell, width in zip(row, widths)) for row in rows]
    return "\n".join(lines)


def _pct(value: object, spec: str = ".2f") -> str:
    try:
        number = 100 * float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return "-"
    return format(number, spec) if number == number else "-"


#: The fields of each pair ``--pairs-json`` prints: the pair's place, each arm's winner, the
#: test and verdict, then the structure-agnostic reference.
PAIR_FIELDS = (*cell_names(CellRole.PLACE), "variant", "orig_search", "orig_trial_id", "orig_test_acc",
               "orig_test_acc_std", "ortho_search", "ortho_trial_id", "ortho_test_acc", "ortho_test_acc_std",
               "n_pairs", "diff_mean", "ci_low", "ci_high", "p", "p_holm", "verdict", "ref_search", "ref_trial_id",
               "ref_backbone", "ref_test_acc", "ref_test_acc_std", "ref_ci_low", "ref_ci_high", "ref_repeats",
               "reference")


def pair_rows(store: Store, filters: Filters) -> list[dict]:
    """``--pairs-json``: each pair's :data:`PAIR_FIELDS` as plain JSON values (missing: null)."""
    import math

    import pandas as pd

    from orthotune.reports import pair_summary, tidy

    def plain(value: object) -> object:
        value = value.item() if hasattr(value, "item") else value  # numpy scalars
        missing = value is None or value is pd.NA or (isinstance(value, float) and not math.isfinite(value))
        return None if missing else tidy(value)

    table = pair_summary(store, filters)
    return [{name: plain(row[name]) for name in PAIR_FIELDS} for _, row in table.iterrows()]


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
