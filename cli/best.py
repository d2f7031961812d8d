"""Print the validation-best config of each cell and the verdict of each pair; --json/--yaml
give the whole answer (configs, pairs, curves), whose configs `orthotune train --config` reads."""

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

    from orthotune.reports import BestAnswer, Filters, PairCurve

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
    output.add_argument("--json", action="store_true",
                        help="the answer as JSON: {configs: [...], pairs: [...], curves: [...]}: each cell's "
                             "winning config (TrainConfig keys, as `train --config` reads them), each pair's "
                             "winners, verdict, structure-agnostic reference (ref_test_acc, ref_test_acc_std, "
                             "its 95%% CI, the words on it) and settled word, and each pair's tuning curve")
    output.add_argument("--yaml", action="store_true", help="the same answer as YAML")
    parser.add_argument("--curve", action="store_true",
                        help="print each pair's tuning curve as a table too: the gain of the winners among "
                             "each arm's first k trials (--json/--yaml always carry the curves)")


def run(args: argparse.Namespace) -> int:
    from orthotune.reports import best_answer
    from orthotune.store import Store

    filters = filters_from_args(args)
    store = Store.open(args.store)  # once: an unreadable file is then named once, not once per table read
    answer = best_answer(store, filters)
    if answer.winners.empty:
        raise OrthotuneError(f"no trial in store {args.store!r} can win with filters {filters.describe()} "
                             f"(none match, or all failed)")
    if args.json:
        print(json.dumps(answer_dict(answer), indent=2))
    elif args.yaml:
        import yaml

        print(yaml.safe_dump(answer_dict(answer), sort_keys=False), end="")
    else:
        print(format_table(answer.winners))
        print()
        print(answer.verdicts.text())
        for curve in answer.curves if args.curve else ():
            print()
            print(format_curve(curve))
    return 0


def answer_dict(answer: BestAnswer) -> dict[str, list]:
    """``--json``/``--yaml``: the configs (as ``train --config`` reads them), the pairs'
    :data:`PAIR_FIELDS` and the curves, as plain values."""
    from orthotune.reports import config_dict

    return {"configs": [config_dict(row) for _, row in answer.winners.iterrows()],
            "pairs": pair_rows(answer.pairs), "curves": [curve.to_dict() for curve in answer.curves]}


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


#: The fields of each pair ``--json`` gives: the pair's place, each arm's winner, the test and
#: verdict, the structure-agnostic reference and the words on it, the tuning curve's word, the
#: budget and stop, and the confirmation on fresh repeats (``orthotune confirm``; null without).
PAIR_FIELDS = (*cell_names(CellRole.PLACE), "variant", "orig_search", "orig_trial_id", "orig_test_acc",
               "orig_test_acc_std", "ortho_search", "ortho_trial_id", "ortho_test_acc", "ortho_test_acc_std",
               "n_pairs", "diff_mean", "ci_low", "ci_high", "p", "p_holm", "verdict", "ref_search", "ref_trial_id",
               "ref_backbone", "ref_test_acc", "ref_test_acc_std", "ref_ci_low", "ref_ci_high", "ref_repeats",
               "reference", "settled", "trials_per_arm", "budget", "maximum", "stop", "stop_reason", "rule",
               "confirm_gain", "confirm_ci_low", "confirm_ci_high", "confirm_p", "confirm_p_holm", "confirm_repeats",
               "confirm_looks", "confirm_design", "confirm_verdict")


def pair_rows(pairs: pd.DataFrame) -> list[dict]:
    """Each pair's :data:`PAIR_FIELDS` as plain JSON values (missing: null)."""
    import math

    import pandas as pd

    from orthotune.reports import tidy

    def plain(value: object) -> object:
        value = value.item() if hasattr(value, "item") else value  # numpy scalars
        missing = value is None or value is pd.NA or (isinstance(value, float) and not math.isfinite(value))
        return None if missing else tidy(value)

    return [{name: plain(row.get(name)) for name in PAIR_FIELDS} for _, row in pairs.iterrows()]


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
