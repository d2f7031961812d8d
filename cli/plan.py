"""What a search will cost before it starts: each cell's trials, measured seconds per epoch and memory, totals.

The space and the options are validated as `launch` validates them (before torch loads);
then each distinct cell shape trains a few epochs as one pack on this machine (a shape at three
depths or more at its smallest and largest, the depths between fitted linearly; on a graph of
10,000 nodes or more (PubMed) a pack is measured on one run and scaled by its runs; shapes are measured
in as many processes as the search runs trials at once here; cached by
shape in orthotune's cache, $ORTHOTUNE_CACHE: a second plan measures nothing), and the plan
prints per cell and arm: trials, repeats, the epoch cap and patience, seconds per epoch of
one pack, the expected epochs per trial under the scheduler, one trial's seconds and peak
memory; then the totals (trials, core-hours, GPU-hours where measured on a GPU, the wall time
on --cpus/--gpus/--nodes, default this machine) and the cells whose one trial needs more
memory than a node has. Every trial includes the service's own overhead per Ray trial and per
report (measured here once where Ray is importable, or read from --service-overhead FILE);
where it is not included, the plan says so.
"""

from __future__ import annotations

import argparse
import json
import sys

from orthotune.cli._common import OK, add_data_arguments, add_subset_arguments
from orthotune.training import EXECUTION_SWITCHES

#: The launch options a plan depends on (the rest: names, trackers, the store, the cluster's address);
#: the GPU switches (``TrainOptions``') change what an epoch costs, so the plan measures with them.
PLANNED = ("samples", "searcher", "scheduler", "cpus_per_trial", "gpus_per_trial", "concurrency",
           "configs_per_trial", "report_every", "budget", "stopping_rule", "first_look", "look_step",
           *EXECUTION_SWITCHES)


def _positive(kind: type) -> object:
    def parse(value: str):
        try:
            number = kind(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r} must be a {kind.__name__} > 0") from None
        if not number > 0 or number != number or number == float("inf"):
            raise argparse.ArgumentTypeError(f"{value!r} must be a {kind.__name__} > 0")
        return number
    parse.__name__ = kind.__name__
    return parse


def _count(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} must be an integer >= 0") from None
    if number < 0:
        raise argparse.ArgumentTypeError(f"{value!r} must be an integer >= 0")
    return number


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from orthotune.cli.launch import add_option_flags
    from orthotune.plan import MEASURE_EPOCHS
    from orthotune.search import SECTIONS
    from orthotune.spaces import PRESETS

    parser.add_argument("--space", required=True,
                        help=f"a preset ({', '.join(sorted(PRESETS.names()))}) or a space YAML file")
    add_subset_arguments(parser)
    where = parser.add_argument_group("the resources (default: this machine, one node)")
    where.add_argument("--cpus", type=_positive(float), metavar="N", help="CPUs per node")
    where.add_argument("--gpus", type=_count, metavar="N", help="GPUs per node")
    where.add_argument("--nodes", type=_positive(int), default=1, metavar="N", help="nodes alike (default: 1)")
    where.add_argument("--memory", type=_positive(float), metavar="GIB", help="memory per node in GiB")
    groups = {section: parser if section == SECTIONS[0] else parser.add_argument_group(section)
              for section in SECTIONS}
    add_option_flags(groups, only=lambda name: name in PLANNED)
    parser.add_argument("--measure-epochs", type=_positive(int), default=MEASURE_EPOCHS, metavar="N",
                        help="epochs timed per cell shape, after its first (default: %(default)s)")
    parser.add_argument("--every-depth", action="store_true",
                        help="measure every depth (default: a shape at three depths or more is measured at its "
                             "smallest and largest, the depths between fitted linearly)")
    parser.add_argument("--full-packs", action="store_true",
                        help="train every pack whole (default: on a graph of 10,000 nodes or more, PubMed's, "
                             "a pack is measured on one run, its figures scaled by the pack's runs)")
    parser.add_argument("--service-overhead", metavar="FILE",
                        help="the service's overhead per Ray trial and per report from this JSON file (what "
                             "bench/service_overhead.py writes; how a plan on a machine without Ray includes it; "
                             "default: measured here once per environment where Ray is importable, else not "
                             "included, which the plan says)")
    parser.add_argument("--remeasure", action="store_true",
                        help="measure every shape and the service's overhead again (ignore the cache)")
    parser.add_argument("--json", action="store_true", help="the plan as JSON (cells, totals, resources, machine)")
    add_data_arguments(groups["cluster"])


def run(args: argparse.Namespace) -> int:
    from orthotune.cli._common import default_store
    from orthotune.cli.launch import search_options

    # validated as launch validates them, before torch loads (the name and store are unused)
    options = search_options(argparse.Namespace(**vars(args), store=default_store(), name=None))
    from orthotune.plan import plan_search, read_service_overhead

    if args.service_overhead is not None:
        read_service_overhead(args.service_overhead)  # a bad file: one line, before anything is measured

    overrides = {"cpus": args.cpus, "gpus": args.gpus, "nodes": args.nodes,
                 "memory_bytes": None if args.memory is None else int(args.memory * 2**30)}
    planned = plan_search(options, {k: v for k, v in overrides.items() if v is not None}, args.measure_epochs,
                          args.remeasure, note=lambda line: print(f"plan: {line}", file=sys.stderr, flush=True),
                          every_depth=args.every_depth, full_packs=args.full_packs,
                          service_file=args.service_overhead, measure_service=True)
    if args.json:
        floor = planned.capped(options.first_look).to_dict()["totals"] if options.budget == "adaptive" else None
        print(json.dumps({**planned.to_dict(), **({"adaptive_floor": floor} if floor else {})}, indent=2))
        return OK
    print(planned.table())
    if options.budget == "adaptive":
        looks = ", ".join(map(str, options.looks().at()))
        print(planned.range_line(options.first_look, f"{options.stopping_rule} rule, looks at {looks} trials per arm"))
    return OK

