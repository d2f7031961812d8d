"""Launch a search (or --resume one) on a local embedded Ray or a Ray cluster."""

from __future__ import annotations

import argparse
import json
from datetime import datetime

from orthotune.search.tune import SCHEDULERS, SEARCHERS, LaunchOptions, SearchOutcome, launch, resume
from orthotune.spaces import parse_space, resolve_space


def add_arguments(parser: argparse.ArgumentParser) -> None:
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--space", help="a preset (quick, paper) or a space YAML file")
    what.add_argument("--resume", metavar="NAME", help="continue the search NAME whose driver died")
    parser.add_argument("--store", required=True, help="store root: a path or a URI (s3://, gs://)")
    parser.add_argument("--name", help="search name (default: the space's name and the time)")
    parser.add_argument("--datasets", nargs="+", help="override the space's datasets")
    parser.add_argument("--samples", type=int, help="number of trials (default: the space's)")
    parser.add_argument("--searcher", default="optuna", help=f"one of {', '.join(SEARCHERS.names())}")
    parser.add_argument("--scheduler", default="asha", help=f"one of {', '.join(SCHEDULERS.names())}")
    parser.add_argument("--address", help="Ray cluster address (default: a local embedded Ray)")
    parser.add_argument("--cpus-per-trial", type=float, default=1.0)
    parser.add_argument("--gpus-per-trial", type=float, default=0.0, help="fractions share a GPU")
    parser.add_argument("--concurrency", type=int, help="most trials at once (default: what the cluster fits)")
    parser.add_argument("--report-every", type=int, default=10, help="epochs between reports to Tune")
    parser.add_argument("--seed", type=int, default=0, help="the search algorithm's seed")
    parser.add_argument("--pack", type=int, default=1,
                        help="configs trained together as one batched model per trial (see README)")
    parser.add_argument("--data-root", help="raw data folder (default: $ORTHOTUNE_DATA_ROOT)")
    parser.add_argument("--quiet", action="store_true", help="no progress line")


def run(args: argparse.Namespace) -> int:
    if args.resume:
        outcome = resume(args.store, args.resume, parse_space, args.address, progress=not args.quiet)
    else:
        outcome = launch(_options(args), progress=not args.quiet)
    print(summary(outcome))
    return 0


def _options(args: argparse.Namespace) -> LaunchOptions:
    space = resolve_space(args.space)
    if args.datasets:
        space = space.with_datasets(args.datasets)
    name = args.name or f"{space.name}-{datetime.now():%Y%m%d-%H%M%S}"
    return LaunchOptions(
        store=args.store, name=name, space=space, samples=args.samples, searcher=args.searcher,
        scheduler=args.scheduler, address=args.address, cpus_per_trial=args.cpus_per_trial,
        gpus_per_trial=args.gpus_per_trial, concurrency=args.concurrency, data_root=args.data_root,
        seed=args.seed, report_every=args.report_every, pack=args.pack,
    )


def summary(outcome: SearchOutcome) -> str:
    counts = ", ".join(f"{n} {status}" for status, n in sorted(outcome.counts.items()))
    lines = [f"search {outcome.name}: {sum(outcome.counts.values())} trials ({counts})"]
    if outcome.best_config is not None:
        lines.append(f"best val_acc {outcome.best_objective:.4f} (mean over repeats) with config:")
        lines.append(json.dumps(outcome.best_config, sort_keys=True))
    return "\n".join(lines)
