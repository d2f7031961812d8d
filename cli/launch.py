"""Launch a search (or --resume one) on a local Ray or a Ray cluster; --submit runs it as a Ray job."""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from orthotune.cli._common import OK, RUN_FAILED, add_data_arguments, add_store_argument

if TYPE_CHECKING:
    from orthotune.search import LaunchOptions, SearchOutcome


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # Only built when `launch` is the command: the registries' names and the options'
    # defaults come from the tune layer, their one place.
    from orthotune.search import MODES, NO_STORAGE, SCHEDULERS, SEARCHERS, LaunchOptions

    default = {f.name: f.default for f in dataclasses.fields(LaunchOptions)}
    what = parser.add_mutually_exclusive_group(required=True)
    from orthotune.spaces import PRESETS

    what.add_argument("--space", help=f"a preset ({', '.join(sorted(PRESETS.names()))}) or a space YAML file")
    what.add_argument("--resume", metavar="NAME", help="continue the search NAME whose driver died")
    add_store_argument(parser)
    parser.add_argument("--name", help="search name (default: the space's name and the time)")
    parser.add_argument("--datasets", nargs="+", metavar="DATASET", help="override the space's datasets")
    parser.add_argument("--samples", type=int, metavar="N",
                        help="trainings per cell and arm (default: the space's)")
    parser.add_argument("--searcher", default=default["searcher"], metavar="NAME",
                        help=f"search algorithm, one of: {', '.join(SEARCHERS.names())} (default: %(default)s)")
    parser.add_argument("--scheduler", default=default["scheduler"], metavar="NAME",
                        help=f"trial scheduler, one of: {', '.join(SCHEDULERS.names())} (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=default["seed"], help="the search algorithm's seed "
                                                                           "(default: %(default)s)")
    cluster = parser.add_argument_group("cluster")
    cluster.add_argument("--address", metavar="ADDRESS",
                         help="Ray cluster: ray://HEAD:10001 or auto (the driver runs here), or with --submit "
                              "the dashboard's http://HEAD:8265 (default: a local Ray)")
    cluster.add_argument("--submit", action="store_true",
                         help="submit the search as a Ray job to --address http://HEAD:8265, print its id and "
                              "return: the driver runs on the head node, so this client may disconnect; "
                              "--store and --data-root are then paths on the head node (absolute) or URIs; the "
                              "orthotune package travels with the job, its dependencies (torch, PyG, Ray) must "
                              "be in the head's Python environment")
    cluster.add_argument("--cpus-per-trial", type=float, default=default["cpus_per_trial"], metavar="N",
                         help="CPUs each trial reserves (default: %(default)s)")
    cluster.add_argument("--gpus-per-trial", type=gpus_per_trial, default=default["gpus_per_trial"], metavar="N|auto",
                         help="GPUs each trial reserves; fractions share a GPU; auto: each cell's fraction "
                              "from its pack's measured GPU use, so packs too small to keep a GPU busy share "
                              "one (default: %(default)s)")
    cluster.add_argument("--concurrency", type=int, metavar="N",
                         help="most trials at once (default: what the cluster's resources fit)")
    cluster.add_argument("--configs-per-trial", type=int, default=default["configs_per_trial"], metavar="N",
                         help="a trial group: configs trained together in one trial as one packed "
                              "model, each still selected and stopped on its own (default: %(default)s)")
    cluster.add_argument("--report-every", type=int, default=default["report_every"], metavar="EPOCHS",
                         help="epochs between reports to Tune (default: %(default)s)")
    cluster.add_argument("--retries", type=int, default=default["retries"], metavar="N",
                         help="times a trial whose Ray worker died (killed, node lost) trains again; a trial "
                              "that raises is stored as failed at once (default: %(default)s)")
    add_data_arguments(cluster)
    views = parser.add_argument_group("progress and live views")
    views.add_argument("--progress", choices=(*MODES, "off"), default="auto",
                       help="auto: a bar on a terminal, plain lines in logs; off: nothing (default: %(default)s)")
    views.add_argument("--quiet", action="store_true", help="no progress display (same as --progress off)")
    views.add_argument("--optuna-storage", metavar="URL|FILE",
                       help="Optuna storage for optuna-dashboard: an RDB URL, a journal file, or "
                            f"{NO_STORAGE} (default: a journal file beside a local store)")
    views.add_argument("--tensorboard", action=argparse.BooleanOptionalAction, default=default["tensorboard"],
                       help="write TensorBoard event files under <store>/tensorboard/NAME (default: %(default)s)")


def gpus_per_trial(value: str) -> float | str:
    """``--gpus-per-trial``: a number of GPUs, or ``auto``."""
    if value == "auto":
        return value
    try:
        return float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} must be a number of GPUs or 'auto'") from None


