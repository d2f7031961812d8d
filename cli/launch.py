"""Launch a search (or --resume one) on a local Ray or a Ray cluster; --submit runs it as a Ray job."""

from __future__ import annotations

import argparse
import dataclasses
import json
import shlex
import sys
import typing
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orthotune.cli._common import OK, RUN_FAILED, add_data_arguments, add_store_argument, add_subset_arguments

if TYPE_CHECKING:
    from orthotune.search import LaunchOptions, SearchOutcome


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--space``/``--resume``, the store and the space's datasets, then one flag per launch
    option declared with a CLI section (``orthotune.search.LaunchOptions``: help, default,
    metavar and type from the declaration), the data options and the progress display."""
    from orthotune.search import MODES, SECTIONS
    from orthotune.spaces import PRESETS

    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--space", help=f"a preset ({', '.join(sorted(PRESETS.names()))}) or a space YAML file")
    what.add_argument("--resume", metavar="NAME", help="continue the search NAME whose driver died")
    # (orthotune slurm) one idempotent entry for a batch job that may run several times
    parser.add_argument("--start-or-resume", action="store_true",
                        help="with --space and --name: continue the search if the store holds it (its outcome at "
                             "once if it finished), else start it; what a requeued or resubmitted batch job runs")
    add_store_argument(parser)
    add_subset_arguments(parser)
    groups = {section: parser if section == SECTIONS[0] else parser.add_argument_group(section)
              for section in SECTIONS}
    groups["cluster"].add_argument(
        "--submit", action="store_true",
        help="submit the search as a Ray job to --address http://HEAD:8265, print its id and return: the driver "
             "runs on the head node, so this client may disconnect; --store and --data-root are then paths on the "
             "head node (absolute) or URIs; the orthotune package travels with the job, its dependencies (torch, "
             "PyG, Ray) must be in the head's Python environment")
    views = groups["progress and live views"]
    views.add_argument("--progress", choices=(*MODES, "off"), default="auto",
                       help="auto: a bar on a terminal, plain lines in logs; off: nothing (default: %(default)s)")
    views.add_argument("--quiet", action="store_true", help="no progress display (same as --progress off)")
    groups["search"].add_argument(
        "--plan", action=argparse.BooleanOptionalAction, default=True,
        help="print the plan's total (`orthotune plan`: each cell's cost measured on this machine, cached) before "
             "the first trial, and start the progress ETA from it; local searches only (default: %(default)s)")
    add_option_flags(groups)
    add_data_arguments(groups["cluster"])


def add_option_flags(groups: dict[str, Any], only: Callable[[str], bool] | None = None) -> None:
    """One flag per launch option declared with a CLI section (``only``: those whose name it
    accepts), in its section's group (``groups``: section -> parser or argument group)."""
    from orthotune.search import LaunchOptions

    types = typing.get_type_hints(LaunchOptions)
    for f in dataclasses.fields(LaunchOptions):
        if f.metadata["cli"] is not None and (only is None or only(f.name)):
            groups[f.metadata["cli"]].add_argument(f"--{f.name.replace('_', '-')}", **_flag(f, types[f.name]))


def _flag(f: dataclasses.Field, kind: Any) -> dict[str, Any]:
    """argparse's arguments for the flag of launch option ``f`` (of type ``kind``)."""
    meta = f.metadata
    names = meta["names"]() if meta["names"] else None
    text = meta["doc"] + (f", one of: {', '.join(names)}" if names else "")
    if "(default:" not in text:
        text += " (default: %(default)s)"
    default = None if f.default is dataclasses.MISSING else f.default
    if kind is bool or bool in typing.get_args(kind):  # bool | None: None when neither flag is given
        return {"action": argparse.BooleanOptionalAction, "default": default, "help": text}
    plain = next((k for k in typing.get_args(kind) if k is not type(None)), kind)  # int | None -> int
    return {"type": meta["parse"] or plain, "default": default, "metavar": meta["metavar"], "help": text}


