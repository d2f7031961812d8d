"""Write a Slurm batch script that runs a search on a Ray cluster of the job's nodes (--submit: sbatch it).

The script starts Ray on every node of the allocation (one `ray start` per node, one srun step
each), runs `orthotune launch --start-or-resume` against it and stops Ray at the end. Before the
time limit (--stop-before) the search stops with its finished trials stored and the job requeues
itself; a requeued or resubmitted job continues the same search from the store, and a finished
search is not run again. The store (and the data root) must be seen by every node at the same
path: a URI (s3://, gs://) or a shared filesystem; a path on this machine's temporary or memory
filesystems is refused. The search's options are those of `orthotune launch`.

  orthotune slurm --space quick --nodes 2 --cpus-per-node 8 --time 02:00:00 --store /shared/runs/store
  orthotune slurm --space my-space.yaml --name big --nodes 4 --gpus-per-node 1 --gpus-per-trial 0.5 --submit
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from orthotune.cli._common import OK, add_store_argument, add_subset_arguments, subset_words

if TYPE_CHECKING:
    from orthotune.search import LaunchOptions

#: Launch options the job sets itself: the cluster is the job's own.
JOB_SETS = frozenset({"address"})
#: Folders every node has its own of (by convention, whatever their filesystem).
NODE_LOCAL_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm", "/run")
#: Filesystems in a node's memory: never seen by another node.
MEMORY_FILESYSTEMS = frozenset({"tmpfs", "ramfs", "devtmpfs"})
#: Slurm's time formats: minutes, minutes:seconds, hours:minutes:seconds, days-hours,
#: days-hours:minutes, days-hours:minutes:seconds.
SLURM_TIME = re.compile(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?")
#: A partition or account name as written in an #SBATCH line (one word).
SLURM_WORD = re.compile(r"[^\s#'\"\\]+")
#: Slurm's largest --signal lead.
MAX_LEAD_S = 65535
#: How much earlier than asked Slurm may send the warning (its event loop's resolution).
SIGNAL_EARLY_S = 60
#: The least time an allocation must leave the search before the warning: Ray's start (tens of
#: seconds) and some trials. Measured on a one-host Slurm: with --time 2:00 and --stop-before
#: 60 the warning came 30-60 s after the start, before the first trial of each
#: requeued allocation, which therefore requeued again without progress.
MIN_WINDOW_S = 300


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The search (``--space``, the store, the data, launch's options but ``--address``), then
    the job's allocation and the script."""
    from orthotune.cli.launch import add_option_flags
    from orthotune.search import SECTIONS
    from orthotune.spaces import PRESETS

    parser.add_argument("--space", required=True,
                        help=f"a preset ({', '.join(sorted(PRESETS.names()))}) or a space YAML file")
    add_store_argument(parser)
    add_subset_arguments(parser)
    parser.add_argument("--data-root", metavar="DIR",
                        help="raw data folder, seen by every node at this path (default: $ORTHOTUNE_DATA_ROOT)")
    groups = {section: parser if section == SECTIONS[0] else parser.add_argument_group(section)
              for section in SECTIONS}
    add_option_flags(groups, only=lambda name: name not in JOB_SETS)
    job = parser.add_argument_group("the Slurm job")
    job.add_argument("--nodes", type=_count(1), default=1, metavar="N",
                     help="nodes, one Ray node each; the first is the head (default: %(default)s)")
    job.add_argument("--cpus-per-node", type=_count(1), metavar="C",
                     help="CPUs per node, Ray's CPUs there (default: whole nodes, --exclusive)")
    job.add_argument("--gpus-per-node", type=_count(0), default=0, metavar="G",
                     help="GPUs per node (Slurm's --gpus-per-node), Ray's GPUs there (default: %(default)s)")
    job.add_argument("--time", metavar="TIME", help="time limit: [D-]HH:MM:SS, MM:SS or minutes (default: the "
                                                    "partition's)")
    job.add_argument("--partition", metavar="P", help="Slurm partition (default: the cluster's default)")
    job.add_argument("--account", metavar="A", help="Slurm account to charge")
    job.add_argument("--stop-before", type=_count(1), default=300, metavar="SECONDS",
                     help="stop the search this long before the time limit and requeue the job; Slurm may warn up "
                          "to 60 s earlier (default: %(default)s)")
    job.add_argument("--sbatch", action="append", default=[], metavar="OPTION",
                     help="a further sbatch option, written as an #SBATCH line (e.g. --qos=high, --mem=64G); "
                          "repeatable")
    job.add_argument("--single-host", action="store_true",
                     help="every node of this Slurm runs on this machine (a workstation's Slurm, a test): a store "
                          "or data root under its temporary folders is allowed")
    job.add_argument("--script", metavar="PATH",
                     help="where to write the batch script (default: ./NAME.sbatch); its log goes beside it, "
                          "NAME-JOBID.out")
    job.add_argument("--submit", action="store_true", help="submit the script with sbatch and print the job id")


def _count(least: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} must be a whole number >= {least}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"{text!r} must be a whole number >= {least}")
        return value
    return parse


