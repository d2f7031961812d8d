"""List the searches in a store with their state and trial counts, or show Ray jobs' states (--address).

A search's state is its record's (running, finished, interrupted, crashed); a running one
whose driver's lease has gone stale (its pid gone from its host, or no heartbeat for a
minute) shows as ``dead``, with the command that continues it. Reading never touches a lease.
The counts come from each search's summary (``summaries/NAME.json``, which its driver
rewrites after every trial): no trial file is opened, whatever the store's size. Only a
search without one (written before summaries existed; ``orthotune store compact`` or
``store check --quarantine`` writes it) is counted from its rows.
"""

from __future__ import annotations

import argparse
import shlex
from collections import Counter
from typing import TYPE_CHECKING

from orthotune.cli._common import OK, RUN_FAILED, add_store_argument
from orthotune.core import SearchState, Status

if TYPE_CHECKING:
    from orthotune.store import Store

STATUSES = tuple(s.value for s in Status)
#: What the state column shows for a running record whose driver's lease is dead.
DEAD = "dead"


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
    from orthotune.store import Store

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
    """One entry per search: its state (``dead`` for a running one whose driver is gone), a
    note saying what to do where there is something to do, and trial counts by status."""
    from orthotune.store import lease_info

    records = store.searches()
    counts = {name: store.summary(name) for name in sorted(set(records) | set(store.table_searches()))}
    for name, found in counts.items():
        if found is None:  # no summary: counted from the rows (two columns of this search)
            counts[name] = Counter(store.trial_statuses(name).values())
    entries = []
    for name in counts:
        meta = records.get(name, {})
        state, note = meta.get("state", "unknown"), ""
        resume = f"continue with: {shlex.join(['orthotune', 'launch', '--resume', name, '--store', store.uri])}"
        if state == SearchState.RUNNING:
            lease = lease_info(store, name)
            if lease is None:
                note = f"marked running, but no driver holds its lease; if none runs it, {resume}"
            elif not lease.alive:
                state = DEAD
                note = (f"driver pid {lease.pid} on {lease.host} stopped heartbeating "
                        f"{lease.heartbeat_age:.0f} s ago; {resume}")
        elif state == SearchState.INTERRUPTED:
            note = f"interrupted; {resume}"
        elif state == SearchState.CRASHED:
            note = f"crashed: {meta.get('reason') or 'no reason recorded'}"
        entries.append({"search": name, "state": state, "note": note, "created_at": meta.get("created_at", ""),
                        **{s: counts[name].get(s, 0) for s in STATUSES}})
    return entries


def format_status(entries: list[dict]) -> str:
    """The table, then one line per search with something to do (dead, interrupted, crashed)."""
    if not entries:
        return "no searches in this store"
    header = f"{'search':<32} {'state':<12} {'trials':>6} " + " ".join(f"{s:>9}" for s in STATUSES)
    rows = [header]
    for e in entries:
        total = sum(e[s] for s in STATUSES)
        rows.append(f"{e['search']:<32} {e['state']:<12} {total:>6} " + " ".join(f"{e[s]:>9}" for s in STATUSES))
    notes = [f"{e['search']}: {e['note']}" for e in entries if e.get("note")]
    return "\n".join(rows + ([""] + notes if notes else []))