def run(args: argparse.Namespace) -> int:
    if args.submit:
        return _submit(args)
    if args.address and args.address.startswith(("http://", "https://")):
        from orthotune.core import OrthotuneError

        raise OrthotuneError(f"--address {args.address!r} is a dashboard (Jobs API) address: add --submit to run "
                             f"the search as a Ray job, or give ray://HEAD:10001 to drive it from here")
    from orthotune.search import launch, resume
    from orthotune.spaces import parse_space

    progress: bool | str = False if args.quiet or args.progress == "off" else args.progress
    if args.resume:
        outcome = resume(args.store, args.resume, parse_space, args.address, progress=progress)
    else:
        outcome = launch(_options(args), progress=progress)  # it checks the inputs before Ray starts
    print(summary(outcome, args.store))
    return OK if outcome.best_config is not None else RUN_FAILED


def _options(args: argparse.Namespace, name: str | None = None) -> LaunchOptions:
    from orthotune.search import LaunchOptions

    space = _space(args)
    auto = args.gpus_per_trial == "auto"
    return LaunchOptions(
        store=args.store, name=name or args.name or default_name(space.name), space=space, samples=args.samples,
        searcher=args.searcher, scheduler=args.scheduler, address=args.address,
        cpus_per_trial=args.cpus_per_trial, gpus_per_trial=0.0 if auto else args.gpus_per_trial,
        gpu_share="auto" if auto else "fixed", concurrency=args.concurrency,
        data_root=args.data_root, seed=args.seed, report_every=args.report_every,
        configs_per_trial=args.configs_per_trial,
        optuna_storage=args.optuna_storage, tensorboard=args.tensorboard, download=args.download,
        retries=args.retries,
    )


def _space(args: argparse.Namespace):
    from orthotune.spaces import resolve_space

    space = resolve_space(args.space)
    return space.with_datasets(args.datasets) if args.datasets else space


def default_name(space_name: str) -> str:
    return f"{space_name}-{datetime.now():%Y%m%d-%H%M%S}"


def _submit(args: argparse.Namespace) -> int:
    """Check the options here (bad input fails before anything is sent), then submit the
    driver as a Ray job and return."""
    from orthotune.cli import jobs
    from orthotune.core import OrthotuneError

    address = jobs.dashboard_address(args.address)
    for flag, value in (("--store", args.store), ("--data-root", args.data_root)):
        if value is not None and "://" not in value and not Path(value).is_absolute():
            raise OrthotuneError(f"{flag} {value!r} is relative; with --submit give an absolute path on the "
                                 f"head node or a URI (s3://, gs://)")
    argv = list(args.words)
    name = args.resume
    if args.space is not None:  # the client names the search, so it can say which one the job runs
        name = _options(args, name=args.name or default_name(_space(args).name)).name
        if args.name is None:
            argv += ["--name", name]
    if not any(word == "--store" or word.startswith("--store=") for word in argv):
        argv += ["--store", args.store]  # the default store is resolved here, once
    space_file = args.space if args.space and Path(args.space).is_file() else None
    job = jobs.submit(address, argv, space_file, metadata={"orthotune_search": name,
                                                                 "orthotune_store": args.store})
    print(job)
    print(f"submitted search {name} as Ray job {job}; follow it with "
          f"`{shlex.join(['orthotune', 'logs', job, '--address', address])}`", file=sys.stderr)
    return OK


def summary(outcome: SearchOutcome, store: str | None = None) -> str:
    """Counts by status (read from the store), then each cell's best config: its Ortho-GConv
    and training values (validation-selected; cells are never compared with each other, so
    there is no single best over a multi-cell search). ``best`` gives whole configs."""
    from orthotune.core import Group, TrainConfig, by_group
    from orthotune.reports import tidy

    shown = [f.name for f in by_group(TrainConfig, Group.ORTHO, Group.TRAIN)]
    counts = ", ".join(f"{n} {status}" for status, n in sorted(outcome.counts.items()))
    lines = [f"search {outcome.name}: {sum(outcome.counts.values())} trials ({counts})"]
    if outcome.best_by_cell:
        lines.append("best config per cell (val_acc: mean over repeats at each repeat's selected epoch):")
    for cell, (objective, config) in outcome.best_by_cell.items():
        values = {key: tidy(config[key]) for key in shown if config.get(key) is not None}
        lines.append(f"  {cell}  val_acc {objective:.4f}  trial {config.get('trial_id', '-')}  "
                     f"{json.dumps(values)}")
    if outcome.best_by_cell:
        where = ["--store", store] if store else []
        lines.append(f"whole configs (for `orthotune train --config`): "
                     f"{shlex.join(['orthotune', 'best', '--search', outcome.name, *where, '--yaml'])}")
    return "\n".join(lines)