def run(args: argparse.Namespace) -> int:
    from orthotune.cli._slurm_job import BatchJob
    from orthotune.cli.launch import search_options

    options = search_options(args)  # the space, the name and every option checked as `launch` checks them
    store = shared_location(args.store, "--store", args.single_host)
    data_root = _data_root(args)
    _check_job(args, options)
    script = Path(args.script or f"{options.name}.sbatch").absolute()
    job = BatchJob(
        name=options.name, nodes=args.nodes, launch=driver_arguments(args, options, store, data_root),
        python=sys.executable, ray=_ray_command(), output=str(script.with_name(f"{options.name}-%j.out")),
        stop_before_s=args.stop_before, cpus_per_node=args.cpus_per_node, gpus_per_node=args.gpus_per_node,
        time=args.time, partition=args.partition, account=args.account, extra=tuple(args.sbatch),
        env=_forwarded_env(), written_by=shlex.join(["orthotune", "slurm", *args.words]))
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(job.script(), encoding="utf-8")
    if not args.submit:
        print(script)
        print(f"wrote the batch script of search {options.name}; submit it with: {shlex.join(['sbatch', str(script)])}",
              file=sys.stderr)
        return OK
    job_id = submit(script)
    print(job_id)
    print(f"submitted search {options.name} as Slurm job {job_id}; its log: {job.output.replace('%j', job_id)}; "
          f"follow it with `squeue -j {job_id}` and "
          f"`{shlex.join(['orthotune', 'status', '--store', store])}`", file=sys.stderr)
    return OK


def _check_job(args: argparse.Namespace, options: LaunchOptions) -> None:
    """The allocation against itself and against what the search's trials reserve."""
    from dataclasses import replace

    from orthotune.core import OrthotuneError, check
    from orthotune.search import check_inputs

    check_inputs(replace(options, address="auto"))  # data files, trackers (a cluster: no memory check here)
    limit = slurm_seconds(args.time) if args.time else None
    window = None if limit is None else limit - args.stop_before - SIGNAL_EARLY_S
    check(window is None or window >= MIN_WINDOW_S,
          f"--time {args.time} leaves the search {window} s before Slurm's warning (--stop-before {args.stop_before}, "
          f"which Slurm may send up to {SIGNAL_EARLY_S} s early); give it at least {MIN_WINDOW_S} s, or every "
          f"requeued allocation could stop before it stores a trial")
    check(args.stop_before <= MAX_LEAD_S, f"--stop-before {args.stop_before} must be <= {MAX_LEAD_S} (Slurm's limit)")
    for flag, value in (("--partition", args.partition), ("--account", args.account)):
        check(value is None or SLURM_WORD.fullmatch(value) is not None,
              f"{flag} {value!r} must be one word (no spaces, quotes or #)")
    for option in args.sbatch:
        check(option.startswith("-") and option.isprintable(),
              f"--sbatch {option!r} must be one sbatch option, such as --qos=high")
    cpus = args.cpus_per_node
    if cpus is not None and options.cpus_per_trial > cpus:
        raise OrthotuneError(f"--cpus-per-trial {options.cpus_per_trial:g} is more than a node has "
                             f"(--cpus-per-node {cpus}): no trial could run")
    wants_gpus = options.gpus_per_trial > 0 or options.gpu_share == "auto"
    if wants_gpus and args.gpus_per_node == 0:
        raise OrthotuneError("trials reserve GPUs (--gpus-per-trial) but the job asks for none: add --gpus-per-node")
    if options.gpus_per_trial > args.gpus_per_node > 0:
        raise OrthotuneError(f"--gpus-per-trial {options.gpus_per_trial:g} is more than a node has "
                             f"(--gpus-per-node {args.gpus_per_node}): no trial could run")
    if args.gpus_per_node and not wants_gpus:
        print(f"orthotune slurm: note: the job asks for {args.gpus_per_node} GPU(s) per node but trials reserve none "
              f"(add --gpus-per-trial N or auto)", file=sys.stderr)


def slurm_seconds(text: str) -> int:
    """Seconds in a Slurm time limit (``--time``); one line naming the formats otherwise."""
    from orthotune.core import OrthotuneError

    found = SLURM_TIME.fullmatch(text)
    if found is None:
        raise OrthotuneError(f"--time {text!r} must be a Slurm time limit: minutes, MM:SS, HH:MM:SS or "
                             f"D-HH[:MM[:SS]]")
    days, first, second, third = (int(part) if part else None for part in found.groups())
    if days is not None:  # days-hours[:minutes[:seconds]]
        seconds = days * 86400 + first * 3600 + (second or 0) * 60 + (third or 0)
    elif third is not None:  # hours:minutes:seconds
        seconds = first * 3600 + second * 60 + third
    else:  # minutes[:seconds]
        seconds = first * 60 + (second or 0)
    if seconds <= 0:
        raise OrthotuneError(f"--time {text!r} must be longer than zero")
    return seconds


