"""List the searches in a store with their trial counts, or show Ray jobs' states (--address)."""

from __future__ import annotations

import argparse
from collections import Counter
from typing import TYPE_CHECKING

from orthotune.cli._common import OK, RUN_FAILED, add_store_argument
from orthotune.core import Status

if TYPE_CHECKING:
    from orthotune.search.store import Store

STATUSES = tuple(s.value for s in Status)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_store_argument(parser)
    parser.add_argument("job", nargs="?", metavar="JOB",
                        help="with --address: the job id `orthotune launch --submit` printed "
                             "(default: list the cluster's jobs)")
    parser.add_argument("--address", metavar="URL",
                        help="a Ray cluster's dashboard address (http://HEAD:8265): show its jobs instead "
                             "of the store (default: $RAY_API_SERVER_ADDRESS or $RAY_ADDRESS when JOB is given)")


def run(args: argparse.Namespace) -> int:
    if args.address or args.job:
        return _job_status(args)
    from orthotune.search.store import Store

    print(format_status(search_status(Store.open(args.store))))
    return OK


def _job_status(args: argparse.Namespace) -> int:
    from orthotune.cli import jobs

    client = jobs.connect(args.address)
    if args.job is None:
        print(jobs.format_jobs(jobs.list_jobs(client)))
        return OK
    info = jobs.job_info(client, args.job)
    print(jobs.format_jobs([info]))
    return RUN_FAILED if info.status == "FAILED" else OK


def search_status(store: Store) -> list[dict]:
    """One entry per search: its state and trial counts by status."""
    trials = store.read("trials").select(["search", "status"]).to_pylist()
    counts: dict[str, Counter] = {}
    for row in trials:
        counts.setdefault(row["search"], Counter())[row["status"]] += 1
    names = sorted(set(store.search_names()) | set(counts))
    entries = []
    for name in names:
        meta = store.search_meta(name) if name in store.search_names() else {}
        entries.append({"search": name, "state": meta.get("state", "unknown"),
                        "created_at": meta.get("created_at", ""), **{s: counts.get(name, Counter())[s]
                                                                      for s in STATUSES}})
    return entries


def format_status(entries: list[dict]) -> str:
    if not entries:
        return "no searches in this store"
    header = f"{'search':<32} {'state':<12} {'trials':>6} " + " ".join(f"{s:>9}" for s in STATUSES)
    rows = [header]
    for e in entries:
        total = sum(e[s] for s in STATUSES)
        rows.append(f"{e['search']:<32} {e['state']:<12} {total:>6} " + " ".join(f"{e[s]:>9}" for s in STATUSES))
    return "\n".join(rows)
