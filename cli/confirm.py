"""Retrain each pair's two winners on repeats the search never used and test only those.

The search's winner is the best of many trials on its own repeats, so the gain read there is
optimistic (the winner's curse). `confirm` retrains each pair's two validation-selected
winners (an adaptive search's stopped pairs; a fixed budget's every pair) on fresh repeats:
the Geom-GCN splits the search left unused for full-supervised (5-9 after splits 0-4), new
seeds for the semi-supervised and official settings, new splits for random ones (cv10 has no
fresh folds). It tests the paired differences on those repeats alone, look by look, with a
group-sequential design, the pairs' sequential p-values one Holm family, and stores the
result beside the search: `best` and `report` then show the confirmed gain next to the
search's.

  orthotune confirm --search replay-webkb                          # Pocock over 2 looks
  orthotune confirm --search NAME --design obrien-fleming --looks 3 --repeats 5 6 7 8 9
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from orthotune.cli._common import OK, add_data_arguments, add_store_argument
from orthotune.core import OrthotuneError

if TYPE_CHECKING:
    from orthotune.core import ConfigResult, TrainConfig

#: The designs, as ``orthotune.reports``' group-sequential boundaries name them.
DESIGNS = ("pocock", "obrien-fleming", "bonferroni")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_store_argument(parser)
    parser.add_argument("--search", required=True, metavar="NAME", help="the search whose pairs to confirm")
    parser.add_argument("--repeats", type=int, nargs="+", metavar="N",
                        help="the fresh repeats (splits for full, seeds for semi/official), none of them the "
                             "search's (default: full: every Geom-GCN split the search left unused; seeds: as "
                             "many new ones as the search used, numbered after its largest)")
    parser.add_argument("--design", default="pocock", metavar="NAME",
                        help=f"group-sequential boundary, one of: {', '.join(DESIGNS)} (default: pocock)")
    parser.add_argument("--looks", type=int, default=2, metavar="K",
                        help="planned looks over the fresh repeats, 2 or 3 (default: 2)")
    add_data_arguments(parser)
    parser.add_argument("--device", help="cpu or cuda[:N] (default: cuda when present, else cpu)")
    parser.add_argument("--json", action="store_true", help="print the stored confirmation as JSON")


def run(args: argparse.Namespace) -> int:
    from orthotune.reports import (
        Filters,
        best_answer,
        check_design,
        confirm,
        confirmation_text,
        look_sizes,
        plan_pairs,
    )
    from orthotune.store import Store, save_confirmation

    check_design(args.design, args.looks)  # bad names fail before the store is read
    store = Store.open(args.store)
    known = sorted(set(store.search_names()) | set(store.table_searches()))
    if args.search not in known:
        raise OrthotuneError(f"no search {args.search!r} in store {args.store!r}; searches: "
                             f"{', '.join(known) or 'none'}")
    answer = best_answer(store, Filters(searches=(args.search,)))
    plans = plan_pairs(answer.pairs, answer.winners, tuple(args.repeats or ()))
    if not plans:
        raise OrthotuneError(f"search {args.search!r} has no pair with both winners (and stopped) to confirm")
    for plan in plans:  # every plan's looks checked before any training
        look_sizes(len(plan.repeats), args.looks)
    train = trainer(args, {(plan.original.dataset, plan.original.setting) for plan in plans})
    document = confirm(args.search, plans, args.design, args.looks, train,
                       lambda line: print(line, file=sys.stderr, flush=True))
    save_confirmation(store, args.search, document)
    if args.json:
        print(json.dumps(document, indent=2))
    else:
        print(confirmation_text(document))
    return OK


def trainer(args: argparse.Namespace, places: set[tuple[str, str]]) -> Callable[[TrainConfig], ConfigResult]:
    """One config on its repeats, as `train` trains it: ``run_configs`` on the chosen device
    (each dataset's files checked first, so a missing one fails before any training)."""
    from orthotune.training import DataRoot, check_dataset_files, choose_device, run_configs

    root = DataRoot.resolve(args.data_root, args.download)
    for dataset, setting in sorted(places):
        check_dataset_files(dataset, setting, root)
    device = choose_device(args.device)
    return lambda config: run_configs([config], device, str(root.path))[0]