def run(args: argparse.Namespace) -> int:
    if args.submit:
        return _submit(args)
    if args.address and args.address.startswith(("http://", "https://")):
        from orthotune.core import OrthotuneError

        raise OrthotuneError(f"--address {args.address!r} is a dashboard (Jobs API) address: add --submit to run "
                             f"the search as a Ray job, or give ray://HEAD:10001 to drive it from here")
    progress: bool | str = False if args.quiet or args.progress == "off" else args.progress
    if args.start_or_resume:  # (orthotune slurm)
        outcome = _start_or_resume(args, progress)
    elif args.resume:  # the search's record holds its space: resume parses it
        from orthotune.search import resume

        outcome = resume(args.store, args.resume, args.address, progress=progress)
    else:
        options = search_options(args)  # the space and the options, validated before Ray, torch and PyG load
        from orthotune.search import launch

        estimate = _plan_total(options) if args.plan and options.address is None else None
        outcome = launch(options, progress=progress, estimate_s=estimate)  # it checks the inputs before Ray starts
    print(summary(outcome, args.store))
    if outcome.best_by_cell:
        from orthotune.reports import Filters, pair_verdicts

        print(pair_verdicts(args.store, Filters(searches=(outcome.name,))).text())
    return OK if outcome.best_config is not None else RUN_FAILED


def _plan_total(options: LaunchOptions) -> float | None:
    """Print the plan's one-line total (measuring the shapes not cached yet) and return its
    expected seconds of trials, which the progress ETA starts from."""
    from orthotune.plan import plan_search
    from orthotune.search import check_inputs, check_store

    check_inputs(options)  # missing data or too little memory: refused before anything is measured
    check_store(options)  # so is a store that is not ours or a name already taken
    planned = plan_search(options, note=lambda line: print(f"plan: {line}", file=sys.stderr, flush=True))
    print(planned.total_line(), flush=True)
    for line in planned.does_not_fit():  # which cells, and the way out where there is one
        print(f"plan: does not fit: {line}", flush=True)
    for line in planned.runs_alone():  # trials that ask Ray for their memory: they wait for each other
        print(f"plan: runs alone: {line}", flush=True)
    wall = planned.wall_s()
    return None if wall is None else max(0.0, wall - planned.start_s)


def _start_or_resume(args: argparse.Namespace, progress: bool | str) -> SearchOutcome:
    """``--start-or-resume``: the search named on the command line, started, continued or read."""
    from orthotune.core import OrthotuneError

    if args.space is None or args.name is None:
        raise OrthotuneError("--start-or-resume needs --space and --name: the search it starts or continues")
    options = search_options(args)  # validated before Ray, torch and PyG load
    from orthotune.search import start_or_resume

    return start_or_resume(options, progress=progress)


def search_options(args: argparse.Namespace, name: str | None = None) -> LaunchOptions:
    """The launch options from the parsed flags: each declared option by its name."""
    from orthotune.search import LaunchOptions

    space = _space(args)
    given = {f.name: getattr(args, f.name) for f in dataclasses.fields(LaunchOptions) if hasattr(args, f.name)}
    return LaunchOptions(**{**given, "space": space, "name": name or args.name or default_name(space.name)})


def _space(args: argparse.Namespace):
    from orthotune.spaces import resolve_space

    space = resolve_space(args.space)
    space = space.with_datasets(args.datasets) if args.datasets else space
    space = space.with_arms(args.arms) if getattr(args, "arms", None) else space
    return space.with_arms(args.skip_arms, without=True) if getattr(args, "skip_arms", None) else space


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
        name = search_options(args, name=args.name or default_name(_space(args).name)).name
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
    from orthotune.core import Group, TrainConfig, by_group, reads
    from orthotune.reports import tidy

    shown = [f.name for f in by_group(TrainConfig, Group.ORTHO, Group.TRAIN)]
    counts = ", ".join(f"{n} {status}" for status, n in sorted(outcome.counts.items()))
    lines = [f"search {outcome.name}: {sum(outcome.counts.values())} trials ({counts})"]
    if outcome.best_by_cell:
        lines.append("best config per cell (val_acc: mean over repeats at each repeat's selected epoch):")
    for cell, (objective, config) in outcome.best_by_cell.items():
        values = {key: tidy(config[key]) for key in shown
                  if config.get(key) is not None and reads(key, config["backbone"])}
        lines.append(f"  {cell}  val_acc {objective:.4f}  trial {config.get('trial_id', '-')}  "
                     f"{json.dumps(values)}")
    if outcome.best_by_cell:
        where = ["--store", store] if store else []
        lines.append(f"whole configs (for `orthotune train --config`): "
                     f"{shlex.join(['orthotune', 'best', '--search', outcome.name, *where, '--yaml'])}")
    return "\n".join(lines)