def shared_location(value: str, flag: str, single_host: bool = False) -> str:
    """``value`` as every node of the job sees it: a URI as given, a path made absolute. A
    path surely on one node only is refused (``node_local_reason``), unless ``single_host``."""
    from orthotune.core import OrthotuneError

    if "://" in value:
        return value
    path = Path(value).expanduser().absolute()
    reason = None if single_host else node_local_reason(path)
    if reason is not None:
        raise OrthotuneError(f"{flag} {value!r} {reason}: the job's nodes would not see it; give a folder on a "
                             f"filesystem every node mounts at the same path (home, project or scratch space) or "
                             f"an s3:// or gs:// URI (--single-host: every node is this machine)")
    return str(path)


def node_local_reason(path: Path) -> str | None:
    """Why ``path`` is surely seen by one node only, or None: under a folder every node has of
    its own (/tmp, /var/tmp, /dev/shm, /run, $TMPDIR) or on a filesystem in memory (tmpfs).
    Whether any other path is shared cannot be told from one node; it is accepted."""
    resolved = path.resolve()
    local = [*NODE_LOCAL_FOLDERS, *([os.environ["TMPDIR"]] if os.environ.get("TMPDIR") else [])]
    for folder in local:
        base = Path(folder).resolve()
        if resolved == base or base in resolved.parents:
            return f"is under {folder}, which each node has of its own"
    kind = filesystem_type(resolved)
    if kind in MEMORY_FILESYSTEMS:
        return f"is on a {kind} filesystem, in this node's memory"
    return None


def filesystem_type(path: Path) -> str | None:
    """The type of the filesystem holding ``path`` (the longest mount point above it in
    /proc/mounts), or None where that cannot be read."""
    try:
        lines = Path("/proc/mounts").read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    best: tuple[int, str] | None = None
    for line in lines:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = Path(fields[1].replace("\\040", " ").replace("\\011", "\t"))
        if (path == point or point in path.parents) and (best is None or len(str(point)) > best[0]):
            best = (len(str(point)), fields[2])
    return best[1] if best else None


def _data_root(args: argparse.Namespace) -> str:
    from orthotune.training import DataRoot

    root = DataRoot.resolve(args.data_root)  # a missing one fails here, in one line
    return shared_location(str(root.path), "--data-root", args.single_host)


def driver_arguments(args: argparse.Namespace, options: LaunchOptions, store: str, data_root: str) -> list[str]:
    """``orthotune launch`` words for the job's driver (``--address`` follows in the script):
    start-or-resume the named search, each launch option given here that differs from its
    default, paths made absolute."""
    from orthotune.search import LaunchOptions

    space = args.space if not Path(args.space).is_file() else str(Path(args.space).absolute())
    words = ["launch", "--start-or-resume", "--space", space, "--name", options.name, "--store", store,
             "--data-root", data_root, "--progress", "plain"]
    words += subset_words(args)
    for f in dataclasses.fields(LaunchOptions):
        if f.metadata["cli"] is None or f.name in JOB_SETS | {"name"} or not hasattr(args, f.name):
            continue
        value, flag = getattr(args, f.name), f"--{f.name.replace('_', '-')}"
        if value == (None if f.default is dataclasses.MISSING else f.default):
            continue
        words += [flag if value else f"--no-{flag[2:]}"] if isinstance(value, bool) else [flag, str(value)]
    return words


def _ray_command() -> str:
    """Ray's ``ray`` command of this environment (beside its Python), the same path on every node."""
    import shutil

    from orthotune.core import OrthotuneError

    beside = Path(sys.executable).with_name("ray")
    found = str(beside) if beside.is_file() else shutil.which("ray")
    if found is None:
        raise OrthotuneError(f"Ray's `ray` command is not beside {sys.executable} nor on PATH: install ray[default] "
                             f"in this environment")
    return str(Path(found).absolute())


def _forwarded_env() -> dict[str, str]:
    """orthotune's cache folder, if set here: the job's trials use the same."""
    from orthotune.core import CACHE_ENV

    cache = os.environ.get(CACHE_ENV)
    return {CACHE_ENV: str(Path(cache).expanduser().absolute())} if cache else {}


def submit(script: Path) -> str:
    """``sbatch`` the script; its job id. Slurm's refusal (an unknown partition, more nodes than
    the partition has) is relayed in one line. ``sbatch --test-only`` asks first: a cluster that
    does not enforce partition limits at submission queues a job it can never start."""
    from orthotune.core import OrthotuneError

    for check_only in (True, False):
        command = ["sbatch", "--test-only" if check_only else "--parsable", str(script)]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        except FileNotFoundError:
            raise OrthotuneError(f"--submit needs Slurm's sbatch on PATH; the script is written: {script}") from None
        if done.returncode != 0:
            errors = [line.split("error:", 1)[-1].strip() for line in done.stderr.splitlines() if line.strip()]
            reason = "; ".join(dict.fromkeys(errors)) or f"exit status {done.returncode}"
            raise OrthotuneError(f"sbatch refused the job: {reason} (the script is written: {script})")
    return done.stdout.strip().split(";")[0]
